package gateway

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/actors/clock"
	"gatehouse/actors/gateway"
)

// TestUsageAndTraces drives a scripted day of traffic (two users, three
// agents on two providers, one run that fails) with a fake clock and
// checks the usage series, the summary and the traces exactly, and who
// may read what.
func TestUsageAndTraces(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 23, 0, 30, 0, 0, time.UTC))
	e := newGWEnv(t, gwOpts{token: gwToken, clk: clk, gw: func(c *gateway.Config) { c.ToolsExecEnabled, c.WorkspaceDir = true, t.TempDir() }})
	e.seedAgent("a1", `{"delay_ms":0}`, "") // alice's, system prompt "be brief"
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"a2","provider":"echo","model":"echo-2"}`, "X-Gateway-User-Id", "bob")
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"dead","provider_type":"openai_compat","api_base":"http://127.0.0.1:1/v1","api_key":"sk-dead-credential-1","settings":{"max_retries":0}}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"a3","provider":"dead","model":"m3"}`, "X-Gateway-User-Id", "alice")
	bobKey := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"bob","scopes":["operator.read"],"user_id":"bob"}`).body["key"].(string)

	e.must(201, "POST", "/v1/tools/custom", gwToken, `{"name":"same","command":["cat"]}`) // a global tool
	runs := 0
	chat := func(user, agent, msg string, want int) {
		t.Helper()
		body := fmt.Sprintf(`{"model":"gateway:%s","messages":[{"role":"user","content":%q}]}`, agent, msg)
		e.must(want, "POST", "/v1/chat/completions", gwToken, body, "X-Gateway-User-Id", user)
		runs++
	}
	clk.Set(time.Date(2026, 11, 23, 0, 10, 0, 0, time.UTC))
	// 00:10, bob calls a tool: two LLM calls (prompt 3, completion 1; then
	// prompt 3+1, completion 2) and one tool call.
	chat("bob", "a2", `/tool same {"x":1}`, 200)
	clk.Set(time.Date(2026, 11, 23, 0, 30, 0, 0, time.UTC))
	chat("alice", "a1", "hello world", 200) // 00:30: prompt 2+2, completion 3
	clk.Set(time.Date(2026, 11, 23, 10, 15, 0, 0, time.UTC))
	chat("alice", "a1", "one", 200)                                // prompt 3, completion 2
	chat("alice", "a1", "my key is sk-live-abcdef1234567890", 200) // prompt 6, completion 5
	chat("bob", "a2", "x y z", 200)                                // prompt 3, completion 4
	chat("alice", "a3", "hi", 502)                                 // the provider is down: a failed run, no tokens
	clk.Set(time.Date(2026, 11, 23, 10, 20, 0, 0, time.UTC))
	waitTraces(t, e, runs)

	usage := func(token, query string, hdr ...string) []any {
		t.Helper()
		r := e.must(200, "GET", "/v1/usage?"+query, token, "", hdr...)
		return r.body["data"].([]any)
	}
	day := "from=2026-11-23T00:00:00Z&to=2026-11-24T00:00:00Z"
	got := usage(gwToken, "granularity=hour&"+day)
	want := []any{
		point("2026-11-23T00:00:00Z", "", 2, 4+7, 3+3, 0, 1+2, 1),
		unpriced(point("2026-11-23T10:00:00Z", "", 4, 3+6+3+0, 2+5+4, 1, 4, 0)), // m3 on dead has no price
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hourly usage (-want +got):\n%s", diff)
	}
	// A range that ends inside an hour takes that hour; the default range
	// ends with the current hour.
	if got := usage(gwToken, "granularity=hour&from=2026-11-23T10:00:00Z&to=2026-11-23T10:20:00Z"); len(got) != 1 {
		t.Errorf("usage up to 10:20 = %v, want the 10:00 hour", got)
	}
	if got := usage(gwToken, "granularity=hour&to=2026-11-23T11:00:00Z"); len(got) != 2 {
		t.Errorf("usage of the last 24 h = %v, want both hours", got)
	}
	got = usage(gwToken, "group_by=user&"+day)
	want = []any{
		unpriced(point("2026-11-23T00:00:00Z", "alice", 4, 4+3+6, 3+2+5, 1, 4, 0)),
		point("2026-11-23T00:00:00Z", "bob", 2, 3+7, 4+3, 0, 1+2, 1),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("daily usage by user (-want +got):\n%s", diff)
	}
	got = usage(gwToken, "group_by=provider&provider=dead&"+day)
	if diff := cmp.Diff([]any{unpriced(point("2026-11-23T00:00:00Z", "dead", 1, 0, 0, 1, 1, 0))}, got); diff != "" {
		t.Errorf("usage of provider dead (-want +got):\n%s", diff)
	}
	// A key bound to bob sees bob's usage only, whatever it asks for.
	got = usage(bobKey, day)
	if diff := cmp.Diff([]any{point("2026-11-23T00:00:00Z", "", 2, 10, 7, 0, 3, 1)}, got); diff != "" {
		t.Errorf("bob's usage (-want +got):\n%s", diff)
	}
	e.must(403, "GET", "/v1/usage?user_id=alice", bobKey, "")
	for _, q := range []string{"granularity=minute", "group_by=planet", "from=yesterday", "from=2026-01-01T00:00:00Z&to=2026-12-31T00:00:00Z&granularity=hour", "from=2026-11-24T00:00:00Z&to=2026-11-23T00:00:00Z"} {
		if r := e.do("GET", "/v1/usage?"+q, gwToken, ""); r.status != 400 {
			t.Errorf("GET /v1/usage?%s = %d, want 400", q, r.status)
		}
	}

	sum := e.must(200, "GET", "/v1/usage/summary?period=today", gwToken, "").body
	wantCur := map[string]any{"requests": 6.0, "input_tokens": 23.0, "output_tokens": 17.0, "errors": 1.0, "unique_users": 2.0, "llm_calls": 7.0, "tool_calls": 1.0,
		"cost_usd": 0.0, "unpriced_calls": 1.0} // echo is free, m3 has no price
	cur := sum["current"].(map[string]any)
	delete(cur, "avg_duration_ms") // wall-clock time
	if diff := cmp.Diff(wantCur, cur); diff != "" {
		t.Errorf("summary today (-want +got):\n%s", diff)
	}
	if prev := sum["previous"].(map[string]any); prev["requests"] != 0.0 {
		t.Errorf("summary previous = %v, want nothing yesterday", prev)
	}
	if r := e.must(200, "GET", "/v1/usage/summary", bobKey, "").body; r["current"].(map[string]any)["requests"] != 2.0 || r["period"] != "24h" {
		t.Errorf("bob's 24h summary = %v", r)
	}
	e.must(400, "GET", "/v1/usage/summary?period=week", gwToken, "")

	// Traces: newest first, filtered, paginated.
	list := func(token, query string) (ids []string, total float64) {
		t.Helper()
		r := e.must(200, "GET", "/v1/traces?"+query, token, "")
		for _, x := range r.body["data"].([]any) {
			ids = append(ids, x.(map[string]any)["input_preview"].(string))
		}
		return ids, r.body["total"].(float64)
	}
	ids, total := list(gwToken, "")
	if total != 6 || len(ids) != 6 || ids[0] != "hi" || ids[4] != "hello world" || ids[5] != `/tool same {"x":1}` {
		t.Errorf("traces = %q (total %v), want 6 newest first", ids, total)
	}
	if ids[2] != "my key is [redacted]" {
		t.Errorf("input preview = %q, want the key redacted", ids[2])
	}
	if ids, total = list(gwToken, "limit=2&offset=1"); total != 6 || len(ids) != 2 || ids[0] != "x y z" {
		t.Errorf("page 2 of 2 = %q (total %v)", ids, total)
	}
	if ids, _ = list(gwToken, "status=failed"); len(ids) != 1 || ids[0] != "hi" {
		t.Errorf("failed traces = %q", ids)
	}
	if ids, _ = list(gwToken, "to="+url.QueryEscape("2026-11-23T01:00:00Z")); len(ids) != 2 || ids[0] != "hello world" {
		t.Errorf("traces before 01:00 = %q", ids)
	}
	if ids, _ = list(bobKey, ""); len(ids) != 2 || ids[0] != "x y z" {
		t.Errorf("bob's traces = %q", ids)
	}
	e.must(400, "GET", "/v1/traces?limit=500", gwToken, "")

	failed := e.must(200, "GET", "/v1/traces?status=failed", gwToken, "").body["data"].([]any)[0].(map[string]any)
	id := failed["id"].(string)
	tr := e.must(200, "GET", "/v1/traces/"+id, gwToken, "").body
	spans := tr["spans"].([]any)
	if len(spans) != 1 || tr["span_count"] != 1.0 || tr["name"] != "chat.completions" || tr["channel"] != "http" ||
		tr["provider"] != "dead" || tr["model"] != "m3" || tr["error"] == "" || strings.Contains(fmt.Sprint(tr), "sk-dead-credential-1") {
		t.Errorf("trace = %v", tr)
	}
	if sp := spans[0].(map[string]any); sp["span_type"] != "llm" || sp["parent_span_id"] != "" || sp["status"] != "failed" || sp["id"] == "" {
		t.Errorf("span = %v", sp)
	}
	e.must(404, "GET", "/v1/traces/"+id, bobKey, "") // alice's: ids do not leak
	e.must(404, "GET", "/v1/traces/nope", gwToken, "")
}

func point(bucket, group string, runs, in, out, errs, llm, tools float64) any {
	p := map[string]any{"bucket": bucket, "runs": runs, "input_tokens": in, "output_tokens": out, "total_tokens": in + out,
		"errors": errs, "llm_calls": llm, "tool_calls": tools, "cost_usd": 0.0}
	if group != "" {
		p["group"] = group
	}
	return p
}

// unpriced marks point p as holding one call to a model without a price.
func unpriced(p any) any {
	p.(map[string]any)["unpriced_calls"] = 1.0
	return p
}

// waitTraces waits until n runs are recorded (a run is logged after the
// answer).
func waitTraces(t *testing.T, e *gwEnv, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if p, err := e.gw.TracePage(ctxT(t), gateway.TraceFilter{}); err == nil && p.Total >= n {
			return
		}
	}
	t.Fatalf("fewer than %d runs recorded", n)
}
