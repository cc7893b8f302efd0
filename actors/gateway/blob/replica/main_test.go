package replica

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"gatehouse/actors/cluster/transport"
	"gatehouse/actors/gateway/blob"
	"gatehouse/wal/waltest"
)

// One transport per process (its start replaces grpc's global logger,
// which races with the grpc traffic of a transport started before; see
// package transport): node n0 is this test process, nodes n1 and n2 are
// this test binary started again with peerEnv set, each with its own
// transport and Store. The test drives a peer through a control service
// on the peer's own transport (ctlService).
const (
	peerEnv    = "GATEHOUSE_REPLICA_PEER"
	ctlService = "blob-test-ctl"
)

var (
	local *transport.Transport  // n0's
	slot  atomic.Pointer[Store] // the Store n0's transport serves
	peers [2]string             // the transport addresses of n1, n2
)

func TestMain(m *testing.M) {
	if id := os.Getenv(peerEnv); id != "" {
		runPeer(id)
		return
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	for i := range peers {
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), fmt.Sprintf("%s=n%d", peerEnv, i+1))
		stdin, _ := child.StdinPipe()
		stdout, _ := child.StdoutPipe()
		child.Stderr = os.Stderr
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "start peer process:", err)
			return 1
		}
		defer child.Wait()
		defer stdin.Close() // a peer exits when its stdin closes
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			fmt.Fprintln(os.Stderr, "peer process address:", err)
			return 1
		}
		peers[i] = strings.TrimSpace(line)
	}
	tr, err := startTransport(func() *Store { return slot.Load() })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer tr.Close()
	local = tr
	return m.Run()
}

