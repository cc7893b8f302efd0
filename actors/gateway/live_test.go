package gateway

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/actorstest"
	"gatehouse/wal"
)

// TestApplyLiveEqualsWriter is cluster mode's sharing in one process: node
// A runs random commands over the whole domain (TestLiveEqualsRestore's),
// and node B, another actor system with its own WAL, gets A's records
// through ApplyLive in log order, as it would from the replicated log. B's
// state (its snapshot section) and everything it shows through the API
// must equal A's; A's model checks B too. A second B gets every record
// twice (the same seq): the second must change nothing.
func TestApplyLiveEqualsWriter(t *testing.T) {
	seed := *propSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed %d)", seed, seed)
	seen := map[string]int{}
	// Three seeds, and more (up to forty) while a record kind was never
	// driven: a random run may miss a rare one (a session's deletion, a
	// spent budget's ledger: 71 budget_ledger took 3-11 seeds in 10
	// sampled runs, so ten was not enough; a seed costs ~0.1 s).
	for i := uint64(0); i < 3 || (undriven(seen) != nil && i < 40); i++ {
		t.Run(fmt.Sprintf("seed=%d", seed+i), func(t *testing.T) {
			p := newProp(t, seed+i, nil)
			p.steps(300)
			if err := p.gw.FlushBudgets(ctx(t), true); err != nil { // A's allowances settled and given back
				t.Fatal(err)
			}
			_, want := p.capture()
			wantViews := liveViews(p, p.gw)
			for _, times := range []int{1, 2} {
				_, b := liveNode(t, p)
				stop := make(chan struct{})
				readers := readWhileApplied(t, b, stop)
				feed(t, p.n, b, times, seen)
				close(stop)
				readers.Wait()
				got, err := b.Capture(ctx(t))
				if err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("B after ApplyLive of A's records (each %d times)", times)
				sameState(t, what, want, got)
				if diff := cmp.Diff(wantViews, liveViews(p, b)); diff != "" {
					t.Errorf("%s: views differ (-A +B):\n%s", what, diff)
				}
				a := p.gw
				p.gw = b
				p.checkModel()
				p.gw = a
			}
		})
	}
	checkDriven(t, seen)
}

// readWhileApplied reads gw's views until stop closes: -race checks that
// ApplyLive's publishing races with no read.
func readWhileApplied(t *testing.T, gw *Gateway, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Go(func() {
		c := ctx(t)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, err1 := gw.ListProviders(c)
			_, err2 := gw.ListAgents(c, EveryUser)
			_, err3 := gw.TracePage(c, TraceFilter{})
			_, _, err4 := gw.ListSessions(c, SessionFilter{UserID: "alice"}, false)
			_, err5 := gw.Authenticate(c, []byte(KeyPrefix+"00000000000000000000000000000000"))
			if err := errors.Join(err1, err2, err3, err4); err != nil || !errors.Is(err5, ErrKeyInvalid) {
				t.Errorf("read while applying: %v, %v", err, err5)
				return
			}
		}
	})
	return &wg
}

// liveNode starts node B for p's node A: the same config and clock, its
// own data dir and blob store.
func liveNode(t *testing.T, p *prop) (*actorstest.Node, *Gateway) {
	t.Helper()
	cfg := p.gw.cfg
	cfg.BlobDir = t.TempDir()
	n := actorstest.New(t, actorstest.WithClock(p.n.Clock), actorstest.WithExtensions(func() []actors.Extension {
		gw, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return []actors.Extension{gw}
	}))
	return n, start(n)
}

