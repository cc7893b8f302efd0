package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"gatehouse/actors/cluster/etcdtest"
	"gatehouse/actors/cluster/transport"
)

// freeAddr returns a loopback host:port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// etcdChild is a `gatehouse etcd` process.
type etcdChild struct {
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan struct{}
}

// startEtcdChild runs `gatehouse etcd` with args and waits until the
// member is ready.
func startEtcdChild(t *testing.T, args ...string) *etcdChild {
	t.Helper()
	e := launchEtcdChild(t, args...)
	e.waitReady(t)
	return e
}

// launchEtcdChild runs `gatehouse etcd` with args (members of a new
// cluster are ready only once a majority runs: launch them all, then
// waitReady for each).
func launchEtcdChild(t *testing.T, args ...string) *etcdChild {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	e := &etcdChild{logs: &syncBuffer{}, done: make(chan struct{})}
	e.cmd = exec.Command(bin, append([]string{"etcd", "--log-format", "json"}, args...)...)
	e.cmd.Env = environWithout("GATEHOUSE_")
	e.cmd.Stdout, e.cmd.Stderr = e.logs, e.logs
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.cmd.Wait(); close(e.done) }()
	t.Cleanup(func() { _ = e.cmd.Process.Kill(); <-e.done })
	return e
}

// waitReady waits until the member says it is ready.
func (e *etcdChild) waitReady(t *testing.T) {
	t.Helper()
	exited := false
	if !eventually(30*time.Second, func() bool {
		select {
		case <-e.done: // not ProcessState: Wait may set it at any time
			exited = true
			return true
		default:
		}
		return strings.Contains(e.logs.String(), `"msg":"etcd member ready"`)
	}) || exited {
		t.Fatalf("gatehouse etcd did not become ready:\n%s", e.logs.String())
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (e *etcdChild) stop(t *testing.T) {
	t.Helper()
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(40 * time.Second):
		t.Fatalf("gatehouse etcd did not stop on SIGTERM:\n%s", e.logs.String())
	}
	if code := e.cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(e.logs.String(), `"msg":"stopped cleanly"`) {
		t.Fatalf("gatehouse etcd exit code %d:\n%s", code, e.logs.String())
	}
}

func etcdClient(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestEtcdSubcommand: `gatehouse etcd` runs a member that answers a
// client's Put and Get, stops on SIGTERM, and keeps what it acknowledged
// across a restart on its data dir.
func TestEtcdSubcommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "e1")
	client, peer := freeAddr(t), freeAddr(t)
	args := []string{"--name", "e1", "--data-dir", dir, "--listen-client", client, "--listen-peer", peer}
	e := startEtcdChild(t, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli := etcdClient(t, "http://"+client)
	if _, err := cli.Put(ctx, "/test/k", "v1"); err != nil {
		t.Fatalf("Put: %v\n%s", err, e.logs.String())
	}
	if resp, err := cli.Get(ctx, "/test/k"); err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
		t.Fatalf("Get = %v, %v", resp, err)
	}
	cli.Close() // else the member waits for it, up to etcd's request timeout (7 s)
	e.stop(t)
	if strings.Contains(e.logs.String(), `"level":"ERROR"`) {
		t.Errorf("errors logged by a clean start and stop:\n%s", e.logs.String())
	}

	e = startEtcdChild(t, args...)
	cli = etcdClient(t, "http://"+client)
	if resp, err := cli.Get(ctx, "/test/k"); err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
		t.Fatalf("Get after a restart = %v, %v", resp, err)
	}
	cli.Close()
	e.stop(t)
}