// startTransport starts a transport serving Service through the Store
// current returns.
func startTransport(current func() *Store) (*transport.Transport, error) {
	tr, err := transport.Start("127.0.0.1:0", nil, time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	err = tr.Handle(Service, func(ctx context.Context, req []byte) ([]byte, error) {
		if st := current(); st != nil {
			return st.Serve(ctx, req)
		}
		return nil, errors.New("no store")
	})
	if err != nil {
		tr.Close()
		return nil, err
	}
	return tr, nil
}

// A peer's control commands (JSON in, JSON out).
type ctlReq struct {
	Op      string   // reset, put_local, put, has, damage, counter
	Members []Member `json:",omitempty"` // reset: what Members returns
	Data    []byte   `json:",omitempty"` // put_local, put
	Ref     blob.Ref // has, damage
	Name    string   `json:",omitempty"` // counter
	Labels  []string `json:",omitempty"`
}

type ctlResp struct {
	Ref   blob.Ref
	Has   bool
	Value float64
}

// peerNode is a peer process's state.
type peerNode struct {
	id   string
	tr   *transport.Transport
	st   atomic.Pointer[Store]
	dir  string
	dirs []string
}

func runPeer(id string) {
	p := &peerNode{id: id}
	tr, err := startTransport(p.st.Load)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	p.tr = tr
	if err := tr.Handle(ctlService, p.control); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(tr.Addr())
	io.Copy(io.Discard, os.Stdin)
	tr.Close()
	for _, d := range p.dirs {
		os.RemoveAll(d)
	}
}

func (p *peerNode) control(ctx context.Context, b []byte) ([]byte, error) {
	var req ctlReq
	if err := json.Unmarshal(b, &req); err != nil {
		return nil, err
	}
	var resp ctlResp
	st := p.st.Load()
	if st == nil && req.Op != "reset" {
		return nil, errors.New("reset first")
	}
	switch req.Op {
	case "reset": // a fresh store on a fresh dir
		dir, err := os.MkdirTemp("", "replica-peer-")
		if err != nil {
			return nil, err
		}
		p.dirs = append(p.dirs, dir)
		loc, err := blob.New(blob.Config{Dir: dir, NoSync: true}, nil, nil)
		if err != nil {
			return nil, err
		}
		members := req.Members
		st, err := New(testConfig(loc, p.id, p.tr, func() []Member { return members }, prometheus.NewRegistry(), nil))
		if err != nil {
			return nil, err
		}
		p.dir = dir
		p.st.Store(st)
	case "put_local":
		ref, _, err := st.Local().Put(bytes.NewReader(req.Data), 32<<20)
		if err != nil {
			return nil, err
		}
		st.Release(ref)
		resp.Ref = ref
	case "put":
		ref, _, err := st.Put(ctx, bytes.NewReader(req.Data), 32<<20)
		if err != nil {
			return nil, err
		}
		st.Release(ref)
		resp.Ref = ref
	case "has":
		resp.Has = st.Local().Verify(req.Ref) == nil
	case "damage":
		if err := damageFile(p.dir, req.Ref); err != nil {
			return nil, err
		}
	case "counter":
		v, err := st.counter(req.Name, req.Labels...)
		if err != nil {
			return nil, err
		}
		resp.Value = v
	default:
		return nil, fmt.Errorf("unknown op %q", req.Op)
	}
	return json.Marshal(resp)
}

// testConfig is the Config of every node in the tests: short timeouts.
func testConfig(loc *blob.Store, id string, tr *transport.Transport, members func() []Member, reg prometheus.Registerer, lg *slog.Logger) Config {
	return Config{Local: loc, NodeID: id, Addr: tr.Addr(), Transport: tr, Members: members,
		CallTimeout: 500 * time.Millisecond, PushTimeout: 3 * time.Second, FetchTimeout: 3 * time.Second,
		Logger: lg, Registerer: reg}
}

// ctl sends a control command to peer i (0: n1, 1: n2).
func ctl(t *testing.T, i int, req ctlReq) ctlResp {
	t.Helper()
	b, _ := json.Marshal(req)
	out, err := local.Call(context.Background(), peers[i], ctlService, b, 10*time.Second)
	if err != nil {
		t.Fatalf("n%d %s: %v", i+1, req.Op, err)
	}
	var resp ctlResp
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

// allMembers are n0, n1 and n2.
func allMembers() []Member {
	return []Member{{ID: "n0", Addr: local.Addr()}, {ID: "n1", Addr: peers[0]}, {ID: "n2", Addr: peers[1]}}
}

// deadAddr is a transport address nothing listens on.
const deadAddr = "127.0.0.1:1"

// node0 is this process's node in a test.
type node0 struct {
	*Store
	dir string
}

// setup gives n0 a fresh Store whose Members returns members, and resets
// the peers with the three nodes as their members. tune adjusts n0's
// Config.
func setup(t *testing.T, members []Member, tune func(*Config)) *node0 {
	t.Helper()
	for i := range peers {
		ctl(t, i, ctlReq{Op: "reset", Members: allMembers()})
	}
	dir := t.TempDir()
	loc, err := blob.New(blob.Config{Dir: dir, NoSync: true}, waltest.Logger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(loc, "n0", local, func() []Member { return members }, prometheus.NewPedanticRegistry(), waltest.Logger(t))
	if tune != nil {
		tune(&cfg)
	}
	st, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	slot.Store(st)
	t.Cleanup(func() { slot.Store(nil) })
	return &node0{Store: st, dir: dir}
}

// counter reads one of the Store's counters.
func (s *Store) counter(name string, labels ...string) (float64, error) {
	vecs := map[string]*prometheus.CounterVec{"pushes": s.m.pushes, "fetches": s.m.fetches,
		"peer_failures": s.m.peerFailures, "bytes": s.m.bytes}
	vec, ok := vecs[name]
	if !ok {
		return 0, fmt.Errorf("no counter %q", name)
	}
	c, err := vec.GetMetricWithLabelValues(labels...)
	if err != nil {
		return 0, err
	}
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0, err
	}
	return m.GetCounter().GetValue(), nil
}

func (n *node0) counter(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, err := n.Store.counter(name, labels...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// damageFile flips one byte of the copy of ref under dir, in place.
func damageFile(dir string, ref blob.Ref) error {
	h := ref.String()
	p := filepath.Join(dir, "sha256", h[:2], h[2:])
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	b[len(b)/2] ^= 0xff
	return os.WriteFile(p, b, 0o600)
}

func refOf(b []byte) blob.Ref { return blob.Ref(sha256.Sum256(b)) }