// feed gives to every gateway record of from's WAL, in order, times
// times each, and counts them in seen.
func feed(t *testing.T, from *actorstest.Node, to *Gateway, times int, seen map[string]int) {
	t.Helper()
	err := from.Log.Replay(0, func(seq uint64, r wal.Record) error {
		if !to.Owns(r.Type) {
			return nil
		}
		(&prop{seen: seen}).see(r)
		for range times {
			if err := to.ApplyLive(ctx(t), seq, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// allViews is what TestLiveEqualsRestore compares after a restart, and
// the reads of the kinds its views leave out.
type allViews struct {
	Views       views
	Sessions    map[string][]Session
	Memory      []MemoryEntry
	MCPServers  []MCPServer
	MCPRequests []MCPRequest
	MCPGrants   map[string][]MCPGrant
	Skills      []Skill
	Channels    []ChannelInstance
	Tools       map[uuid.UUID][]CustomTool
	Delegations []Delegation
	Instances   map[string][]Instance
	UserFiles   map[string][]ContextFile
	Media       map[uuid.UUID]Media
}

// liveViews reads everything gw shows (p's users and agents).
func liveViews(p *prop, gw *Gateway) allViews {
	p.t.Helper()
	c := ctx(p.t)
	a := p.gw
	p.gw = gw
	v := allViews{Views: p.views(), Sessions: map[string][]Session{}, MCPGrants: map[string][]MCPGrant{},
		Tools: map[uuid.UUID][]CustomTool{}, Instances: map[string][]Instance{}, UserFiles: map[string][]ContextFile{},
		Media: map[uuid.UUID]Media{}}
	p.gw = a
	must := func(err error) {
		p.t.Helper()
		if err != nil {
			p.t.Fatal(err)
		}
	}
	var err error
	for _, u := range users {
		ss, _, err := gw.ListSessions(c, SessionFilter{UserID: u, Limit: 200}, false)
		must(err)
		for _, s := range ss {
			full, err := gw.SessionOp(c, "get", s.Key, u, false, nil)
			must(err)
			v.Sessions[u] = append(v.Sessions[u], full)
		}
	}
	v.Memory, _, err = gw.Memory(c, MemoryFilter{Limit: 1 << 20})
	must(err)
	v.MCPServers, err = gw.ListMCPServers(c)
	must(err)
	v.MCPRequests, err = gw.MCPRequests(c, "", "")
	must(err)
	v.Skills, err = gw.ListSkills(c, SkillFilter{Viewer: EveryUser})
	must(err)
	v.Channels, err = gw.ListChannels(c)
	must(err)
	v.Delegations, _, err = gw.Delegations(c, DelegationFilter{Limit: 1 << 20})
	must(err)
	agents := map[uuid.UUID]Agent{}
	for _, u := range users {
		for _, ag := range v.Views.Agents[u] {
			agents[ag.ID] = ag
		}
	}
	for id, ag := range agents {
		v.Tools[id], err = gw.ListCustomTools(c, id)
		must(err)
		v.MCPGrants[ag.AgentKey], err = gw.AgentMCPGrants(c, id.String())
		must(err)
		v.Instances[ag.AgentKey], err = gw.Instances(c, ag.OwnerID, id.String())
		must(err)
		for _, u := range users {
			v.UserFiles[ag.AgentKey+"/"+u], err = gw.UserFiles(c, ag.OwnerID, id.String(), u)
			must(err)
		}
	}
	for _, id := range mediaIDs(p) {
		m, err := gw.GetMedia(c, id)
		if err == nil {
			v.Media[id] = m
		}
	}
	return v
}

// mediaIDs are the ids of the media p's node saved.
func mediaIDs(p *prop) []uuid.UUID {
	var ids []uuid.UUID
	err := p.n.Log.Replay(0, func(_ uint64, r wal.Record) error {
		if r.Type != recEntitySaved {
			return nil
		}
		ev, err := decodeEvent(r)
		if err != nil {
			return err
		}
		if m, ok := ev.(entitySaved).ent.(*mediaRec); ok {
			ids = append(ids, m.ID)
		}
		return nil
	})
	if err != nil {
		p.t.Fatal(err)
	}
	slices.SortFunc(ids, cmpUUID)
	return slices.Compact(ids)
}

// TestApplyLiveEqualsReplay: ApplyLive of records that interact (turns of
// a session saved and deleted, deletes of what is gone, the legacy types
// 64..69) and of records for entities the node never held (deletes of
// every kind, a turn, an API key's audit entry) ends where replay of the
// same records does, each applied once or twice, and never panics.
func TestApplyLiveEqualsReplay(t *testing.T) {
	var recs []wal.Record
	for _, ev := range replayEvents() {
		recs = append(recs, ev.record())
	}
	for _, l := range []struct {
		file string
		t    wal.Type
	}{
		{"legacy_064_api_key_put", recLegacyAPIKeyPut}, {"legacy_065_provider_put", recLegacyProviderPut},
		{"legacy_067_agent_put", recLegacyAgentPut}, {"legacy_069_run_recorded", recLegacyRunRecorded},
		{"legacy_068_agent_delete", recLegacyAgentDel}, {"legacy_066_provider_delete", recLegacyProviderDel},
	} {
		recs = append(recs, wal.Record{Type: l.t, Data: readGolden(t, "testdata/"+l.file+".golden")})
	}
	var unknown []wal.Record
	gone := uuid.MustParse("019ab000-0000-7000-8000-00000000dead")
	for k, spec := range kinds {
		if !spec.kept {
			unknown = append(unknown, entityDeleted{kind: k, id: gone}.record())
		}
	}
	unknown = append(unknown, sessionTurnAppended{&turnJSON{SessionID: gone, At: fxAt,
		Messages: []SessionMessage{{Role: "user", Content: "q", At: fxAt}}}}.record())
	keyAudit := &activityRec{Activity: Activity{ID: uuid.MustParse("019ab000-0000-7000-8000-0000000000b1"), At: fxAt,
		ActorType: ActorToken, ActorID: "gateway_token", Action: "api_key.revoke", EntityType: string(kindAPIKey), EntityID: gone.String()}}
	unknown = append(unknown, entitySaved{keyAudit}.record())

	tests := []struct {
		name string
		recs []wal.Record
	}{
		{"interacting records", recs},
		{"unknown entities", unknown},
		{"unknown entities after the rest", slices.Concat(recs, unknown)},
	}
	for _, tt := range tests {
		for _, times := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/%d times", tt.name, times), func(t *testing.T) {
				st := newState(DefaultConfig())
				for i, r := range tt.recs {
					ev, err := decodeEvent(r)
					if err != nil {
						t.Fatal(err)
					}
					st.apply(uint64(i+1), ev)
				}
				gw := start(newNode(t, DefaultConfig(), nil))
				for i, r := range tt.recs {
					for range times {
						if err := gw.ApplyLive(ctx(t), uint64(i+1), r); err != nil {
							t.Fatalf("ApplyLive(%d, type %d) = %v", i+1, r.Type, err)
						}
					}
				}
				got, err := gw.Capture(ctx(t))
				if err != nil {
					t.Fatal(err)
				}
				sameState(t, "ApplyLive", st.encode(), got)
			})
		}
	}
	t.Run("corrupt", func(t *testing.T) {
		gw := start(newNode(t, DefaultConfig(), nil))
		for _, r := range []wal.Record{
			{Type: recEntitySaved, Data: []byte(`{"kind":"agent","v":9}`)},
			{Type: recEntityDeleted, Data: []byte(`{"kind":"activity","id":"` + gone.String() + `"}`)}, // audit entries age out
			{Type: recEntityDeleted, Data: []byte(`{"kind":"delegation","id":"` + gone.String() + `"}`)},
			{Type: recSessionTurn, Data: []byte(`{"v":1}`)},
		} {
			if err := gw.ApplyLive(ctx(t), 1, r); !errors.Is(err, actors.ErrCorrupt) {
				t.Errorf("ApplyLive(%s) = %v, want ErrCorrupt", r.Data, err)
			}
		}
	})
}

// TestApplyLiveInterleavesWithOwnRuns: in a cluster a node's own runs and
// the runs other nodes logged reach its runs actor interleaved, so a
// foreign run may come with a lower seq than an own run already counted;
// it must count all the same (and once).
func TestApplyLiveInterleavesWithOwnRuns(t *testing.T) {
	an := newNode(t, DefaultConfig(), nil)
	a := start(an)
	bn := newNode(t, DefaultConfig(), nil)
	b := start(bn)
	run := func(gw *Gateway, id string) {
		gw.RecordRun(Trace{ID: id, AgentID: fxAgent, UserID: "alice", Endpoint: "chat", Status: RunOK, StartedAt: actorstest.T0,
			Spans: []Span{{Name: "llm", Kind: SpanLLM, StartedAt: actorstest.T0, PromptTokens: 10, CompletionTokens: 1, Status: RunOK}}})
	}
	for i := range 3 {
		run(a, fmt.Sprint("a", i))
	}
	for i := range 5 {
		run(b, fmt.Sprint("b", i)) // B's own runs: seqs 1..5 in B's WAL, above A's 1..3
	}
	for _, gw := range []*Gateway{a, b} {
		if err := gw.syncRuns(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	var aRecs []wal.Record
	var aSeqs []uint64
	if err := an.Log.Replay(0, func(seq uint64, r wal.Record) error {
		if r.Type == recRunRecorded {
			aRecs, aSeqs = append(aRecs, r), append(aSeqs, seq)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(aRecs) != 3 {
		t.Fatalf("A logged %d runs, want 3", len(aRecs))
	}
	for round := range 2 { // the second delivery changes nothing
		for i, r := range aRecs {
			if err := b.ApplyLive(ctx(t), aSeqs[i], r); err != nil {
				t.Fatal(err)
			}
		}
		run(b, fmt.Sprint("b-after-", round)) // an own run after the foreign ones
		if err := b.syncRuns(ctx(t)); err != nil {
			t.Fatal(err)
		}
		page, err := b.TracePage(ctx(t), TraceFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if want := 3 + 5 + round + 1; page.Total != want {
			t.Errorf("round %d: B shows %d traces, want %d", round, page.Total, want)
		}
		rows, err := b.Usage(ctx(t), uuid.Nil, "")
		if err != nil {
			t.Fatal(err)
		}
		var runs int64
		for _, u := range rows {
			runs += u.Runs
		}
		if want := int64(3 + 5 + round + 1); runs != want {
			t.Errorf("round %d: B's usage counts %d runs, want %d", round, runs, want)
		}
	}
	// After a restart B replays its own WAL only (A's runs reach it again
	// through the replicated log in cluster mode): its own six runs.
	bn.Crash()
	b = start(bn)
	if page, err := b.TracePage(ctx(t), TraceFilter{Limit: 100}); err != nil || page.Total != 5+2 {
		t.Errorf("B after restart: %d traces, %v; want its own 7", page.Total, err)
	}
}

// TestApplyLiveReadsSeeIt: once ApplyLive returns, every read on the node
// sees the change, whichever actor applied it (published views included):
// a key created on A authenticates on B, a revoked one fails; providers,
// agents, sessions with their turns, runs, MCP servers; an agent deleted
// on A is gone on B with its sessions (A's purge is records too).
func TestApplyLiveReadsSeeIt(t *testing.T) {
	an := newNode(t, DefaultConfig(), nil)
	a := start(an)
	bn := newNode(t, DefaultConfig(), nil)
	b := start(bn)
	var last uint64
	follow := func() { // B applies A's records after last, as a follower would
		t.Helper()
		if err := a.syncRuns(ctx(t)); err != nil {
			t.Fatal(err)
		}
		err := an.Log.Replay(last, func(seq uint64, r wal.Record) error {
			last = seq
			if !b.Owns(r.Type) {
				return nil
			}
			return b.ApplyLive(ctx(t), seq, r)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	c := ctx(t)
	k, raw, err := a.CreateAPIKey(c, NewAPIKey{Name: "ci", Scopes: []Scope{ScopeWrite}, UserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	follow()
	if got, err := b.Authenticate(c, []byte(raw)); err != nil || got.ID != k.ID {
		t.Fatalf("B: Authenticate(key made on A) = %+v, %v", got, err)
	}
	p, err := a.CreateProvider(c, ProviderInput{Name: "echo", ProviderType: ProviderEcho, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := a.CreateAgent(c, "alice", AgentInput{AgentKey: ptr("helper"), Provider: ptr("echo"), Model: ptr("m")})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := a.CreateMCPServer(c, MCPServerInput{Name: ptr("files"), Transport: ptr("streamable-http"), URL: ptr("http://127.0.0.1:1/mcp")})
	if err != nil {
		t.Fatal(err)
	}
	follow()
	if got, err := b.GetProvider(c, "echo"); err != nil || got.ID != p.ID {
		t.Errorf("B: GetProvider = %+v, %v", got, err)
	}
	if got, err := b.GetAgent(c, "alice", "helper"); err != nil || got.ID != ag.ID {
		t.Errorf("B: GetAgent = %+v, %v", got, err)
	}
	if got, err := b.GetMCPServer(c, "files"); err != nil || got.ID != srv.ID {
		t.Errorf("B: GetMCPServer = %+v, %v", got, err)
	}
	an.Clock.Advance(time.Minute)
	upd, err := a.UpdateMCPServer(c, "files", MCPServerInput{URL: ptr("http://127.0.0.1:2/mcp")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.BeginTurn(c, "s1", "helper", "alice", "http", func() {}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.EndTurn(c, "alice", "s1", TurnResult{User: "q", Assistant: "a", PromptTokens: 3}); err != nil {
		t.Fatal(err)
	}
	a.RecordRun(Trace{ID: "r1", AgentID: ag.ID, UserID: "alice", Endpoint: "chat", Status: RunOK, StartedAt: actorstest.T0})
	follow()
	// An MCP server's connection follows its UpdatedAt (mcppool reopens on
	// the next use), which B now shows.
	if got, err := b.GetMCPServer(c, "files"); err != nil || got.URL != "http://127.0.0.1:2/mcp" || !got.UpdatedAt.Equal(upd.UpdatedAt) {
		t.Errorf("B: GetMCPServer after update = %+v, %v; want URL :2, updated at %v", got, err, upd.UpdatedAt)
	}
	if s, err := b.SessionOp(c, "get", "s1", "alice", false, nil); err != nil || len(s.Messages) != 2 || s.PromptTokens != 3 {
		t.Errorf("B: session s1 = %+v, %v; want 2 messages, 3 prompt tokens", s, err)
	}
	if tr, err := b.Trace(c, "r1"); err != nil || tr.AgentID != ag.ID {
		t.Errorf("B: Trace(r1) = %+v, %v", tr, err)
	}
	if err := a.RevokeAPIKey(c, k.ID); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteAgent(c, "alice", "helper"); err != nil {
		t.Fatal(err)
	}
	follow()
	if _, err := b.Authenticate(c, []byte(raw)); !errors.Is(err, ErrKeyInvalid) {
		t.Errorf("B: Authenticate(key revoked on A) = %v, want ErrKeyInvalid", err)
	}
	if _, err := b.GetAgent(c, "alice", "helper"); !errors.Is(err, ErrNotFound) {
		t.Errorf("B: GetAgent(deleted on A) = %v, want ErrNotFound", err)
	}
	if ss, n, err := b.ListSessions(c, SessionFilter{UserID: "alice"}, false); err != nil || n != 0 {
		t.Errorf("B: sessions of the deleted agent = %+v (%d), %v; want none", ss, n, err)
	}
	// B's own writes go on from what it applied: the key is revoked there.
	if err := b.RevokeAPIKey(c, k.ID); err != nil {
		t.Errorf("B: RevokeAPIKey(revoked on A) = %v, want nil (revoking twice)", err)
	}
}
