package gateway

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun/llm/llmtest"
	"gatehouse/actors/gateway/pricing"
)

// costChat is a chat with agent, usage answered by the stub.
func costChat(agent, msg string) string {
	return fmt.Sprintf(`{"model":"gateway:%s","messages":[{"role":"user","content":%q}]}`, agent, msg)
}

// near: USD amounts from nano compare to the nano.
func near(got any, want float64) bool {
	f, ok := got.(float64)
	return ok && math.Abs(f-want) < 1e-10
}

// TestCostHTTP: real runs on an Anthropic stub that reports cache and
// output tokens: the trace and its spans show cost_usd and price_known
// (false, cost 0, for a model without a price), the trace the calling
// key's api_key_id; /v1/usage groups and filters by key with cost_usd,
// and the summary sums it.
func TestCostHTTP(t *testing.T) {
	ant := llmtest.NewAnthropic(t)
	ant.Default = &llmtest.Reply{Text: "ok", Usage: llmtest.Usage{Prompt: 1000, CacheRead: 400, CacheWrite: 100, Completion: 50}}
	e := newGWEnv(t, gwOpts{token: gwToken})
	alice := []string{"X-Gateway-User-Id", "alice"}
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"claude","provider_type":"anthropic_native","api_base":"`+ant.URL+`","api_key":"sk-ant-cost-0000001"}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"default","provider":"claude","model":"claude-sonnet-4-5-20250929"}`, alice...)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"odd","provider":"claude","model":"claude-mystery-9"}`, alice...)
	r := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"a","scopes":["operator.write"],"user_id":"alice"}`)
	key, keyID := r.body["key"].(string), r.body["id"].(string)

	e.must(200, "POST", "/v1/chat/completions", key, costChat("default", "with the key"))
	e.must(200, "POST", "/v1/chat/completions", gwToken, costChat("default", "without a key"), alice...)
	e.must(200, "POST", "/v1/chat/completions", gwToken, costChat("odd", "no price"), alice...)
	waitTraces(t, e, 3)
	// claude-sonnet-4-5 built in: 500 plain at 3, 400 read at 0.3, 100
	// written at 3.75, 50 out at 15 (USD per million).
	const cost = (500*3 + 400*0.3 + 100*3.75 + 50*15) / 1e6
	r = e.must(200, "GET", "/v1/traces?limit=10", gwToken, "")
	traces := r.body["data"].([]any)
	if len(traces) != 3 {
		t.Fatalf("traces = %s", r.raw)
	}
	byInput := map[string]map[string]any{}
	for _, x := range traces {
		tr := x.(map[string]any)
		byInput[tr["input_preview"].(string)] = tr
	}
	withKey, without, odd := byInput["with the key"], byInput["without a key"], byInput["no price"]
	if !near(withKey["cost_usd"], cost) || withKey["price_known"] != true || withKey["api_key_id"] != keyID {
		t.Errorf("the keyed run = %v, want cost_usd %v, price_known, api_key_id %s", withKey, cost, keyID)
	}
	if !near(without["cost_usd"], cost) || without["price_known"] != true || without["api_key_id"] != nil {
		t.Errorf("the keyless run = %v", without)
	}
	if odd["cost_usd"] != 0.0 || odd["price_known"] != false {
		t.Errorf("the unpriced run = %v, want cost_usd 0 and price_known false", odd)
	}
	r = e.must(200, "GET", "/v1/traces/"+withKey["id"].(string), gwToken, "")
	sp := r.body["spans"].([]any)[0].(map[string]any)
	if sp["span_type"] != "llm" || !near(sp["cost_usd"], cost) || sp["price_known"] != true {
		t.Errorf("the keyed run's span = %v", sp)
	}

	r = e.must(200, "GET", "/v1/usage?group_by=api_key", gwToken, "")
	groups := map[string]map[string]any{}
	for _, x := range r.body["data"].([]any) {
		p := x.(map[string]any)
		g, _ := p["group"].(string)
		groups[g] = p
	}
	if p := groups[keyID]; p == nil || !near(p["cost_usd"], cost) || p["runs"] != 1.0 {
		t.Errorf("the key's usage = %v (%s)", p, r.raw)
	}
	if p := groups[""]; p == nil || !near(p["cost_usd"], cost) || p["runs"] != 2.0 || p["unpriced_calls"] != 1.0 {
		t.Errorf("the keyless usage = %v (%s)", p, r.raw)
	}
	r = e.must(200, "GET", "/v1/usage?group_by=model&api_key_id="+keyID, gwToken, "")
	if d := r.body["data"].([]any); len(d) != 1 || d[0].(map[string]any)["group"] != "claude-sonnet-4-5-20250929" || !near(d[0].(map[string]any)["cost_usd"], cost) {
		t.Errorf("usage of the key by model = %s", r.raw)
	}
	if r := e.do("GET", "/v1/usage?api_key_id=nope", gwToken, ""); r.status != http.StatusBadRequest || !strings.Contains(r.errMsg(), "api_key_id") {
		t.Errorf("a bad api_key_id = %d %s", r.status, r.raw)
	}
	r = e.must(200, "GET", "/v1/usage/summary", gwToken, "")
	if cur := r.body["current"].(map[string]any); !near(cur["cost_usd"], 2*cost) || cur["unpriced_calls"] != 1.0 {
		t.Errorf("summary = %s", r.raw)
	}
	// A user's key reads its own usage by key.
	r = e.must(200, "GET", "/v1/usage?group_by=api_key", key, "")
	if d := r.body["data"].([]any); len(d) != 2 {
		t.Errorf("alice's usage by key = %s", r.raw)
	}
}

// TestCostOverridesHTTP: a provider's settings.prices wins over the
// config's pricing.models, which wins over the built-in table; a bad
// settings.prices is refused with 400 naming the model.
func TestCostOverridesHTTP(t *testing.T) {
	ant := llmtest.NewAnthropic(t)
	ant.Default = &llmtest.Reply{Text: "ok", Usage: llmtest.Usage{Prompt: 1000, Completion: 1000}}
	e := newGWEnv(t, gwOpts{token: gwToken, gw: func(c *gateway.Config) {
		var err error
		c.Pricing, err = pricing.NewResolver(pricing.Table{"claude-sonnet-4-5": {Input: 2, Output: 2, CacheRead: 2, CacheWrite: 2}}, false)
		if err != nil {
			t.Fatal(err)
		}
	}})
	alice := []string{"X-Gateway-User-Id", "alice"}
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"plain","provider_type":"anthropic_native","api_base":"`+ant.URL+`","api_key":"sk-ant-cost-0000002"}`)
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"priced","provider_type":"anthropic_native","api_base":"`+ant.URL+`","api_key":"sk-ant-cost-0000003",
		"settings":{"prices":{"claude-sonnet-4-5":{"input":5,"output":7}}}}`)
	r := e.do("POST", "/v1/providers", gwToken, `{"name":"bad","provider_type":"echo","settings":{"prices":{"broken-model":{"input":-1,"output":1}}}}`)
	if r.status != http.StatusBadRequest || !strings.Contains(r.errMsg(), "broken-model") {
		t.Errorf("a bad settings.prices = %d %s, want 400 naming the model", r.status, r.raw)
	}
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"a1","provider":"plain","model":"claude-sonnet-4-5"}`, alice...)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"a2","provider":"priced","model":"claude-sonnet-4-5"}`, alice...)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"a3","provider":"plain","model":"claude-haiku-4-5"}`, alice...)
	for _, a := range []string{"a1", "a2", "a3"} {
		e.must(200, "POST", "/v1/chat/completions", gwToken, costChat(a, a), alice...)
	}
	waitTraces(t, e, 3)
	want := map[string]float64{
		"a1": (1000*2 + 1000*2) / 1e6, // the config's
		"a2": (1000*5 + 1000*7) / 1e6, // the provider's
		"a3": (1000*1 + 1000*5) / 1e6, // built in
	}
	r = e.must(200, "GET", "/v1/traces", gwToken, "")
	for _, x := range r.body["data"].([]any) {
		tr := x.(map[string]any)
		in := tr["input_preview"].(string)
		if !near(tr["cost_usd"], want[in]) || tr["price_known"] != true {
			t.Errorf("run of %s = cost_usd %v (known %v), want %v", in, tr["cost_usd"], tr["price_known"], want[in])
		}
	}
}

