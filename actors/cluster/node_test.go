package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"gatehouse/actors/cluster/etcdtest"
)

const testTTL = 2 * time.Second

// settle bounds how long the tests wait for ownership to converge: far
// above what it takes (about 1 s), because make test runs every package
// at once on two cores.
const settle = 20 * time.Second

// testShards keeps the tests quick; ownership logic does not depend on it.
const testShards = 32

type world struct {
	t      *testing.T
	etcd   *etcdtest.Cluster
	prefix string
	nodes  []*Node
}

// shared is the etcd cluster of the tests that do not harm it; each test
// keeps to its own prefix.
var shared struct {
	sync.Mutex
	c *etcdtest.Cluster
}

// TestMain stops the shared cluster after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared.c != nil {
		shared.c.Close()
	}
	os.Exit(code)
}

func sharedEtcd(t *testing.T) *etcdtest.Cluster {
	shared.Lock()
	defer shared.Unlock()
	if shared.c == nil {
		start := time.Now()
		shared.c = etcdtest.StartShared(t, 3)
		t.Logf("3 etcd members up in %v", time.Since(start))
	}
	return shared.c
}

// newWorld starts nodes on the shared etcd cluster, or on a cluster of
// their own when own is set (a test that kills members).
func newWorld(t *testing.T, nodes int, own bool, handlers ...func(i int) Handler) *world {
	t.Helper()
	w := &world{t: t, prefix: "/" + t.Name()}
	if own {
		w.etcd = etcdtest.Start(t, 3)
	} else {
		w.etcd = sharedEtcd(t)
	}
	for i := range nodes {
		var h Handler
		if len(handlers) > 0 {
			h = handlers[0](i)
		}
		w.nodes = append(w.nodes, w.start(i, h))
	}
	return w
}

func (w *world) start(i int, h Handler) *Node {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), settle)
	defer cancel()
	n, err := Start(ctx, Config{
		Client:  w.etcd.Client(w.t),
		Prefix:  w.prefix,
		NodeID:  fmt.Sprintf("node-%d", i),
		Addr:    fmt.Sprintf("127.0.0.1:%d", 7000+i),
		TTL:     testTTL,
		Shards:  testShards,
		Handler: h,
		// Generous: the tests share two cores with every other package.
		RequestTimeout: 3 * time.Second,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		if n.cancel != nil {
			n.Close()
		}
	})
	return n
}

