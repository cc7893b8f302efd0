package control

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/clock"
)

// clusterNode is one node of a simulated cluster on an
// actorstest.SharedLog (see the gateway's cluster test).
type clusterNode struct {
	name string
	ctl  *Control
	f    *actorstest.Follower
}

// TestClusterNodesConverge: two nodes on one shared log use, revoke and
// change the same tokens, services and key lists at the same time, each
// applying the other's records live. Afterwards both hold what a replay of
// the log holds (a revoked token stays revoked on every node, whatever
// last-use save of another node raced with it), and answer every token
// alike.
func TestClusterNodesConverge(t *testing.T) {
	// The seeds run on clusters of their own, in parallel.
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { t.Parallel(); clusterConverges(t, seed) })
	}
}

func clusterConverges(t *testing.T, seed uint64) {
	log := actorstest.NewSharedLog()
	clk := clock.NewFake(actorstest.T0)
	nodes := startNodes(t, log, clk)
	for _, cn := range nodes {
		cn.f = log.Follow(t, cn.name, cn.ctl)
	}
	ctx := actorstest.Ctx(t)
	a := nodes[0].ctl
	var secrets []string
	var ids []uuid.UUID
	user := uuid.New()
	for i := range 8 {
		tk, s, err := a.CreateToken(ctx, NewToken{UserID: user, Name: fmt.Sprint("t", i), Scopes: []Scope{ScopeRead}})
		if err != nil {
			t.Fatal(err)
		}
		secrets, ids = append(secrets, s), append(ids, tk.ID)
	}
	keys := []uuid.UUID{uuid.New(), uuid.New()}
	for _, s := range []string{"s0", "s1"} {
		if _, err := a.CreateService(ctx, s, ServiceInput{Upstream: "http://127.0.0.1:9", Headers: map[string]string{"X-K": s}, Enabled: true}); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, log, nodes)

	// Tokens minted from those, on either node, racing their parents'
	// revocation on the other (issue 31): each must end with its parent.
	type minted struct {
		secret string
		parent int
	}
	var mu sync.Mutex
	var children []minted
	revoked := map[int]bool{} // tokens a RevokeToken removed
	heir := uuid.New()        // another user's: the parent's user holds at most 100

	for round := range 50 {
		clk.Advance(time.Minute + time.Second) // every token's next use is saved
		var wg sync.WaitGroup
		for ni, cn := range nodes {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(seed, uint64(round*2+ni)))
				for i := range 8 {
					var err error
					switch r.IntN(6) {
					case 5:
						p := r.IntN(len(ids))
						var s string
						_, s, err = cn.ctl.CreateToken(ctx, NewToken{UserID: heir, Name: "child", Scopes: []Scope{ScopeRead}, Parent: ids[p]})
						if err == nil {
							mu.Lock()
							children = append(children, minted{s, p})
							mu.Unlock()
						}
						if errors.Is(err, actors.ErrInvalidArgument) {
							err = nil // 100 tokens for heir
						}
					case 0, 1:
						_, err = cn.ctl.CheckToken(ctx, secrets[r.IntN(len(secrets))], "192.0.2.1")
					case 2:
						p := r.IntN(len(ids))
						if err = cn.ctl.RevokeToken(ctx, ids[p], user); err == nil {
							mu.Lock()
							revoked[p] = true
							mu.Unlock()
						}
					case 3:
						_, err = cn.ctl.UpdateService(ctx, fmt.Sprint("s", r.IntN(2)), ServiceInput{Upstream: fmt.Sprintf("http://127.0.0.1:%d", 10+r.IntN(50)), KeepHeaders: true, Enabled: true, Description: fmt.Sprint(cn.name, round, i)})
					case 4:
						err = cn.ctl.SetKeyServices(ctx, keys[r.IntN(2)], []string{fmt.Sprint("s", r.IntN(2))})
					}
					if err != nil && !errors.Is(err, ErrTokenInvalid) && !errors.Is(err, ErrTokenNotFound) && !errors.Is(err, ErrTokenThrottled) {
						t.Errorf("%s round %d step %d: %v", cn.name, round, i, err)
					}
				}
			})
		}
		wg.Wait()
	}
	settle(t, log, nodes)

	replay := replayed(t, log)
	want := replay.st.encode()
	for _, cn := range nodes {
		got, err := cn.ctl.Capture(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want, got) {
			t.Errorf("%s's state differs from a replay of the log:\nreplay %s\nlive   %s", cn.name, want, got)
		}
	}
	sameControl(t, "B and A", nodes[0].ctl, nodes[1].ctl)
	for i, s := range secrets {
		_, errA := nodes[0].ctl.CheckToken(ctx, s, "192.0.2.2")
		_, errB := nodes[1].ctl.CheckToken(ctx, s, "192.0.2.3")
		if (errA == nil) != (errB == nil) {
			t.Errorf("token %d: CheckToken = %v on A, %v on B", i, errA, errB)
		}
		// A use the other node saved before it saw the revocation must
		// not bring the token back (issue 31).
		if revoked[i] && (errA == nil || errB == nil) {
			t.Errorf("token %d was revoked, yet CheckToken = %v on A, %v on B", i, errA, errB)
		}
	}
	if len(children) == 0 {
		t.Fatal("no token was minted from another")
	}
	for i, c := range children {
		_, errParent := nodes[0].ctl.CheckToken(ctx, secrets[c.parent], "192.0.2.4")
		_, errA := nodes[0].ctl.CheckToken(ctx, c.secret, "192.0.2.4")
		_, errB := nodes[1].ctl.CheckToken(ctx, c.secret, "192.0.2.5")
		if (errA == nil) != (errB == nil) || errParent != nil && errA == nil {
			t.Errorf("child %d: CheckToken = %v on A, %v on B; its parent %v", i, errA, errB, errParent)
		}
	}
}

