package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
	etcdsnap "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Backup and restore of the cluster's etcd (docs/cluster.md,
// "Operations"): `gatehouse etcd snapshot save` streams a consistent
// snapshot of one member's database (clientv3's Maintenance.Snapshot, the
// file etcdctl snapshot save writes: bbolt plus a sha256 trailer), and
// `gatehouse etcd snapshot restore` makes a member's data dir from it with
// etcd's own restore (etcdutl/v3/snapshot, the same etcd version as the
// embedded server).

// etcdClusterToken is the initial cluster token of `gatehouse etcd`'s
// members, and of the members restored from a snapshot.
const etcdClusterToken = "gatehouse"

// defaultRevisionBump is how far a restore moves etcd's revision past the
// snapshot's (etcd's advice for a restore: no client that saw a later
// revision before the restore may mistake the restored history for it).
const defaultRevisionBump = 1_000_000_000

// etcdBuckets are buckets every etcd v3 database has.
var etcdBuckets = []string{"key", "meta", "members", "lease"}

// etcdEndpoints is --endpoints' default: GATEHOUSE_ETCD_ENDPOINTS, else the
// default member of `gatehouse etcd`.
func etcdEndpoints(getenv func(string) string) string {
	if v := getenv("GATEHOUSE_ETCD_ENDPOINTS"); v != "" {
		return v
	}
	return "http://127.0.0.1:2379"
}

// parseOperands parses the args of subcommand cmd with fs, flags before
// or after the operands, and checks there are as many operands as names
// (FILE, NAME): -h returns errHelp.
func parseOperands(cmd string, fs *flag.FlagSet, args []string, names ...string) ([]string, error) {
	var ops []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			ops = append(ops, args[1:]...)
			break
		}
		ops, args = append(ops, args[0]), args[1:]
	}
	if len(ops) != len(names) {
		want := "no arguments"
		if len(names) > 0 {
			want = strings.Join(names, " ")
		}
		return nil, fmt.Errorf("gatehouse %s: want %s, got %d arguments (gatehouse %s -h)", cmd, want, len(ops), cmd)
	}
	return ops, nil
}

// runOperation runs the subcommand of group (etcd snapshot, etcd member)
// that args name, one of subs.
func runOperation(group string, args []string, stdout io.Writer, subs map[string]func(args []string) error) error {
	sub := ""
	if len(args) > 0 {
		sub = args[0]
	}
	names := slices.Sorted(maps.Keys(subs))
	if run, ok := subs[sub]; ok {
		return run(args[1:])
	}
	switch sub {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, subcommands[group])
		return errHelp
	case "":
		return fmt.Errorf("gatehouse %s: %s?\n\n%s", group, strings.Join(names, ", "), subcommands[group])
	default:
		return fmt.Errorf("gatehouse %s: unknown subcommand %q\n\n%s", group, sub, subcommands[group])
	}
}

// runEtcdSnapshot is `gatehouse etcd snapshot save|restore|status`.
func runEtcdSnapshot(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runOperation("etcd snapshot", args, stdout, map[string]func([]string) error{
		"save":    func(args []string) error { return runSnapshotSave(ctx, args, getenv, stdout, stderr) },
		"restore": func(args []string) error { return runSnapshotRestore(args, stdout, stderr) },
		"status":  func(args []string) error { return runSnapshotStatus(args, stdout, stderr) },
	})
}

