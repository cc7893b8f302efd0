package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/actors/actorstest"
	"gatehouse/wal"
)

// Snapshots and cuts taken while the gateway keeps committing: a section
// is captured after its barrier record, so it may reflect records past
// the barrier, and the replay after the barrier must not apply them twice
// (actors.Extension's rule). Sessions' turns (record 73) are the writes
// that race the cut here, on sessions of their own (the turner agent's);
// the model's random commands run beside them.

// walBarrier is the type of the actors package's snapshot barrier record
// (actors.recBarrier, unexported): a record no extension owns.
const walBarrier wal.Type = 1

// walSessionTurn is record 73, sessionTurn (doc.go): its number is part of
// the on-disk format.
const walSessionTurn wal.Type = 73

// cutAtBarrier cuts as System.Snapshot does, without the save and the
// truncation: it appends a barrier record (when that returns, every
// earlier record is applied by its owner or its commit notice is posted
// ahead of any later message) and then captures the section, which thus
// reflects every record up to the barrier's index, and maybe later ones.
// It is the tests' one use of how the System cuts; safe for concurrent
// use; it reports failures with tb.Errorf and returns ok false.
func cutAtBarrier(tb testing.TB, l *wal.Log, gw *Gateway) (idx uint64, section []byte, ok bool) {
	tb.Helper()
	idx, err := l.Append(wal.Record{Type: walBarrier})
	if err != nil {
		tb.Errorf("append barrier: %v", err)
		return 0, nil, false
	}
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	section, err = gw.Capture(c)
	if err != nil {
		tb.Errorf("Capture after barrier %d: %v", idx, err)
		return 0, nil, false
	}
	return idx, section, true
}

// sectionSession is a session as a section holds it.
type sectionSession struct {
	Key              string            `json:"key"`
	Messages         []json.RawMessage `json:"messages"`
	PromptTokens     int64             `json:"prompt_tokens"`
	CompletionTokens int64             `json:"completion_tokens"`
}

// sessionsIn decodes the sessions of a section (the documented layout:
// entities as {"kind", "v", "data"}).
func sessionsIn(tb testing.TB, section []byte) map[string]sectionSession {
	tb.Helper()
	var s struct {
		Entities []struct {
			Kind string          `json:"kind"`
			Data json.RawMessage `json:"data"`
		} `json:"entities"`
	}
	if err := json.Unmarshal(section, &s); err != nil {
		tb.Fatalf("decode section: %v", err)
	}
	out := map[string]sectionSession{}
	for _, e := range s.Entities {
		if e.Kind != string(kindSession) {
			continue
		}
		var x sectionSession
		if err := json.Unmarshal(e.Data, &x); err != nil {
			tb.Fatalf("decode session: %v", err)
		}
		out[x.Key] = x
	}
	return out
}

