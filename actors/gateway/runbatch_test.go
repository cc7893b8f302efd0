package gateway

import (
	"fmt"
	"sync"
	"testing"

	"gatehouse/actors"
	"gatehouse/wal"
)

// countingLog counts the appends that carry run records.
type countingLog struct {
	actors.EventLog
	mu                sync.Mutex
	runAppends, nRuns int
}

func (c *countingLog) AppendAsync(recs []wal.Record, done func(uint64, error)) {
	runs := 0
	for _, r := range recs {
		if r.Type == recRunRecorded {
			runs++
		}
	}
	if runs > 0 {
		c.mu.Lock()
		c.runAppends++
		c.nRuns += runs
		c.mu.Unlock()
	}
	c.EventLog.AppendAsync(recs, done)
}

// TestRunsBatched: runs recorded together reach the WAL in a few appends
// (one commit each), not one append per run, and every one of them is
// applied, traced and counted once, in the order recorded.
func TestRunsBatched(t *testing.T) {
	cl := &countingLog{}
	n := newNode(t, DefaultConfig(), func(g *Gateway) {
		g.wrapLog = func(l actors.EventLog) actors.EventLog { cl.EventLog = l; return cl }
	})
	gw := start(n)
	const runs = 40
	for i := range runs {
		gw.RecordRun(Trace{ID: fmt.Sprintf("r%02d", i), UserID: "alice", Status: RunOK, StartedAt: n.Clock.Now(),
			Spans: []Span{{Kind: SpanLLM, PromptTokens: 1}}})
	}
	if err := gw.syncRuns(ctx(t)); err != nil {
		t.Fatal(err)
	}
	cl.mu.Lock()
	appends, logged := cl.runAppends, cl.nRuns
	cl.mu.Unlock()
	if logged != runs || appends > runs/4 {
		t.Errorf("%d runs logged in %d appends, want %d in at most %d", logged, appends, runs, runs/4)
	}
	trs, err := gw.Traces(ctx(t), TraceFilter{Limit: 2 * runs})
	if err != nil || len(trs) != runs {
		t.Fatalf("traces = %d, %v; want %d", len(trs), err, runs)
	}
	for i, tr := range trs { // newest first
		if want := fmt.Sprintf("r%02d", runs-1-i); tr.ID != want {
			t.Fatalf("trace %d = %s, want %s", i, tr.ID, want)
		}
	}
	// Replayed from the WAL after a crash: the same runs, each once.
	n.Restart()
	gw = n.Exts[0].(*Gateway)
	if trs, err = gw.Traces(ctx(t), TraceFilter{Limit: 2 * runs}); err != nil || len(trs) != runs {
		t.Fatalf("after restart: traces = %d, %v; want %d", len(trs), err, runs)
	}
}

// TestRunsFlushedOnStop: a clean stop appends the runs still being
// gathered before the final snapshot, so none is lost.
func TestRunsFlushedOnStop(t *testing.T) {
	n := newNode(t, DefaultConfig(), nil)
	gw := start(n)
	gw.RecordRun(Trace{ID: "last", UserID: "alice", Status: RunOK, StartedAt: n.Clock.Now()})
	n.Stop()
	gw = start(n)
	if _, err := gw.Trace(ctx(t), "last"); err != nil {
		t.Fatalf("run recorded just before a clean stop: %v", err)
	}
}

// TestQueriesSeeRecordedRuns: a trace or usage query made right after
// RecordRun sees the run, though it may still be gathered (runLinger).
func TestQueriesSeeRecordedRuns(t *testing.T) {
	n := newNode(t, DefaultConfig(), nil)
	gw := start(n)
	if _, err := gw.CreateProvider(ctx(t), ProviderInput{Name: "echo", ProviderType: ProviderEcho, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	a, err := gw.CreateAgent(ctx(t), "alice", AgentInput{AgentKey: ptr("default"), Provider: ptr("echo"), Model: ptr("m")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		id := fmt.Sprint("seen-", i)
		gw.RecordRun(Trace{ID: id, AgentID: a.ID, UserID: "alice", Status: RunOK, StartedAt: n.Clock.Now(),
			Spans: []Span{{Kind: SpanLLM, PromptTokens: 1}}})
		if _, err := gw.Trace(ctx(t), id); err != nil {
			t.Fatalf("Trace(%s) right after RecordRun: %v", id, err)
		}
		gw.RecordRun(Trace{ID: id + "-b", AgentID: a.ID, UserID: "alice", Status: RunOK, StartedAt: n.Clock.Now(),
			Spans: []Span{{Kind: SpanLLM, PromptTokens: 1}}})
		us, err := gw.Usage(ctx(t), a.ID, "alice")
		if err != nil || len(us) != 1 || us[0].PromptTokens != int64(2*(i+1)) {
			t.Fatalf("usage after %d runs = %+v, %v; want %d prompt tokens", 2*(i+1), us, err, 2*(i+1))
		}
	}
}