// replayed is a Control that applied the whole of log, as a node
// restoring from it would.
func replayed(t *testing.T, log *actorstest.SharedLog) *Control {
	t.Helper()
	replay := New()
	log.Replay(t, replay.Apply)
	return replay
}

// startNodes starts nodes A and B, each appending to its own WAL and
// to log; the caller applies the others' records (follow, or by hand).
func startNodes(t *testing.T, log *actorstest.SharedLog, clk *clock.Fake) []*clusterNode {
	t.Helper()
	var nodes []*clusterNode
	for _, name := range []string{"A", "B"} {
		cn := &clusterNode{name: name}
		n := actorstest.New(t, actorstest.WithClock(clk), actorstest.WithExtensions(func() []actors.Extension {
			cn.ctl = New()
			cn.ctl.wrapLog = func(l actors.EventLog) actors.EventLog {
				nl := log.Node(name, l)
				nl.SyncOnly = true // control appends synchronously
				return nl
			}
			return []actors.Extension{cn.ctl}
		}))
		n.Start()
		nodes = append(nodes, cn)
	}
	return nodes
}

// settle waits until every follower has reached the end of the log.
func settle(t *testing.T, log *actorstest.SharedLog, nodes []*clusterNode) {
	t.Helper()
	var fs []*actorstest.Follower
	for _, cn := range nodes {
		fs = append(fs, cn.f)
	}
	log.Settle(t, fs...)
}

// TestRevokedTokenNotRevivedByALaterUse: node B saves a token's last use
// after node A's revocation in the log's order, because B had not applied
// the revocation yet when the token came in (issue 31). The save comes
// last, yet the token stays revoked on both nodes and in a replay of the
// log: a use never brings back a token that is gone.
func TestRevokedTokenNotRevivedByALaterUse(t *testing.T) {
	log := actorstest.NewSharedLog()
	clk := clock.NewFake(actorstest.T0)
	nodes := startNodes(t, log, clk)
	ctx := actorstest.Ctx(t)
	for _, cn := range nodes {
		cn.f = actorstest.NewFollower(cn.name, cn.ctl)
	}
	catchUp := func(cn *clusterNode) { // applies the others' records, in this goroutine
		t.Helper()
		cn.f.CatchUp(ctx, t, log)
	}
	a, b := nodes[0], nodes[1]
	user := uuid.New()
	tk, secret, err := a.ctl.CreateToken(ctx, NewToken{UserID: user, Name: "ci", Scopes: []Scope{ScopeRead}})
	if err != nil {
		t.Fatal(err)
	}
	catchUp(a)
	catchUp(b)
	clk.Advance(time.Minute + time.Second) // B's next use of it is saved

	if err := a.ctl.RevokeToken(ctx, tk.ID, user); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ctl.CheckToken(ctx, secret, "192.0.2.1"); err != nil {
		t.Fatalf("B, before it applied the revocation: CheckToken = %v, want the token", err)
	}
	catchUp(a)
	catchUp(b)
	for _, cn := range nodes {
		if _, err := cn.ctl.CheckToken(ctx, secret, "192.0.2.2"); !errors.Is(err, ErrTokenInvalid) {
			t.Errorf("%s: CheckToken of the revoked token = %v, want ErrTokenInvalid", cn.name, err)
		}
	}
	replay := replayed(t, log)
	if len(replay.st.tokens) != 0 {
		t.Errorf("a replay of the log holds %d tokens, want the revoked one gone", len(replay.st.tokens))
	}
}