// TestSessionTurnReplayedOnce pins the record-73 case without randomness:
// a turn committed after the barrier, before the registry is asked for
// its part, is in the section; replaying the WAL after the barrier must
// not append its messages and count its tokens a second time.
func TestSessionTurnReplayedOnce(t *testing.T) {
	n := newNode(t, DefaultConfig(), nil)
	gw := start(n)
	c := ctx(t)
	if _, err := gw.CreateProvider(c, ProviderInput{Name: "p", ProviderType: ProviderEcho, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.CreateAgent(c, "alice", AgentInput{AgentKey: ptr("a"), Provider: ptr("p"), Model: ptr("m")}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.BeginTurn(c, "s", "a", "alice", "ws", nil); err != nil {
		t.Fatal(err)
	}
	// System.Snapshot: the barrier; the registry commits the turn; then
	// the capture asks the registry for its part.
	idx, err := n.Log.Append(wal.Record{Type: walBarrier})
	if err != nil {
		t.Fatal(err)
	}
	live, err := gw.EndTurn(c, "alice", "s", TurnResult{User: "hi", Assistant: "hello", PromptTokens: 3, CompletionTokens: 1})
	if err != nil {
		t.Fatal(err)
	}
	section, err := gw.Capture(c)
	if err != nil {
		t.Fatal(err)
	}
	p := &prop{t: t, n: n, gw: gw}
	got := sessionsIn(t, p.replay(section, idx))["s"]
	if len(got.Messages) != live.MessageCount || got.PromptTokens != live.PromptTokens || got.CompletionTokens != live.CompletionTokens {
		t.Errorf("restore(section captured after the turn, WAL after barrier %d): session s has %d messages, %d+%d tokens; live has %d, %d+%d",
			idx, len(got.Messages), got.PromptTokens, got.CompletionTokens, live.MessageCount, live.PromptTokens, live.CompletionTokens)
	}
	_, want := p.capture()
	sameState(t, fmt.Sprintf("section cut at barrier %d, then WAL replay after it", idx), want, p.replay(section, idx))
}

// TestLiveEqualsRestoreConcurrent is TestLiveEqualsRestore with the cuts
// taken under load: System snapshots (barrier, capture, save, truncate)
// while turns and random commands commit, then a crash and a restore
// compared with the live state at a quiescent point; and pure replays of
// sections cut while writes run ("restore the section, replay every WAL
// record after its barrier" must equal the live state).
func TestLiveEqualsRestoreConcurrent(t *testing.T) {
	seed := *propSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed %d)", seed, seed)
	for i := range uint64(6) {
		t.Run(fmt.Sprintf("seed=%d", seed+i), func(t *testing.T) { runConcurrent(t, seed+i) })
	}
}

// The turner agent: its own provider and owner, so the model's commands
// (by users) can neither change nor delete it.
const (
	turnerUser, turnerKey = "dave", "turner"
	turnWriters           = 2
	loadRounds            = 2
	snapshotsPerRound     = 4
	cutsPerRound          = 5
	maxStepsUnderLoad     = 60 // random commands per round, at most
)

func runConcurrent(t *testing.T, seed uint64) {
	// Few audit entries and delegations per owning actor, so that they
	// are dropped under load too (no KeyShards change here: see
	// TestKeyActivityAcrossKeyShards).
	p := newProp(t, seed, func(c *Config) { c.MaxActivity = 4 })
	p.steps(60)
	p.addTurner()
	for round := range loadRounds {
		sys := p.n.Sys
		p.underLoad(func() {
			for range snapshotsPerRound {
				if _, err := sys.Snapshot(); err != nil {
					t.Errorf("Snapshot: %v", err)
					return
				}
			}
		})
		p.restart(fmt.Sprintf("round %d: crash after %d snapshots under load, restore", round, snapshotsPerRound), (*actorstest.Node).Crash)
		if t.Failed() {
			break // one diff is enough to read; the cuts below start from the restored state
		}
	}
	for round := range loadRounds {
		type cut struct {
			idx     uint64
			section []byte
		}
		var cuts []cut
		// A quiescent snapshot first: the WAL to replay holds this round only.
		if _, err := p.n.Sys.Snapshot(); err != nil {
			t.Fatal(err)
		}
		l, gw := p.n.Log, p.gw
		p.underLoad(func() {
			for range cutsPerRound {
				idx, section, ok := cutAtBarrier(t, l, gw)
				if !ok {
					return
				}
				cuts = append(cuts, cut{idx, section})
			}
		})
		_, live := p.capture()
		for _, c := range cuts {
			if got := p.replay(c.section, c.idx); !bytes.Equal(live, got) {
				sameState(t, fmt.Sprintf("round %d: section cut under load at barrier %d, then WAL replay after it", round, c.idx), live, got)
				return
			}
		}
	}
	p.restart("crash after the cuts, restore", (*actorstest.Node).Crash)
}

// addTurner creates the turner agent and its provider (in the model too).
func (p *prop) addTurner() {
	p.t.Helper()
	c := ctx(p.t)
	pr, err := p.gw.CreateProvider(c, ProviderInput{Name: "pt", ProviderType: ProviderEcho, Enabled: true})
	if err != nil {
		p.t.Fatal(err)
	}
	p.m.providers[pr.ID] = &mProvider{id: pr.ID, name: pr.Name}
	a, err := p.gw.CreateAgent(c, turnerUser, AgentInput{AgentKey: ptr(turnerKey), Provider: ptr(pr.ID.String()), Model: ptr("m")})
	if err != nil {
		p.t.Fatal(err)
	}
	p.m.agents[a.ID] = &mAgent{id: a.ID, key: turnerKey, owner: turnerUser, provider: pr.ID}
}

// underLoad runs bg while turnWriters goroutines commit turns on the
// turner's sessions, a churnWriter commits other kinds and p runs random
// commands (at most maxStepsUnderLoad); it returns once bg has returned
// and the writers have stopped, so bg's last cut was taken under load.
func (p *prop) underLoad(bg func()) {
	p.t.Helper()
	stop, done := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	defer func() { // also when a command fails the test
		close(stop)
		wg.Wait()
	}()
	gw, clock := p.gw, p.n.Clock
	for w := range turnWriters {
		wg.Go(func() { turnWriter(p.t, gw, w, stop) })
	}
	wg.Go(func() { churnWriter(p.t, gw, clock.Now, stop) })
	go func() {
		defer close(done)
		bg()
	}()
	for range maxStepsUnderLoad {
		select {
		case <-done:
			return
		default:
			p.step()
		}
	}
	<-done
}

// turnWriter begins and ends turns on its own sessions until stop.
func turnWriter(tb testing.TB, gw *Gateway, w int, stop <-chan struct{}) {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		key := fmt.Sprintf("w%d-%d", w, i%4)
		if i%40 == 39 { // keep the histories short: sections stay small
			if _, err := gw.SessionOp(c, "reset", key, turnerUser, false, nil); err != nil {
				tb.Errorf("reset %s: %v", key, err)
				return
			}
		}
		if _, err := gw.BeginTurn(c, key, turnerKey, turnerUser, "ws", nil); err != nil {
			tb.Errorf("BeginTurn %s: %v", key, err)
			return
		}
		if _, err := gw.EndTurn(c, turnerUser, key, TurnResult{User: "u", Assistant: "a", PromptTokens: 3, CompletionTokens: 1}); err != nil {
			tb.Errorf("EndTurn %s: %v", key, err)
			return
		}
	}
}

// churnWriter commits, until stop, the turner's runs (record 72, applied
// on their commit notice), memory entries saved and deleted, media, a
// session begun, ended and deleted, each audited (activity entries).
func churnWriter(tb testing.TB, gw *Gateway, now func() time.Time, stop <-chan struct{}) {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c = WithActor(c, Actor{Type: ActorToken, ID: "churn", UserID: turnerUser, IP: "127.0.0.1"})
	a, err := gw.GetAgent(c, turnerUser, turnerKey)
	if err != nil {
		tb.Errorf("GetAgent %s: %v", turnerKey, err)
		return
	}
	var last *MemoryEntry
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		gw.RecordRun(Trace{ID: fmt.Sprintf("churn-%d-%d", now().UnixNano(), i), AgentID: a.ID, UserID: turnerUser, Endpoint: "chat",
			Status: RunOK, StartedAt: now(), DurationMs: int64(i % 100), Provider: "echo", Model: "m",
			Spans: []Span{{ID: "0", Name: "call", Kind: SpanLLM, StartedAt: now(), PromptTokens: 3, CompletionTokens: 1, Status: RunOK, Model: "m"}}})
		var err error
		switch i % 4 {
		case 0:
			var e MemoryEntry
			e, err = gw.SaveMemory(c, MemoryInput{Content: fmt.Sprintf("note %d", i), UserID: turnerUser, Agent: turnerKey})
			if err == nil && last != nil {
				err = gw.DeleteMemory(c, last.ID, turnerUser)
			}
			last = &e
		case 1:
			_, err = gw.PutMedia(c, strings.NewReader(fmt.Sprintf("media %d", i)), 1<<10, "m.txt", turnerUser)
		case 2:
			if _, err = gw.BeginTurn(c, "churn", turnerKey, turnerUser, "ws", nil); err == nil {
				if _, err = gw.EndTurn(c, turnerUser, "churn", TurnResult{User: "u", Failed: true}); err == nil {
					_, err = gw.SessionOp(c, "delete", "churn", turnerUser, false, nil)
				}
			}
		}
		if err != nil {
			tb.Errorf("churn %d: %v", i, err)
			return
		}
	}
}