// TestEtcdFlags: gatehouse etcd's help, and its flag errors, which name
// the flag and start nothing.
func TestEtcdFlags(t *testing.T) {
	code, stdout, stderr := runSplit(t, "", nil, "etcd", "-h")
	if code != 0 || stderr != "" || !strings.Contains(stdout, "usage: gatehouse etcd [flags]") || !strings.Contains(stdout, "-initial-cluster") {
		t.Errorf("etcd -h = %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = runSplit(t, "", nil, "--help")
	if code != 0 || !strings.Contains(stdout, "gatehouse etcd [flags]") {
		t.Errorf("--help = %d, lacks the etcd subcommand:\n%s", code, stdout)
	}
	code, stdout, _ = runSplit(t, "", nil, "serve", "-h")
	for _, w := range []string{"-etcd-endpoints", "GATEHOUSE_ETCD_ENDPOINTS", "-node-id", "GATEHOUSE_NODE_ID", "-cluster-listen", "GATEHOUSE_CLUSTER_LISTEN", "docs/cluster.md"} {
		if code != 0 || !strings.Contains(stdout, w) {
			t.Errorf("serve -h = %d, lacks %q:\n%s", code, w, stdout)
		}
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--listen-client", "0.0.0.0:2379"}, "--listen-client=0.0.0.0:2379: must name an address others can reach"},
		{[]string{"--listen-peer", "2380"}, "--listen-peer=2380: must be host:port"},
		{[]string{"--name", "a b"}, "--name=a b: must be 1 to 63 letters"},
		{[]string{"--initial-cluster", "other=http://127.0.0.1:1"}, "--initial-cluster=other=http://127.0.0.1:1: must list this member (default=http://127.0.0.1:2380)"},
		{[]string{"--initial-cluster-state", "maybe"}, "--initial-cluster-state=maybe: must be new or existing"},
		{[]string{"--log-format", "xml"}, `--log-format=xml: must be "text" or "json"`},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		code, _, stderr := runSplit(t, dir, nil, append([]string{"etcd"}, tt.args...)...)
		if code == 0 || !strings.Contains(stderr, tt.want) {
			t.Errorf("etcd %v = %d, stderr %q; want %q", tt.args, code, stderr, tt.want)
		}
		if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			t.Errorf("etcd %v created %v", tt.args, ents)
		}
	}
}

// clusterVars are the variables of a cluster node on etcd endpoint ep
// (without TLS between the nodes: cluster.insecure).
func clusterVars(ep, masterKey string) []string {
	return []string{"GATEHOUSE_ETCD_ENDPOINTS=" + ep, "GATEHOUSE_MASTER_KEY=" + masterKey, "GATEHOUSE_CLUSTER_INSECURE=true",
		"GATEHOUSE_ADMIN_EMAIL=" + adminEmail, "GATEHOUSE_ADMIN_PASSWORD=" + adminPassword}
}

// clusterEnv is the environment of a cluster node on etcd endpoint ep.
func clusterEnv(ep, masterKey string) []string {
	return append(environWithout("GATEHOUSE_"), clusterVars(ep, masterKey)...)
}

// TestClusterMasterKey: a node in cluster mode starts on etcd, records
// the master key's fingerprint there and stops cleanly; a node with
// another key is refused before it writes anything in its data dir; an
// etcd out of reach stops the start within the request timeout.
func TestClusterMasterKey(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	ep := etcd.Endpoint(0)
	c := startServe(t, "", clusterEnv(ep, testMasterKey), "serve", "--config", writeConfig(t, t.TempDir(), nil),
		"--node-id", "n1", "--cluster-listen", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := etcd.Client(t).Get(ctx, "/gatehouse/masterkey.id")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get masterkey.id = %v, %v", resp, err)
	}
	key, _ := hex.DecodeString(testMasterKey)
	if err := checkFingerprint(resp.Kvs[0].Value, key); err != nil {
		t.Errorf("masterkey.id %q: %v", resp.Kvs[0].Value, err)
	}
	if strings.Contains(string(resp.Kvs[0].Value), testMasterKey) {
		t.Errorf("masterkey.id holds the key: %q", resp.Kvs[0].Value)
	}

	other := strings.Repeat("ab", 32)
	dir := t.TempDir()
	code, _, stderr := runSplit(t, "", clusterVars(ep, other), "serve", "--config", writeConfig(t, dir, nil),
		"--node-id", "n2", "--cluster-listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(stderr, "master key does not match the cluster's: the key from GATEHOUSE_MASTER_KEY is not the key of the cluster under /gatehouse") {
		t.Errorf("a node with another key = %d:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, fingerprintFile)); err == nil {
		t.Errorf("the refused node wrote %s", fingerprintFile)
	}

	start := time.Now()
	code, _, stderr = runSplit(t, "", clusterVars(freeAddr(t), testMasterKey),
		"serve", "--config", writeConfig(t, t.TempDir(), nil), "--node-id", "n3", "--cluster-listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(stderr, "is etcd running and reachable?") || time.Since(start) > 15*time.Second {
		t.Errorf("a node without etcd = %d after %v:\n%s", code, time.Since(start), stderr)
	}

	c.stop(t)
	if !strings.Contains(c.logs.String(), `"msg":"stopped cleanly"`) {
		t.Errorf("no clean stop:\n%s", c.logs.String())
	}
}

// TestClusterServeJoins: two nodes in cluster mode join the cluster, own
// every shard between them, and leave it when they stop.
func TestClusterServeJoins(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	ep := etcd.Endpoint(0)
	var nodes []*child
	for _, id := range []string{"n1", "n2"} {
		c := startServe(t, "", clusterEnv(ep, testMasterKey), "serve", "--config", writeConfig(t, t.TempDir(), nil),
			"--node-id", id, "--cluster-listen", "127.0.0.1:0")
		if !eventually(10*time.Second, func() bool {
			logs := c.logs.String()
			i := strings.Index(logs, `"msg":"joined the cluster"`)
			return i >= 0 && strings.Contains(logs[i:], `"node_id":"`+id+`"`) && strings.Contains(logs[i:], `"shards":256`)
		}) {
			t.Fatalf("node %s did not log that it joined:\n%s", id, c.logs.String())
		}
		nodes = append(nodes, c)
	}
	cli := etcd.Client(t)
	count := func(prefix string) int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	if !eventually(15*time.Second, func() bool { return count("/gatehouse/members/") == 2 && count("/gatehouse/shards/") == 256 }) {
		t.Fatalf("members %d, shards owned %d; want 2 and 256", count("/gatehouse/members/"), count("/gatehouse/shards/"))
	}
	for _, c := range nodes {
		c.stop(t)
	}
	if n := count("/gatehouse/members/"); n != 0 {
		t.Errorf("%d members left after both nodes stopped", n)
	}
}

type admitFunc func(ctx context.Context, keyID string) transport.Verdict

func (f admitFunc) AdmitOwned(ctx context.Context, keyID string) transport.Verdict {
	return f(ctx, keyID)
}

// TestLateAdmitter: before the actors exist, forwarded admissions are
// answered "not the owner"; then the actors answer them.
func TestLateAdmitter(t *testing.T) {
	var l lateAdmitter
	if v := l.AdmitOwned(context.Background(), "k1"); v.Code != transport.NotOwner {
		t.Errorf("AdmitOwned before set = %+v, want NotOwner", v)
	}
	l.set(admitFunc(func(_ context.Context, keyID string) transport.Verdict {
		if keyID != "k1" {
			return transport.Verdict{Code: transport.KeyInvalid}
		}
		return transport.Verdict{Code: transport.Admitted, Limit: 10, Remaining: 9}
	}))
	if v := l.AdmitOwned(context.Background(), "k1"); v != (transport.Verdict{Code: transport.Admitted, Limit: 10, Remaining: 9}) {
		t.Errorf("AdmitOwned after set = %+v, want the actors' verdict", v)
	}
}

// TestZapLogger: etcd's zap messages reach slog from the minimum level
// up, with their fields and level; once stopping, at debug level.
func TestZapLogger(t *testing.T) {
	var buf bytes.Buffer
	lg := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	stopping := new(atomic.Bool)
	zl := zapLogger(lg, zapcore.WarnLevel, stopping).Named("raft").With(zap.String("member", "m1"))
	zl.Info("quiet")
	zl.Warn("slow fdatasync", zap.Duration("took", time.Second), zap.Int("n", 3))
	zl.Error("lost peer")
	stopping.Store(true)
	zl.Error("closed listener")
	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		delete(m, "time")
		got = append(got, m)
	}
	want := []map[string]any{
		{"level": "WARN", "msg": "slow fdatasync", "logger": "raft", "member": "m1", "took": float64(time.Second), "n": float64(3)},
		{"level": "ERROR", "msg": "lost peer", "logger": "raft", "member": "m1"},
		{"level": "DEBUG", "msg": "closed listener", "logger": "raft", "member": "m1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("logged (-want +got):\n%s", diff)
	}
}
