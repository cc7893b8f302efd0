package gateway

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/clock"
)

// sharedLocks stand for the cluster's entity locks in one process: one
// mutex per name across the nodes, and a holder that may go on only once
// its follower has applied everything in the log when it got the lock
// (cluster.Locks waits for the previous holder's writes).
type sharedLocks struct {
	mu  sync.Mutex
	m   map[string]*sync.Mutex
	log *actorstest.SharedLog
}

type nodeLocks struct {
	l  *sharedLocks
	cn *clusterNode
}

func (n nodeLocks) Lock(ctx context.Context, name string) (func(), error) {
	n.l.mu.Lock()
	mu := n.l.m[name]
	if mu == nil {
		mu = &sync.Mutex{}
		n.l.m[name] = mu
	}
	n.l.mu.Unlock()
	mu.Lock()
	end := n.l.log.Len()
	for {
		if n.cn.f.Applied() >= end {
			return mu.Unlock, nil
		}
		if ctx.Err() != nil {
			mu.Unlock()
			return nil, ctx.Err()
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// startBudgetCluster starts names' nodes in cluster mode (NodeID set) on
// one shared log, with the budget locks (unless noLocks).
func startBudgetCluster(t *testing.T, noLocks bool, names ...string) (*actorstest.SharedLog, []*clusterNode, *clock.Fake) {
	t.Helper()
	log := actorstest.NewSharedLog()
	locks := &sharedLocks{m: map[string]*sync.Mutex{}, log: log}
	clk := clock.NewFake(actorstest.T0)
	var nodes []*clusterNode
	for i, name := range names {
		cfg := DefaultConfig()
		cfg.NodeID = name
		cfg.TenantShards = 3 + i
		n := newNode(t, cfg, func(g *Gateway) {
			g.wrapLog = nodeLog(log, name)
		})
		n.Clock = clk
		cn := &clusterNode{name: name, gw: start(n)}
		cn.f = log.Follow(t, name, cn.gw)
		if !noLocks {
			cn.gw.SetBudgetLocker(nodeLocks{locks, cn})
		}
		nodes = append(nodes, cn)
	}
	return log, nodes, clk
}

// TestClusterBudgetNeverOverspent: three nodes spend one budget at once,
// every call using its whole worst case; what the calls admitted on all
// nodes together never exceeds the caps, every node ends with the same
// ledger, and it counts exactly what was spent. Without the budget lock
// (each node deciding its holds on a ledger that may miss another's
// latest hold, as a lock holder paused past its lease would) the holds
// decided on a stale ledger are void, in log order on every node: many
// more calls wait or fail (unavailable after 8 void holds in a row), but
// the caps still hold.
func TestClusterBudgetNeverOverspent(t *testing.T) {
	const capTokens, capNano = 300_000, 400_000_000 // 0.4 USD
	run := func(t *testing.T, noLocks bool) (admittedT, admittedN, unavailable int64) {
		log, nodes, _ := startBudgetCluster(t, noLocks, "a", "b", "c")
		b, err := nodes[0].gw.CreateBudget(ctx(t), BudgetInput{Subject: &BudgetSubject{SubjectUser, "alice"}, Period: ptr(PeriodTotal),
			MaxTokens: ptr(int64(capTokens)), MaxUSD: ptr(float64(capNano) / 1e9)})
		if err != nil {
			t.Fatal(err)
		}
		settle(t, log, nodes)
		var tokens, nano, unavail atomic.Int64
		var wg, flushers sync.WaitGroup
		stop := make(chan struct{})
		for i, cn := range nodes {
			flushers.Go(func() { // flushes, as Tick does
				for {
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Millisecond):
						if err := cn.gw.FlushBudgets(ctx(t), false); err != nil {
							t.Error(err)
						}
					}
				}
			})
			for w := range 4 {
				r := rand.New(rand.NewPCG(uint64(i), uint64(w)))
				wg.Add(1)
				go func() {
					defer wg.Done()
					for refused := 0; refused < 30; {
						c := BudgetCall{User: "alice", Nano: 1_000_000 + r.Int64N(2_000_000), Tokens: 500 + r.Int64N(4000)}
						h, err := cn.gw.ReserveBudgets(ctx(t), c)
						if errors.Is(err, ErrBudgetExceeded) {
							refused++
							continue
						}
						if noLocks && errors.Is(err, actors.ErrUnavailable) {
							unavail.Add(1)
							refused++
							continue
						}
						if err != nil {
							t.Error(err)
							return
						}
						tokens.Add(c.Tokens)
						nano.Add(c.Nano)
						cn.gw.SettleBudgets(h, c.Nano, c.Tokens)
					}
				}()
			}
		}
		wg.Wait()
		close(stop)
		flushers.Wait()
		for _, cn := range nodes {
			if err := cn.gw.FlushBudgets(ctx(t), true); err != nil {
				t.Fatal(err)
			}
		}
		settle(t, log, nodes)
		var first Budget
		for i, cn := range nodes {
			got, err := cn.gw.GetBudget(ctx(t), b.ID.String())
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = got
			} else if got.SpentTokens != first.SpentTokens || got.SpentUSD != first.SpentUSD || got.ReservedTokens != first.ReservedTokens {
				t.Errorf("node %s: %+v; node a: %+v", cn.name, got, first)
			}
			if got.SpentTokens != tokens.Load() || got.SpentUSD != nanoUSD(nano.Load()) || got.ReservedTokens != 0 || got.ReservedUSD != 0 {
				t.Errorf("node %s: spent %d tokens %v USD, reserved %d %v; the calls used %d tokens %v USD",
					cn.name, got.SpentTokens, got.SpentUSD, got.ReservedTokens, got.ReservedUSD, tokens.Load(), nanoUSD(nano.Load()))
			}
		}
		return tokens.Load(), nano.Load(), unavail.Load()
	}
	t.Run("locked", func(t *testing.T) {
		tk, n, _ := run(t, false)
		t.Logf("admitted %d of %d tokens, %d of %d nano-USD", tk, capTokens, n, capNano)
		if tk > capTokens || n > capNano {
			t.Errorf("admitted %d tokens, %d nano-USD: over the caps %d, %d", tk, capTokens, n, capNano)
		}
		if tk < capTokens*9/10 && n < capNano*9/10 {
			t.Errorf("admitted %d tokens, %d nano-USD: the budget refused far before its caps", tk, n)
		}
	})
	t.Run("without the lock", func(t *testing.T) {
		for range 3 {
			tk, n, u := run(t, true)
			t.Logf("admitted %d of %d tokens, %d of %d nano-USD; %d calls unavailable", tk, capTokens, n, capNano, u)
			if tk > capTokens || n > capNano {
				t.Errorf("admitted %d tokens, %d nano-USD: over the caps %d, %d", tk, n, capTokens, capNano)
			}
		}
	})
}