// TestCostRequireKnownHTTP: with pricing.require_known, a call to a model
// without a price is refused before anything reaches the provider; a
// priced model and a local (echo) one still run.
func TestCostRequireKnownHTTP(t *testing.T) {
	ant := llmtest.NewAnthropic(t)
	e := newGWEnv(t, gwOpts{token: gwToken, gw: func(c *gateway.Config) {
		var err error
		if c.Pricing, err = pricing.NewResolver(nil, true); err != nil {
			t.Fatal(err)
		}
	}})
	alice := []string{"X-Gateway-User-Id", "alice"}
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"claude","provider_type":"anthropic_native","api_base":"`+ant.URL+`","api_key":"sk-ant-cost-0000004"}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"odd","provider":"claude","model":"claude-mystery-9"}`, alice...)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"known","provider":"claude","model":"claude-haiku-4-5-20251001"}`, alice...)
	e.seedAgent("local", `{}`, "")
	r := e.do("POST", "/v1/chat/completions", gwToken, costChat("odd", "refuse me"), alice...)
	if r.status == http.StatusOK || !strings.Contains(r.errMsg(), "no price") || !strings.Contains(r.errMsg(), "require_known") {
		t.Errorf("an unpriced model under require_known = %d %s, want a refusal naming require_known", r.status, r.raw)
	}
	if n := len(ant.Requests()); n != 0 {
		t.Errorf("the provider received %d requests, want none", n)
	}
	e.must(200, "POST", "/v1/chat/completions", gwToken, costChat("known", "priced"), alice...)
	e.must(200, "POST", "/v1/chat/completions", gwToken, costChat("local", "free"), alice...)
	if n := len(ant.Requests()); n != 1 {
		t.Errorf("the provider received %d requests, want the priced one", n)
	}
}
