package gateway

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestRunStateApply(t *testing.T) {
	agent := uuid.New()
	day := func(d int) time.Time { return time.Date(2026, 11, d, 23, 59, 0, 0, time.UTC) }
	tr := func(id string, at time.Time) runRecorded {
		return runRecorded{newRunRec(Trace{ID: id, AgentID: agent, UserID: "u", StartedAt: at, Provider: "p", Model: "m", Status: RunOK,
			Spans: []Span{{Kind: SpanLLM, PromptTokens: 2, CompletionTokens: 1}, {Kind: SpanTool}}})}
	}
	rs := newRunState(3, 0, 2)
	rs.apply(1, tr("a", day(20)))
	rs.apply(2, tr("b", day(20).Add(2*time.Minute))) // 00:01 the next UTC day
	rs.apply(2, tr("b", day(20)))                    // replayed: already reflected
	rs.apply(1, tr("a", day(20)))
	if len(rs.usage) != 2 || len(rs.traces) != 2 || rs.seq != 2 {
		t.Fatalf("after replay: %d usage rows, %d traces, seq %d; want 2, 2, 2", len(rs.usage), len(rs.traces), rs.seq)
	}
	rs.apply(3, tr("c", day(22)))
	rs.apply(4, tr("d", day(22)))
	// Two days kept back from the newest (the 22nd): the 21st and 22nd.
	for k := range rs.usage {
		if k.hour < "2026-11-21T00" {
			t.Errorf("usage row %s outlived the 2-day retention", k.hour)
		}
	}
	if u := rs.usage[usageKey{"2026-11-22T23", agent, "u", "p", "m", "", uuid.Nil}]; u == nil || u.Runs != 2 || u.PromptTokens != 4 ||
		u.CompletionTokens != 2 || u.LLMCalls != 2 || u.ToolCalls != 2 || u.Errors != 0 {
		t.Errorf("row 2026-11-22T23 = %+v, want 2 runs, 4 prompt, 2 completion tokens, 2 LLM and 2 tool calls", u)
	}
	if len(rs.traces) != 3 || rs.traces[0].ID != "b" {
		t.Errorf("traces = %v, want the newest 3 from b", rs.traces)
	}
}

// TestTraceAgeRetention: traces older than traceDays before the newest
// run are dropped, whatever the count.
func TestTraceAgeRetention(t *testing.T) {
	rs := newRunState(100, 2, 400)
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	for i, d := range []int{0, 1, 2, 3} {
		rs.apply(uint64(i+1), runRecorded{newRunRec(Trace{ID: fmt.Sprint(i), StartedAt: t0.AddDate(0, 0, d), Status: RunOK})})
	}
	if len(rs.traces) != 3 || rs.traces[0].ID != "1" {
		t.Errorf("traces = %d from %s, want 3 from 1 (2 days back from the newest)", len(rs.traces), rs.traces[0].ID)
	}
	if len(rs.usage) != 4 {
		t.Errorf("usage rows = %d, want 4 (usage has its own retention)", len(rs.usage))
	}
}

func BenchmarkAuthenticate(b *testing.B) {
	gw := start(newNode(b, DefaultConfig(), nil))
	_, raw, err := gw.CreateAPIKey(ctx(b), NewAPIKey{Name: "bench", Scopes: []Scope{ScopeRead}, UserID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	key := []byte(raw)
	c := ctx(b)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := gw.Authenticate(c, key); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