// settled waits until every shard is owned by its desired owner among the
// live nodes, and by no other, according to each node's own Owns; it
// returns how long it took.
func (w *world) settled(live []*Node, within time.Duration) time.Duration {
	w.t.Helper()
	start := time.Now()
	for {
		ok := true
		ids := make([]string, len(live))
		for i, n := range live {
			ids[i] = n.ID()
		}
		for s := range testShards {
			owners, want := 0, desired(ids, s)
			for _, n := range live {
				if _, own := n.Owns(s); own {
					owners++
					if n.ID() != want {
						owners = -1
					}
				}
			}
			if owners != 1 {
				ok = false
				break
			}
		}
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > within {
			for _, n := range live {
				w.t.Logf("%s owners %v", n.ID(), n.Owners())
			}
			w.t.Fatalf("shards not settled on %d nodes within %v", len(live), within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestOwnershipSpreads(t *testing.T) {
	w := newWorld(t, 3, false)
	t.Logf("settled in %v", w.settled(w.nodes, settle))
	for _, n := range w.nodes {
		owned := 0
		for s := range testShards {
			if _, ok := n.Owns(s); ok {
				owned++
			}
		}
		if owned == 0 {
			t.Errorf("%s owns no shard of %d", n.ID(), testShards)
		}
		if got := len(n.Members()); got != 3 {
			t.Errorf("%s sees %d members", n.ID(), got)
		}
	}
	// Every node agrees on every owner and its epoch (each view read
	// afresh: the owner's own view settles first, the others' follow
	// their watch).
	for s := range testShards {
		for _, n := range w.nodes[1:] {
			deadline := time.Now().Add(time.Second)
			for {
				a, _, ea, _ := w.nodes[0].Owner(s)
				b, _, eb, _ := n.Owner(s)
				if a != "" && a == b && ea == eb {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("shard %d: %s says %s@%d, %s says %s@%d", s, w.nodes[0].ID(), a, ea, n.ID(), b, eb)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}

func TestCrashedNodesShardsMove(t *testing.T) {
	w := newWorld(t, 3, false)
	w.settled(w.nodes, settle)
	w.nodes[1].crash()
	took := w.settled([]*Node{w.nodes[0], w.nodes[2]}, settle)
	t.Logf("survivors own every shard %v after the crash (TTL %v)", took, testTTL)
	// The bound is TTL + 1 s; these runs share two cores with
	// every other package's tests, so the check leaves room.
	if limit := testTTL + 4*time.Second; took > limit {
		t.Errorf("takeover took %v, want ≤ TTL + 4s = %v", took, limit)
	}
}

func TestGracefulLeaveAndJoin(t *testing.T) {
	w := newWorld(t, 2, false)
	w.settled(w.nodes, settle)
	third := w.start(2, nil)
	w.settled(append(w.nodes, third), settle)
	if err := third.Close(); err != nil {
		t.Fatal(err)
	}
	took := w.settled(w.nodes, settle)
	t.Logf("a graceful leave handed over in %v", took)
}

func TestCommitIsFenced(t *testing.T) {
	w := newWorld(t, 2, false)
	w.settled(w.nodes, settle)
	a, b := w.nodes[0], w.nodes[1]
	s := -1
	var epoch int64
	for i := range testShards {
		if e, ok := a.Owns(i); ok {
			s, epoch = i, e
			break
		}
	}
	if s < 0 {
		t.Fatal("node-0 owns nothing")
	}
	ctx := context.Background()
	if err := a.Commit(ctx, s, epoch, Put{Name: "k1", Value: []byte("v1")}); err != nil {
		t.Fatal(err)
	}
	a.crash()
	w.settled([]*Node{b}, settle)
	if err := a.Commit(ctx, s, epoch, Put{Name: "k1", Value: []byte("stale")}); err == nil {
		t.Fatal("the crashed owner's commit succeeded")
	}
	// a's loops are gone; commit through b's client at a's old epoch.
	if err := b.Commit(ctx, s, epoch, Put{Name: "k1", Value: []byte("stale")}); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("commit at the old epoch = %v, want ErrNotOwner", err)
	}
	got, err := b.Load(ctx, s)
	if err != nil || string(got["k1"]) != "v1" {
		t.Fatalf("load = %q, %v; want the acknowledged v1", got, err)
	}
	newEpoch, _ := b.Owns(s)
	if err := b.Commit(ctx, s, newEpoch, Put{Name: "k1", Value: nil}); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Load(ctx, s); len(got) != 0 {
		t.Fatalf("after delete: %q", got)
	}
}

func TestPartitionedNodeDemotes(t *testing.T) {
	w := newWorld(t, 2, false)
	w.settled(w.nodes, settle)
	a, b := w.nodes[0], w.nodes[1]
	before := map[int]int64{}
	for s := range testShards {
		if e, ok := a.Owns(s); ok {
			before[s] = e
		}
	}
	a.partition(true)
	start := time.Now()
	for a.Live() {
		if time.Since(start) > testTTL {
			t.Fatal("a node without keepalives still believes its lease after the TTL")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for s := range testShards {
		if _, ok := a.Owns(s); ok {
			t.Fatalf("partitioned node still owns shard %d", s)
		}
	}
	w.settled([]*Node{b}, settle)
	a.partition(false)
	w.settled(w.nodes, settle)
	for s, old := range before {
		if e, ok := a.Owns(s); ok && e == old {
			t.Errorf("shard %d back at its old epoch %d", s, e)
		}
	}
}

func TestEtcdLeaderKilled(t *testing.T) {
	w := newWorld(t, 3, true)
	w.settled(w.nodes, settle)
	ctx, cancel := context.WithTimeout(context.Background(), 2*settle)
	defer cancel()
	l := w.etcd.WaitLeader(ctx)
	if l < 0 {
		t.Fatal("no leader")
	}
	w.etcd.Kill(l)
	killed := time.Now()
	// Commits resume once a new leader is elected, and no node lost its
	// shards over the election.
	var mu sync.Mutex
	var lost int
	for _, n := range w.nodes {
		for s := range testShards {
			if e, ok := n.Owns(s); ok {
				deadline := time.Now().Add(settle)
				for {
					err := n.Commit(ctx, s, e, Put{Name: "probe", Value: []byte("x")})
					if err == nil {
						break
					}
					if errors.Is(err, ErrNotOwner) || time.Now().After(deadline) {
						mu.Lock()
						lost++
						mu.Unlock()
						t.Logf("shard %d on %s: %v", s, n.ID(), err)
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d shards could not commit after the leader's death", lost)
	}
	t.Logf("every shard committed %v after the leader's death", time.Since(killed))
	w.settled(w.nodes, settle)
}
