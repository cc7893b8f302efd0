package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcdStopTimeout bounds a member's stop.
const etcdStopTimeout = 30 * time.Second

// runEtcd is `gatehouse etcd`: one embedded etcd member, until ctx ends
// (SIGTERM, SIGINT). etcd's own messages are logged from warn up.
// `gatehouse etcd snapshot …` and `gatehouse etcd member …` are the
// member's operations (etcdsnapshot.go, etcdmember.go).
func runEtcd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "snapshot":
			return runEtcdSnapshot(ctx, args[1:], getenv, stdout, stderr)
		case "member":
			return runEtcdMember(ctx, args[1:], getenv, stdout, stderr)
		}
	}
	fs := newFlagSet("etcd", args, stdout, stderr)
	name := fs.String("name", "default", "the member's name, unique in the etcd cluster")
	dataDir := fs.String("data-dir", "", "the member's data directory (default <name>.etcd)")
	client := fs.String("listen-client", "127.0.0.1:2379", "host:port where clients (gatehouse serve --etcd-endpoints) reach this member")
	peer := fs.String("listen-peer", "127.0.0.1:2380", "host:port where the other members reach this one")
	initial := fs.String("initial-cluster", "", "every member of a new cluster as name=http://host:port (its --listen-peer), comma-separated (default: this member alone)")
	state := fs.String("initial-cluster-state", embed.ClusterStateFlagNew, "new (the cluster is being created) or existing (this member was added to a running cluster with etcdctl member add)")
	logFormat := fs.String("log-format", "text", "text or json")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (gatehouse etcd -h lists the flags)", fs.Arg(0))
	}
	if *logFormat != "text" && *logFormat != "json" {
		return fmt.Errorf(`--log-format=%s: must be "text" or "json"`, *logFormat)
	}
	var fc fileConfig
	fc.Log.Format, fc.Log.Level = *logFormat, "info"
	lg := newLogger(fc, stderr)
	stopping := new(atomic.Bool)
	cfg, err := etcdConfig(*name, *dataDir, *client, *peer, *initial, *state, zapLogger(lg.With("component", "etcd"), zapcore.WarnLevel, stopping))
	if err != nil {
		return err
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("etcd: start member %s: %w", *name, err)
	}
	defer stopEtcd(e, stopping, lg)
	lg.Info("etcd member starting", "name", cfg.Name, "data_dir", cfg.Dir, "client", cfg.AdvertiseClientUrls[0].String(),
		"peer", cfg.AdvertisePeerUrls[0].String(), "initial_cluster", cfg.InitialCluster)
	select {
	case <-e.Server.ReadyNotify():
		lg.Info("etcd member ready", "name", cfg.Name, "client", cfg.AdvertiseClientUrls[0].String())
	case err := <-e.Err():
		return fmt.Errorf("etcd: member %s: %w", *name, err)
	case <-ctx.Done():
		return nil // stopped while waiting for its peers
	}
	select {
	case err := <-e.Err():
		return fmt.Errorf("etcd: member %s: %w", *name, err)
	case <-e.Server.StopNotify(): // removed from the cluster (gatehouse etcd member remove), or failed
		return fmt.Errorf("etcd: member %s stopped by itself (removed from the cluster? its log above says why)", *name)
	case <-ctx.Done():
		return nil
	}
}

// stopEtcd stops e, bounded by etcdStopTimeout (a member's stop waits for
// what it serves).
func stopEtcd(e *embed.Etcd, stopping *atomic.Bool, lg *slog.Logger) {
	stopping.Store(true)
	done := make(chan struct{})
	go func() { e.Close(); close(done) }()
	select {
	case <-done:
		lg.Info("stopped cleanly")
	case <-time.After(etcdStopTimeout):
		lg.Warn("etcd member did not stop in time", "timeout", etcdStopTimeout)
	}
}

// etcdConfig builds the member's config from the flags; etcd logs to zl.
func etcdConfig(name, dataDir, client, peer, initial, state string, zl *zap.Logger) (*embed.Config, error) {
	if !nodeIDRe.MatchString(name) {
		return nil, fmt.Errorf("--name=%s: must be 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	cu, err := memberURL("--listen-client", client)
	if err != nil {
		return nil, err
	}
	pu, err := memberURL("--listen-peer", peer)
	if err != nil {
		return nil, err
	}
	if state != embed.ClusterStateFlagNew && state != embed.ClusterStateFlagExisting {
		return nil, fmt.Errorf("--initial-cluster-state=%s: must be new or existing", state)
	}
	if initial == "" {
		initial = name + "=" + pu.String()
	}
	if !strings.Contains(","+initial, ","+name+"=") {
		return nil, fmt.Errorf("--initial-cluster=%s: must list this member (%s=%s)", initial, name, pu.String())
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = name, dataDir
	if cfg.Dir == "" {
		cfg.Dir = name + ".etcd"
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster, cfg.ClusterState = initial, state
	cfg.InitialClusterToken = etcdClusterToken
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zl)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	return cfg, nil
}

// memberURL takes host:port (or http://host:port) as the http URL that
// is both listened on and advertised: its host must be one others reach.
func memberURL(flagName, v string) (url.URL, error) {
	hostPort := strings.TrimPrefix(v, "http://")
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil || host == "" || strings.Contains(hostPort, "/") {
		return url.URL{}, fmt.Errorf("%s=%s: must be host:port, e.g. 127.0.0.1:2379", flagName, v)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return url.URL{}, fmt.Errorf("%s=%s: must name an address others can reach, not %s: it is advertised as is", flagName, v, host)
	}
	return url.URL{Scheme: "http", Host: hostPort}, nil
}

// newFlagSet is the flag set of subcommand cmd, to parse args: -h prints
// the subcommand's help (subcommands[cmd]) and flags on stdout, a bad flag
// prints them on stderr.
func newFlagSet(cmd string, args []string, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("gatehouse "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	help := false
	for _, a := range args {
		if a == "--" {
			break
		}
		help = help || a == "-h" || a == "-help" || a == "--help" || a == "--h"
	}
	fs.Usage = func() {
		w := stderr
		if help {
			w = stdout
		}
		fmt.Fprintf(w, "%s\n\nflags:\n", subcommands[cmd])
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
	}
	return fs
}
