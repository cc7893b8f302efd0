package gateway

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway/pricing"
)

// TestRunCost: every LLM span of a recorded run is priced by the lookup
// rule (a provider's settings.prices over the config's pricing.models over
// the built-in table; local types free; unknown models 0 and flagged;
// skipped calls and tools unpriced); the trace, the usage series (by API
// key too), totals and rows sum the cost, the same after a replay and
// after a snapshot.
func TestRunCost(t *testing.T) {
	cfg := DefaultConfig()
	var err error
	cfg.Pricing, err = pricing.NewResolver(pricing.Table{
		"house-model":       {Input: 1, Output: 1, CacheRead: 1, CacheWrite: 1},
		"claude-sonnet-4-5": {Input: 10, Output: 10, CacheRead: 1, CacheWrite: 20}, // overrides the built-in
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	n := newNode(t, cfg, nil)
	gw := start(n)
	if _, err := gw.CreateProvider(ctx(t), ProviderInput{Name: "priced", ProviderType: ProviderEcho, Enabled: true,
		Settings: json.RawMessage(`{"prices": {"house-model": {"input": 100, "output": 200}}}`)}); err != nil {
		t.Fatal(err)
	}
	agent, key := uuid.New(), uuid.New()
	at := n.Clock.Now().UTC().Truncate(time.Second)
	llm := func(id, prov, typ, model string, in, out, read, write int64) Span {
		return Span{ID: id, Name: "llm.call " + model, Kind: SpanLLM, Provider: prov, ProviderType: typ, Model: model, StartedAt: at,
			Status: RunOK, PromptTokens: in, CompletionTokens: out, CacheReadTokens: read, CacheWriteTokens: write}
	}
	skipped := llm("f", "priced", ProviderEcho, "house-model", 0, 0, 0, 0)
	skipped.Status, skipped.Error = RunFailed, "skipped: every key cooling down"
	tr := Trace{ID: "r1", AgentID: agent, UserID: "alice", Endpoint: "chat", Status: RunOK, StartedAt: at, APIKeyID: key,
		Spans: []Span{
			llm("a", "priced", ProviderEcho, "house-model", 1000, 500, 0, 0),                       // provider: 100/200
			llm("b", "ghost", "anthropic_native", "claude-sonnet-4-5-20250929", 300, 50, 100, 100), // config by prefix
			llm("c", "ghost", "openai", "gpt-4o-mini-2024-07-18", 2000, 100, 1000, 0),              // built-in
			llm("d", "ghost", ProviderEcho, "echo", 10, 10, 0, 0),                                  // local: free
			llm("e", "ghost", "openai_compat", "mystery", 100, 100, 0, 0),                          // unknown
			llm("h", "ghost", "openai_compat", "house-model", 1000, 0, 0, 0),                       // config exactly
			skipped, // no call
			{ID: "g", Name: "tool x", Kind: SpanTool, StartedAt: at, Status: RunOK, PromptTokens: 0}, // a tool
		}}
	gw.RecordRun(tr)
	gw.RecordRun(Trace{ID: "r2", AgentID: agent, UserID: "bob", Status: RunOK, StartedAt: at, // no key
		Spans: []Span{llm("x", "ghost", "openai", "gpt-5", 1_000_000, 0, 0, 0)}})
	if err := gw.syncRuns(ctx(t)); err != nil {
		t.Fatal(err)
	}
	const (
		a = 1000*100_000 + 500*200_000 // 100 and 200 USD per million
		b = 100*10_000 + 100*1_000 + 100*20_000 + 50*10_000
		c = 1000*150 + 1000*75 + 100*600 // 0.15, 0.075 cached, 0.6 out
		h = 1000 * 1_000                 // 1 USD per million
		x = 1_000_000 * 1_250            // gpt-5: 1.25
	)
	yes, no := true, false
	want := map[string]struct {
		nano  int64
		known *bool
	}{"a": {a, &yes}, "b": {b, &yes}, "c": {c, &yes}, "d": {0, &yes}, "e": {0, &no}, "h": {h, &yes}, "f": {0, nil}, "g": {0, nil}}
	check := func(stage string, gw *Gateway) {
		t.Helper()
		got, err := gw.Trace(ctx(t), "r1")
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		for _, sp := range got.Spans {
			w := want[sp.ID]
			if sp.CostNano != w.nano || sp.CostUSD != float64(w.nano)/1e9 || !equalPtr(sp.PriceKnown, w.known) {
				t.Errorf("%s: span %s costs %d (%v USD, known %v), want %d (known %v)", stage, sp.ID, sp.CostNano, sp.CostUSD, str(sp.PriceKnown), w.nano, str(w.known))
			}
		}
		if got.CostNano != a+b+c+h || !equalPtr(got.PriceKnown, &no) || got.APIKeyID != key {
			t.Errorf("%s: trace costs %d (known %v, key %v), want %d (known false, key %v)", stage, got.CostNano, str(got.PriceKnown), got.APIKeyID, a+b+c+h, key)
		}
		pts, err := gw.UsageSeries(ctx(t), UsageQuery{GroupBy: GroupAPIKey})
		if err != nil || len(pts) != 2 {
			t.Fatalf("%s: by key: %+v, %v; want two groups", stage, pts, err)
		}
		byKey := map[string]UsagePoint{pts[0].Group: pts[0], pts[1].Group: pts[1]}
		if p := byKey[key.String()]; p.CostNano != a+b+c+h || p.CostUSD != float64(a+b+c+h)/1e9 || p.UnpricedCalls != 1 || p.Runs != 1 {
			t.Errorf("%s: the key's usage = %+v", stage, p)
		}
		if p := byKey[""]; p.CostNano != x || p.UnpricedCalls != 0 || p.Runs != 1 {
			t.Errorf("%s: the keyless usage = %+v", stage, p)
		}
		pts, err = gw.UsageSeries(ctx(t), UsageQuery{APIKeyID: key})
		if err != nil || len(pts) != 1 || pts[0].CostNano != a+b+c+h || pts[0].Runs != 1 {
			t.Errorf("%s: filtered by key: %+v, %v", stage, pts, err)
		}
		tot, err := gw.UsageTotals(ctx(t), time.Time{}, time.Time{}, "")
		if err != nil || tot.CostNano != a+b+c+h+x || tot.CostUSD != float64(a+b+c+h+x)/1e9 || tot.UnpricedCalls != 1 {
			t.Errorf("%s: totals = %+v, %v", stage, tot, err)
		}
		rows, err := gw.Usage(ctx(t), agent, "bob")
		if err != nil || len(rows) != 1 || rows[0].CostNano != x || rows[0].CostUSD != 1.25 {
			t.Errorf("%s: rows = %+v, %v", stage, rows, err)
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

// TestCostOldRecords: a run and a usage row recorded before prices decode
// with cost 0 and no price_known, which the trace's JSON leaves out.
func TestCostOldRecords(t *testing.T) {
	var run runRec
	old := `{"id":"r","agent_id":"00000000-0000-0000-0000-000000000001","user_id":"u","endpoint":"chat","status":"ok",
		"started_at":"2026-01-02T03:04:05Z","duration_ms":5,"spans":[{"id":"s","name":"llm.call m","kind":"llm",
		"started_at":"2026-01-02T03:04:05Z","duration_ms":5,"prompt_tokens":10,"completion_tokens":2,"status":"ok","model":"gpt-5"}]}`
	if err := json.Unmarshal([]byte(old), &run); err != nil {
		t.Fatal(err)
	}
	tr := run.view(true)
	if tr.CostNano != 0 || tr.PriceKnown != nil || tr.APIKeyID != uuid.Nil || tr.Spans[0].CostNano != 0 || tr.Spans[0].PriceKnown != nil {
		t.Errorf("old run: %+v", tr)
	}
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); strings.Contains(s, "price_known") || strings.Contains(s, "api_key_id") || !strings.Contains(s, `"cost_usd":0`) {
		t.Errorf("old run as JSON: %s", s)
	}
	var u usageRec
	if err := json.Unmarshal([]byte(`{"hour":"2026-01-02T03","agent_id":"00000000-0000-0000-0000-000000000001","user_id":"u","runs":1,"prompt_tokens":1,"completion_tokens":1}`), &u); err != nil {
		t.Fatal(err)
	}
	if u.CostNano != 0 || u.UnpricedCalls != 0 || u.APIKeyID != uuid.Nil {
		t.Errorf("old usage row: %+v", u)
	}
}

// TestProviderPricesValidated: settings.prices must be an object of
// model to valid price when a provider is saved; the error names the
// model.
func TestProviderPricesValidated(t *testing.T) {
	gw := start(newNode(t, DefaultConfig(), nil))
	for _, tc := range []struct {
		settings string
		bad      string // "" valid, else part of the error
	}{
		{`{"prices": {"m": {"input": 1, "output": 2, "cache_read": 0.1}}}`, ""},
		{`{"prices": {"m1": {"input": -1, "output": 2}}}`, `"m1"`},
		{`{"prices": {"m2": {"input": 1}}}`, `"m2"`},
		{`{"prices": {"m3": {"input": 1, "output": 1, "cache_raed": 1}}}`, `"m3"`},
		{`{"prices": [1]}`, "settings.prices"},
	} {
		_, err := gw.CreateProvider(ctx(t), ProviderInput{Name: "p" + uuid.NewString()[:8], ProviderType: ProviderEcho, Enabled: true,
			Settings: json.RawMessage(tc.settings)})
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%s: %v", tc.settings, err)
		case tc.bad != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%s: %v, want ErrInvalid naming %s", tc.settings, err, tc.bad)
		}
	}
	p, ok := gw.PriceOf("openai", nil, "gpt-5")
	if !ok || p.Input != 1.25 || gw.RequireKnownPrices() {
		t.Errorf("PriceOf without a config = %+v %v (require_known %v), want the built-in price", p, ok, gw.RequireKnownPrices())
	}
}

func equalPtr(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func str(b *bool) string {
	if b == nil {
		return "absent"
	}
	if *b {
		return "true"
	}
	return "false"
}
