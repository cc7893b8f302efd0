package gateway

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
)

// TestUsageTokenKinds: a run's spans carry cache and reasoning tokens,
// its attempts and provider types; the trace and every usage view sum
// them under the provider and model that answered, the same after a
// replay and after a snapshot.
func TestUsageTokenKinds(t *testing.T) {
	n := newNode(t, DefaultConfig(), nil)
	gw := start(n)
	agent := uuid.New()
	at := n.Clock.Now().UTC().Truncate(time.Second)
	tr := Trace{ID: "r1", AgentID: agent, UserID: "alice", Endpoint: "chat", Status: RunOK, StartedAt: at, DurationMs: 40,
		Provider: "backup", ProviderType: "gemini_native", Model: "gem-1",
		Spans: []Span{
			{ID: "s1", Name: "llm.call m", Kind: SpanLLM, Provider: "main", ProviderType: "anthropic_native", Model: "m", Attempt: 1,
				StartedAt: at, Status: RunFailed, Error: "status 529: overloaded_error: busy"},
			{ID: "s2", Name: "llm.call gem-1", Kind: SpanLLM, Provider: "backup", ProviderType: "gemini_native", Model: "gem-1", Attempt: 2,
				StartedAt: at, Status: RunOK, PromptTokens: 100, CompletionTokens: 30, CacheReadTokens: 60, CacheWriteTokens: 20, ReasoningTokens: 12},
			{ID: "s3", Name: "tool x", Kind: SpanTool, StartedAt: at, Status: RunOK},
		}}
	gw.RecordRun(tr)
	unpriced := false // neither model has a price (cost_test.go tests prices)
	tr.Spans[0].PriceKnown, tr.Spans[1].PriceKnown, tr.PriceKnown = &unpriced, &unpriced, &unpriced
	// An old-style run (no provider type, no new kinds) counts apart.
	gw.RecordRun(Trace{ID: "r0", AgentID: agent, UserID: "alice", Status: RunOK, StartedAt: at, Provider: "backup", Model: "gem-1",
		Spans: []Span{{ID: "s0", Kind: SpanLLM, StartedAt: at, PromptTokens: 5, CompletionTokens: 1, Status: RunOK}}})
	if err := gw.syncRuns(ctx(t)); err != nil {
		t.Fatal(err)
	}
	wantCounts := TokenCounts{Prompt: 100, Completion: 30, CacheRead: 60, CacheWrite: 20, Reasoning: 12}
	check := func(stage string, gw *Gateway) {
		t.Helper()
		got, err := gw.Trace(ctx(t), "r1")
		if err != nil {
			t.Fatalf("%s: Trace = %v", stage, err)
		}
		if diff := cmp.Diff(tr, got); diff != "" {
			t.Errorf("%s: trace differs from the recorded one (-recorded +got):\n%s", stage, diff)
		}
		if c := got.TokenCounts(); c != wantCounts {
			t.Errorf("%s: TokenCounts = %+v, want %+v", stage, c, wantCounts)
		}
		pts, err := gw.UsageSeries(ctx(t), UsageQuery{GroupBy: GroupProvider})
		if err != nil || len(pts) != 1 {
			t.Fatalf("%s: UsageSeries = %+v, %v; want one point", stage, pts, err)
		}
		p := pts[0]
		if p.Group != "backup" || p.Runs != 2 || p.InputTokens != 105 || p.OutputTokens != 31 || p.CacheReadTokens != 60 ||
			p.CacheWriteTokens != 20 || p.ReasoningTokens != 12 || p.LLMCalls != 3 || p.ToolCalls != 1 {
			t.Errorf("%s: usage point = %+v", stage, p)
		}
		tot, err := gw.UsageTotals(ctx(t), time.Time{}, time.Time{}, "alice")
		if err != nil || tot.Requests != 2 || tot.InputTokens != 105 || tot.CacheReadTokens != 60 || tot.CacheWriteTokens != 20 || tot.ReasoningTokens != 12 {
			t.Errorf("%s: UsageTotals = %+v, %v", stage, tot, err)
		}
		rows, err := gw.Usage(ctx(t), agent, "alice")
		if err != nil || len(rows) != 1 || rows[0].CacheReadTokens != 60 || rows[0].CacheWriteTokens != 20 || rows[0].ReasoningTokens != 12 || rows[0].PromptTokens != 105 {
			t.Errorf("%s: Usage = %+v, %v", stage, rows, err)
		}
		types := map[string]int64{}
		for _, u := range gw.usageRowsT(t) {
			types[u.ProviderType] += u.Runs
		}
		if !cmp.Equal(types, map[string]int64{"gemini_native": 1, "": 1}) {
			t.Errorf("%s: usage rows by provider type = %v, want one gemini_native run and one without a type", stage, types)
		}
	}
	check("live", gw)
	n.Crash()
	gw = start(n)
	check("replayed", gw)
	if _, err := n.Sys.Snapshot(); err != nil {
		t.Fatal(err)
	}
	n.Crash()
	gw = start(n)
	check("restored", gw)
}

func (g *Gateway) usageRowsT(t *testing.T) []usageRec {
	t.Helper()
	rows, err := g.usageRows(ctx(t), UsageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