func runSnapshotSave(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("etcd snapshot save", args, stdout, stderr)
	endpoints := fs.String("endpoints", etcdEndpoints(getenv), "etcd client URLs, comma-separated (env GATEHOUSE_ETCD_ENDPOINTS); the snapshot is taken from the leader among them")
	force := fs.Bool("force", false, "replace FILE if it exists")
	timeout := fs.Duration("timeout", 5*time.Minute, "bound on the whole save")
	pos, err := parseOperands("etcd snapshot save", fs, args, "FILE")
	if err != nil {
		return err
	}
	eps := splitList(*endpoints)
	if len(eps) == 0 {
		return errors.New("--endpoints: none given")
	}
	acc, err := etcdAccessFromEnv(getenv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	st, ep, err := saveSnapshot(ctx, acc, eps, pos[0], *force)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "saved %s: %d bytes, revision %d, %d keys, etcd storage %s, from %s\n",
		pos[0], st.size, st.Revision, st.TotalKey, orNone(st.Version), ep)
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// saveSnapshot writes a snapshot of the etcd cluster at endpoints to file:
// streamed to a temporary file beside it, synced, checked, then renamed.
// The member it comes from first answers a linearizable read, so every
// change acknowledged before the save began is in the snapshot. It returns
// the snapshot's status and the endpoint it came from.
func saveSnapshot(ctx context.Context, acc etcdAccess, endpoints []string, file string, force bool) (snapshotStatus, string, error) {
	if !force {
		if _, err := os.Lstat(file); err == nil {
			return snapshotStatus{}, "", fmt.Errorf("%s exists: --force replaces it", file)
		}
	}
	ep, err := pickSnapshotMember(ctx, acc, endpoints)
	if err != nil {
		return snapshotStatus{}, "", err
	}
	cli, err := clientv3.New(acc.config(ctx, []string{ep}))
	if err != nil {
		return snapshotStatus{}, "", fmt.Errorf("etcd client for %s: %w", ep, err)
	}
	defer cli.Close()
	if _, err := cli.Get(ctx, "\x00", clientv3.WithCountOnly()); err != nil {
		return snapshotStatus{}, "", fmt.Errorf("etcd at %s: linearizable read before the snapshot: %w (has the cluster a quorum?)", ep, err)
	}
	dir, base := filepath.Split(file)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*.part")
	if err != nil {
		return snapshotStatus{}, "", fmt.Errorf("snapshot: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a rename: nothing
	defer tmp.Close()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return snapshotStatus{}, "", fmt.Errorf("etcd at %s: snapshot: %w", ep, err)
	}
	defer rc.Close()
	if _, err := io.Copy(tmp, rc); err != nil {
		return snapshotStatus{}, "", fmt.Errorf("etcd at %s: snapshot: receive into %s: %w", ep, tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return snapshotStatus{}, "", fmt.Errorf("snapshot: sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return snapshotStatus{}, "", fmt.Errorf("snapshot: close %s: %w", tmp.Name(), err)
	}
	st, err := checkSnapshot(tmp.Name())
	if err != nil {
		return snapshotStatus{}, "", fmt.Errorf("etcd at %s: the snapshot received is not valid: %w", ep, err)
	}
	if force {
		err = os.Rename(tmp.Name(), file)
	} else if err = os.Link(tmp.Name(), file); err == nil { // fails if file appeared meanwhile
		err = os.Remove(tmp.Name())
	}
	if err != nil {
		return snapshotStatus{}, "", fmt.Errorf("snapshot: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return snapshotStatus{}, "", err
	}
	return st, ep, nil
}

// pickSnapshotMember returns the endpoint of the etcd leader among
// endpoints, else of the first member that knows a leader.
func pickSnapshotMember(ctx context.Context, acc etcdAccess, endpoints []string) (string, error) {
	cli, err := clientv3.New(acc.config(ctx, endpoints))
	if err != nil {
		return "", fmt.Errorf("etcd client for %s: %w", strings.Join(endpoints, ","), err)
	}
	defer cli.Close()
	var follower string
	var errs []error
	for _, ep := range endpoints {
		sctx, cancel := context.WithTimeout(ctx, etcdDialTimeout)
		st, err := cli.Status(sctx, ep)
		cancel()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", ep, err))
		case st.Leader != 0 && st.Leader == st.Header.GetMemberId():
			return ep, nil
		case st.Leader != 0 && follower == "":
			follower = ep
		case st.Leader == 0:
			errs = append(errs, fmt.Errorf("%s: no leader", ep))
		}
	}
	if follower != "" {
		return follower, nil
	}
	return "", fmt.Errorf("no etcd member with a leader at %s: %w", strings.Join(endpoints, ","), errors.Join(errs...))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("snapshot: sync %s: %w", dir, err)
	}
	return nil
}

// snapshotStatus is what checkSnapshot found.
type snapshotStatus struct {
	etcdsnap.Status
	size int64 // the file's, trailer included
}

// checkSnapshot checks that path is an etcd v3 snapshot as the Snapshot
// API sends it: a bbolt database whose pages check out and which has
// etcd's buckets, followed by the sha256 of the database.
func checkSnapshot(path string) (snapshotStatus, error) {
	f, err := os.Open(path)
	if err != nil {
		return snapshotStatus{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return snapshotStatus{}, err
	}
	size := fi.Size()
	if size < sha256.Size || size%512 != sha256.Size {
		return snapshotStatus{}, fmt.Errorf("%s: %d bytes, not a database followed by its sha256 (gatehouse etcd snapshot save writes one)", path, size)
	}
	h := sha256.New()
	if _, err := io.CopyN(h, f, size-sha256.Size); err != nil {
		return snapshotStatus{}, fmt.Errorf("%s: %w", path, err)
	}
	trailer := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, trailer); err != nil {
		return snapshotStatus{}, fmt.Errorf("%s: %w", path, err)
	}
	if !bytes.Equal(h.Sum(nil), trailer) {
		return snapshotStatus{}, fmt.Errorf("%s: the sha256 at its end does not match its content (damaged or truncated)", path)
	}
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return snapshotStatus{}, fmt.Errorf("%s: not a bbolt database: %w", path, err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		for _, b := range etcdBuckets {
			if tx.Bucket([]byte(b)) == nil {
				return fmt.Errorf("%s: no bucket %q: not an etcd v3 database", path, b)
			}
		}
		return nil
	})
	db.Close()
	if err != nil {
		return snapshotStatus{}, err
	}
	st, err := etcdsnap.NewV3(zap.NewNop()).Status(path) // checks every page, counts the keys
	if err != nil {
		return snapshotStatus{}, fmt.Errorf("%s: %w", path, err)
	}
	return snapshotStatus{Status: st, size: size}, nil
}

func runSnapshotStatus(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("etcd snapshot status", args, stdout, stderr)
	pos, err := parseOperands("etcd snapshot status", fs, args, "FILE")
	if err != nil {
		return err
	}
	st, err := checkSnapshot(pos[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: valid, %d bytes, revision %d, %d keys, etcd storage %s\n", pos[0], st.size, st.Revision, st.TotalKey, orNone(st.Version))
	return nil
}

func runSnapshotRestore(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("etcd snapshot restore", args, stdout, stderr)
	name := fs.String("name", "default", "the restored member's name (its gatehouse etcd --name)")
	dataDir := fs.String("data-dir", "", "the member's new data directory, absent or empty (default <name>.etcd)")
	peer := fs.String("listen-peer", "127.0.0.1:2380", "host:port of this member's peer URL, when --initial-cluster is not given")
	initial := fs.String("initial-cluster", "", "every member of the restored cluster as name=http://host:port, comma-separated, the same for each member restored (default: this member alone)")
	bump := fs.Uint64("bump-revision", defaultRevisionBump, "move etcd's revision this far past the snapshot's and mark the history before compacted (0: keep the snapshot's)")
	pos, err := parseOperands("etcd snapshot restore", fs, args, "FILE")
	if err != nil {
		return err
	}
	// The member's settings as gatehouse etcd checks them (the client URL
	// is not part of a restore).
	cfg, err := etcdConfig(*name, *dataDir, "127.0.0.1:2379", *peer, *initial, "new", zap.NewNop())
	if err != nil {
		return err
	}
	peers := membersPeers(cfg.InitialCluster)[cfg.Name]
	st, err := checkSnapshot(pos[0])
	if err != nil {
		return err
	}
	if err := restoreSnapshot(pos[0], cfg.Name, cfg.Dir, peers, cfg.InitialCluster, *bump, stderr); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored %s (revision %d, %d keys) into %s as member %s of %s\n",
		pos[0], st.Revision, st.TotalKey, cfg.Dir, cfg.Name, cfg.InitialCluster)
	if *bump > 0 {
		fmt.Fprintf(stdout, "revision moved to %d; the history before is compacted\n", st.Revision+int64(*bump))
	}
	fmt.Fprintf(stdout, "start it: gatehouse etcd --name %s --data-dir %s --listen-peer %s --listen-client HOST:PORT --initial-cluster %s\n",
		cfg.Name, cfg.Dir, strings.TrimPrefix(peers[0], "http://"), cfg.InitialCluster)
	return nil
}

// restoreSnapshot makes data dir dir of member name from the snapshot at
// path, with etcd's restore: the database, then a WAL and a raft
// snapshot naming the members of initialCluster.
func restoreSnapshot(path, name, dir string, peers []string, initialCluster string, bump uint64, stderr io.Writer) (err error) {
	if _, statErr := os.Stat(dir); errors.Is(statErr, os.ErrNotExist) {
		defer func() { // a failed restore leaves no half-made data dir behind
			if err != nil {
				os.RemoveAll(dir)
			}
		}()
	}
	var fc fileConfig
	fc.Log.Format, fc.Log.Level = "text", "info"
	zl := zapLogger(newLogger(fc, stderr).With("component", "etcd"), zapcore.WarnLevel, nil)
	err = etcdsnap.NewV3(zl).Restore(etcdsnap.RestoreConfig{
		SnapshotPath:        path,
		Name:                name,
		OutputDataDir:       dir,
		PeerURLs:            peers,
		InitialCluster:      initialCluster,
		InitialClusterToken: etcdClusterToken,
		RevisionBump:        bump,
		MarkCompacted:       bump > 0,
	})
	if err != nil {
		return fmt.Errorf("etcd snapshot restore into %s: %w", dir, err)
	}
	return nil
}

// membersPeers maps each member of an --initial-cluster to its peer URLs.
func membersPeers(initialCluster string) map[string][]string {
	m := map[string][]string{}
	for _, e := range strings.Split(initialCluster, ",") {
		if n, u, ok := strings.Cut(strings.TrimSpace(e), "="); ok {
			m[n] = append(m[n], u)
		}
	}
	return m
}