// TestKeyActivityAcrossKeyShards: API-key audit entries are kept per key
// shard (Config.MaxActivity each). A restart on the same KeyShards
// restores them exactly; one that changes KeyShards places every entry on
// its key's new shard and keeps each shard's newest MaxActivity, so it may
// drop older entries, never the newest MaxActivity overall, and keeps
// everything else exactly (docs/decisions.md).
func TestKeyActivityAcrossKeyShards(t *testing.T) {
	cfg := DefaultConfig()
	cfg.KeyShards, cfg.MaxActivity = 4, 2
	shards := cfg.KeyShards
	n := newNode(t, cfg, func(g *Gateway) { g.cfg.KeyShards = shards })
	p := &prop{t: t, n: n, gw: start(n)}
	for i := range 12 {
		c := WithActor(ctx(t), Actor{Type: ActorToken, ID: "k1", UserID: "alice", IP: "127.0.0.1"})
		if _, _, err := p.gw.CreateAPIKey(c, NewAPIKey{Name: fmt.Sprintf("k%d", i), Scopes: []Scope{ScopeAdmin}}); err != nil {
			t.Fatal(err)
		}
		p.n.Clock.Advance(time.Minute)
	}
	for _, tt := range []struct {
		name   string
		shards int
		stop   func(*actorstest.Node)
	}{
		{"crash, replay the WAL on 4 shards", 4, (*actorstest.Node).Crash},
		{"clean stop (snapshot) and start on 4 shards", 4, (*actorstest.Node).Stop},
		{"crash, replay the WAL on 3 shards", 3, (*actorstest.Node).Crash},
		{"clean stop (snapshot) and start on 5 shards", 5, (*actorstest.Node).Stop},
	} {
		_, live := p.capture()
		same := shards == tt.shards
		shards = tt.shards
		tt.stop(p.n)
		p.gw = start(p.n)
		_, got := p.capture()
		if same {
			sameState(t, tt.name, live, got)
			continue
		}
		if d := differing(live, got); len(d) > 1 || len(d) == 1 && d[0] != "activity" {
			t.Errorf("%s: differs in %v, want at most [activity]", tt.name, d)
		}
		was, is := activityIDs(t, live), activityIDs(t, got)
		for _, id := range is {
			if !slices.Contains(was, id) {
				t.Errorf("%s: restored an audit entry %s the live state did not hold", tt.name, id)
			}
		}
		for _, id := range was[max(0, len(was)-cfg.MaxActivity):] {
			if !slices.Contains(is, id) {
				t.Errorf("%s: lost audit entry %s, one of the newest %d", tt.name, id, cfg.MaxActivity)
			}
		}
	}
}

// activityIDs are the ids of a section's audit entries, oldest first.
func activityIDs(tb testing.TB, section []byte) []string {
	tb.Helper()
	var s struct {
		Entities []struct {
			Kind string `json:"kind"`
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		} `json:"entities"`
	}
	if err := json.Unmarshal(section, &s); err != nil {
		tb.Fatalf("decode section: %v", err)
	}
	var ids []string
	for _, e := range s.Entities {
		if e.Kind == string(kindActivity) {
			ids = append(ids, e.Data.ID)
		}
	}
	slices.Sort(ids)
	return ids
}