// TestClusterBudgetHoldsOfAGoneNode: a node that leaves the cluster with a
// hold on a budget (kill -9 in the middle of a call) gets it settled at its
// full amount by the others once it has been gone OrphanedSummonAfter,
// exactly once though both survivors sweep; a node that comes back settles
// its own at its start instead.
func TestClusterBudgetHoldsOfAGoneNode(t *testing.T) {
	log, nodes, clk := startBudgetCluster(t, false, "a", "b", "c")
	a, c := nodes[0], nodes[2]
	bud, err := a.gw.CreateBudget(ctx(t), BudgetInput{Subject: &BudgetSubject{SubjectUser, "alice"}, Period: ptr(PeriodTotal), MaxTokens: ptr(int64(1_000_000))})
	if err != nil {
		t.Fatal(err)
	}
	settle(t, log, nodes)
	h, err := a.gw.ReserveBudgets(ctx(t), BudgetCall{User: "alice", Tokens: 1000})
	if err != nil {
		t.Fatal(err)
	}
	a.gw.SettleBudgets(h, 0, 400)
	if _, err := c.gw.ReserveBudgets(ctx(t), BudgetCall{User: "alice", Tokens: 2000}); err != nil { // in flight when c dies
		t.Fatal(err)
	}
	for _, cn := range nodes[:2] {
		if err := cn.gw.FlushBudgets(ctx(t), true); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, log, nodes)
	held := heldBy(t, a.gw, bud.ID, "c")
	if held == 0 {
		t.Fatal("c holds nothing on the budget")
	}
	for _, cn := range nodes[:2] {
		cn.gw.SetMembers(func() []string { return []string{"a", "b"} })
	}
	for range 8 { // 40 s in 5 s steps: each sweep of a and b runs
		clk.Advance(5 * time.Second)
		for _, cn := range nodes[:2] {
			cn.gw.Tick(clk.Now())
			waitSweep(t, cn.gw)
		}
	}
	settle(t, log, nodes)
	for _, cn := range nodes {
		got, err := cn.gw.GetBudget(ctx(t), bud.ID.String())
		if err != nil {
			t.Fatal(err)
		}
		if got.SpentTokens != 400+held || got.ReservedTokens != 0 && cn != c {
			t.Errorf("node %s: spent %d reserved %d; want %d spent (c's hold at its full %d, once), nothing reserved", cn.name, got.SpentTokens, got.ReservedTokens, 400+held, held)
		}
		if n := heldBy(t, cn.gw, bud.ID, "c"); n != 0 {
			t.Errorf("node %s: c still holds %d", cn.name, n)
		}
	}
	// c's allowance dropped the hold the others settled: a new call takes
	// a new one.
	if _, err := c.gw.ReserveBudgets(ctx(t), BudgetCall{User: "alice", Tokens: 100}); err != nil {
		t.Fatal(err)
	}
	if n := heldBy(t, c.gw, bud.ID, "c"); n == 0 {
		t.Error("c's new call took no new hold")
	}
}

// heldBy is what node holds on budget id in gw's ledger.
func heldBy(t *testing.T, gw *Gateway, id uuid.UUID, node string) int64 {
	t.Helper()
	n, err := callTenant(ctx(t), gw, gw.tenantFor(budgetTenant(id)), func(ts *tenantShard) (int64, error) {
		var n int64
		if l := ts.part.ledgers[id]; l != nil {
			for _, h := range l.Holds {
				if h.Node == node {
					n += h.Tokens
				}
			}
		}
		return n, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitSweep waits for gw's hold sweep to finish.
func waitSweep(t *testing.T, gw *Gateway) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for gw.holds.running.Load() {
		if time.Now().After(deadline) {
			t.Fatal("hold sweep did not finish")
		}
		time.Sleep(time.Millisecond)
	}
}
