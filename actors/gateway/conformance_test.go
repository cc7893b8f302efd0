package gateway

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/actorstest"
	"gatehouse/wal"
)

// conformanceSeed drives the conformance suite's random commands: fixed,
// so that its runs write every record kind of driven (checked).
const conformanceSeed = 3

// TestConformance runs the Extension conformance suite over the gateway:
// TestLiveEqualsRestore's random commands (and its model, which checks
// each outcome) on nodes the suite restarts, snapshots, images off the
// actors and follows; and the replay rule at every cut of replayEvents,
// the golden records plus the ones that interact (a second turn, a save
// of a session a turn follows, deletes of a session and a memory entry,
// an audit entry of a tenant shard): records that add to a state (turns,
// runs) pass only because they carry a watermark; full-state saves and
// deletes pass because applying one again changes nothing.
func TestConformance(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex // the checks run in parallel
	props := map[*actorstest.Node]*prop{}
	propOf := func(n *actorstest.Node) *prop {
		mu.Lock()
		defer mu.Unlock()
		return props[n]
	}
	actorstest.Conformance(t, actorstest.Domain{
		Start: func(tb testing.TB, opts ...actorstest.Option) (*actorstest.Node, actorstest.Driver) {
			p := conformanceProp(tb.(*testing.T), conformanceSeed, opts)
			mu.Lock()
			props[p.n] = p
			mu.Unlock()
			return p.n, p
		},
		// After each restart everything the gateway shows is as before,
		// and as the model expects.
		Observe: func(tb testing.TB, n *actorstest.Node) any { return propOf(n).views() },
		AfterRestore: func(tb testing.TB, what string, before any, n *actorstest.Node) {
			p := propOf(n)
			p.t, p.gw = tb.(*testing.T), n.Exts[0].(*Gateway)
			if diff := cmp.Diff(before, p.views()); diff != "" {
				tb.Errorf("%s: views differ (-live +restored):\n%s", what, diff)
			}
			p.checkModel()
		},
		// 40 random commands write a dozen record kinds; every kind is
		// driven by TestLiveEqualsRestore and TestApplyLiveEqualsWriter
		// (checkDriven: up to 12 seeds of 300 commands, too slow for a
		// check that restarts after every step) and scripted here.
		Steps:    40,
		CutSteps: 20,
		Records: func(testing.TB) []wal.Record {
			var recs []wal.Record
			for _, ev := range replayEvents() {
				recs = append(recs, ev.record())
			}
			return recs
		},
		// The script's sections are those of a default config, as the
		// records were written with.
		ScriptImage: func() actors.OfflineImage { return (&Gateway{cfg: DefaultConfig()}).OfflineImage() },
	})
}

// Step runs one of TestLiveEqualsRestore's random commands on the
// node's running gateway.
func (p *prop) Step(tb testing.TB, i int) {
	p.t = tb.(*testing.T)
	p.gw = p.n.Exts[0].(*Gateway)
	p.step()
}

// Settle logs the runs in flight and settles every budget allowance, as
// a flush interval with no calls does: a crash then has no hold to settle
// at its full amount.
func (p *prop) Settle(tb testing.TB) {
	p.t = tb.(*testing.T)
	p.gw = p.n.Exts[0].(*Gateway)
	if err := p.gw.FlushBudgets(ctx(tb), true); err != nil {
		tb.Fatal(err)
	}
	if err := p.gw.syncRuns(ctx(tb)); err != nil {
		tb.Fatal(err)
	}
}

// conformanceProp is newProp on a node built with opts.
func conformanceProp(t *testing.T, seed uint64, opts []actorstest.Option) *prop {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ToolsExecEnabled = true
	cfg.KeyShards, cfg.MaxTraces, cfg.UsageDays = 4, 6, 3
	cfg.BlobDir = t.TempDir()
	ids := &sharedIDs{r: rand.New(rand.NewPCG(seed, 1))}
	keyRand := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)})
	p := &prop{t: t, r: rand.New(rand.NewPCG(seed, 2)), m: newModel(), shards: cfg.KeyShards}
	ids.other = p.m.otherIDs
	p.n = actorstest.New(t, append(opts, actorstest.WithExtensions(func() []actors.Extension {
		g, err := New(cfg)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		g.newID, g.rand, g.cfg.KeyShards = ids.next, keyRand, p.shards
		return []actors.Extension{g}
	}))...)
	p.gw = start(p.n)
	return p
}

// replayEvents are the golden records plus what makes them interact: a
// second turn, a save of a session that a turn follows, deletes of a
// session and a memory entry, an audit entry of a tenant shard.
func replayEvents() []event {
	var evs []event
	for _, g := range goldenEvents() {
		evs = append(evs, g.ev)
	}
	turn := func(n int64) event {
		return sessionTurnAppended{&turnJSON{V: turnVersion, SessionID: legacySessionID("s-1"), PromptTokens: n, CompletionTokens: n, At: fxAt,
			Messages: []SessionMessage{{Role: "user", Content: fmt.Sprint("q", n), At: fxAt}}}}
	}
	s2 := &sessionRec{ID: legacySessionID("s-2"), Key: "s-2", AgentID: fxAgent, UserID: "bob", Channel: "http", CreatedAt: fxAt, UpdatedAt: fxAt}
	audit := &activityRec{Activity: Activity{ID: uuid.MustParse("019ab000-0000-7000-8000-0000000000a9"), At: fxAt, ActorType: ActorToken,
		ActorID: "gateway_token", UserID: "bob", Action: "session.delete", EntityType: "session", EntityID: "s-2"}, Tenant: sessionTenant("bob")}
	return append(evs, turn(5), entitySaved{s2}, turn(7), sessionTurnAppended{&turnJSON{V: turnVersion, SessionID: s2.ID, PromptTokens: 2, At: fxAt}},
		entityDeleted{kind: kindSession, id: s2.ID}, entitySaved{audit},
		entityDeleted{kind: kindMemory, id: uuid.MustParse("019ab000-0000-7000-8000-0000000000e1")}, runRecorded{fxRuns()[0]})
}
