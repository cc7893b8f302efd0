package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"gatehouse/actors/gateway"
)

// TestAgentFallbacksHTTP: POST and PUT /v1/agents take fallbacks (by
// provider name or id) and other_config.max_tokens, GET shows them with
// the providers' names, bad ones are 400s, and a provider that is a
// fallback cannot be deleted.
func TestAgentFallbacksHTTP(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	ids := map[string]string{}
	for _, p := range []string{
		`{"name":"main","provider_type":"echo"}`,
		`{"name":"claude","provider_type":"anthropic","api_key":"sk-ant-000000000001"}`,
		`{"name":"local","provider_type":"ollama"}`,
	} {
		r := e.must(201, "POST", "/v1/providers", gwToken, p)
		ids[r.body["name"].(string)] = r.body["id"].(string)
	}
	user := []string{"X-Gateway-User-Id", "alice"}
	r := e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"resilient","provider":"main","model":"m1",`+
		`"fallbacks":[{"provider":"claude","model":"claude-sonnet-4-5"},{"provider":"`+ids["local"]+`","model":"llama3.2"}],`+
		`"other_config":{"description":"","max_tokens":2048}}`, user...)
	want := []any{
		map[string]any{"provider_id": ids["claude"], "provider": "claude", "model": "claude-sonnet-4-5"},
		map[string]any{"provider_id": ids["local"], "provider": "local", "model": "llama3.2"},
	}
	if diff := cmp.Diff(want, r.body["fallbacks"]); diff != "" {
		t.Errorf("created fallbacks (-want +got):\n%s", diff)
	}
	if mt := r.body["other_config"].(map[string]any)["max_tokens"]; mt != 2048.0 {
		t.Errorf("other_config.max_tokens = %v, want 2048", mt)
	}
	if got := e.must(200, "GET", "/v1/agents/resilient", gwToken, "", user...); !cmp.Equal(got.body["fallbacks"], want) {
		t.Errorf("GET fallbacks = %v, want %v", got.body["fallbacks"], want)
	}
	plain := e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"plain","provider":"local","model":"m"}`, user...)
	if !strings.Contains(plain.raw, `"fallbacks":[]`) || strings.Contains(plain.raw, "max_tokens") {
		t.Errorf("agent without fallbacks = %s, want \"fallbacks\":[] and no max_tokens", plain.raw)
	}

	for _, tt := range []struct {
		name, body, msg string
	}{
		{"unknown provider", `{"fallbacks":[{"provider":"nope","model":"m"}]}`, `fallbacks[0].provider "nope" does not exist`},
		{"no model", `{"fallbacks":[{"provider":"claude"}]}`, "fallbacks[0].model must be 1-200 characters"},
		{"long model", `{"fallbacks":[{"provider":"claude","model":"` + strings.Repeat("m", 201) + `"}]}`, "fallbacks[0].model"},
		{"the primary again", `{"fallbacks":[{"provider":"main","model":"m1"}]}`, "fallbacks[0] repeats provider main with model m1"},
		{"too many", `{"fallbacks":[` + strings.TrimSuffix(strings.Repeat(`{"provider":"claude","model":"x"},`, 9), ",") + `]}`, "at most 8 entries"},
		{"max_tokens", `{"other_config":{"max_tokens":1000001}}`, "other_config.max_tokens must be in 0..1000000"},
		{"not a list", `{"fallbacks":{"provider":"claude"}}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if r := e.do("PUT", "/v1/agents/resilient", gwToken, tt.body, user...); r.status != 400 || !strings.Contains(r.errMsg(), tt.msg) {
				t.Errorf("PUT = %d %s, want 400 with %q", r.status, r.raw, tt.msg)
			}
		})
	}
	r = e.do("DELETE", "/v1/providers/local", gwToken, "")
	if r.status != 412 || r.errCode() != codePrecondition || !strings.Contains(r.errMsg(), "agent plain") {
		t.Errorf("DELETE primary of plain = %d %s, want 412 naming agent plain", r.status, r.raw)
	}
	r = e.do("DELETE", "/v1/providers/claude", gwToken, "")
	if r.status != 412 || !strings.Contains(r.errMsg(), "fallback of agent resilient") {
		t.Errorf("DELETE fallback provider = %d %s, want 412 naming agent resilient", r.status, r.raw)
	}
	// Replace by id, then clear; the provider is free again.
	r = e.must(200, "PUT", "/v1/agents/resilient", gwToken, `{"fallbacks":[{"provider":"`+ids["claude"]+`","model":"claude-haiku-4-5"}]}`, user...)
	if fb := r.body["fallbacks"].([]any); len(fb) != 1 || fb[0].(map[string]any)["provider"] != "claude" {
		t.Errorf("replaced fallbacks = %v", fb)
	}
	r = e.must(200, "PUT", "/v1/agents/resilient", gwToken, `{"fallbacks":[]}`, user...)
	if !strings.Contains(r.raw, `"fallbacks":[]`) {
		t.Errorf("cleared fallbacks = %s", r.raw)
	}
	e.must(204, "DELETE", "/v1/providers/claude", gwToken, "")
}

// TestFallbackRunUsageHTTP: a run answered by a fallback shows, in its
// trace, every attempt with its provider type and the new token kinds,
// and /v1/usage and /v1/usage/summary count those kinds under the
// provider and model that answered.
func TestFallbackRunUsageHTTP(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	now := e.gw.Now().UTC()
	e.gw.RecordRun(gateway.Trace{ID: "fb-run", UserID: "alice", Endpoint: "chat.completions", Status: gateway.RunOK,
		Provider: "claude", ProviderType: "anthropic_native", Model: "claude-haiku-4-5", StartedAt: now, DurationMs: 90,
		Spans: []gateway.Span{
			{ID: "a1", Name: "llm.call m1", Kind: gateway.SpanLLM, Provider: "main", ProviderType: "openai_compat", Model: "m1",
				Attempt: 1, StartedAt: now, Status: gateway.RunFailed, Error: "status 503: overloaded"},
			{ID: "a2", Name: "llm.call claude-haiku-4-5", Kind: gateway.SpanLLM, Provider: "claude", ProviderType: "anthropic_native",
				Model: "claude-haiku-4-5", Attempt: 2, StartedAt: now, DurationMs: 80, Status: gateway.RunOK,
				PromptTokens: 120, CompletionTokens: 40, CacheReadTokens: 100, CacheWriteTokens: 15, ReasoningTokens: 25},
		}})
	waitTraces(t, e, 1)
	tr := e.must(200, "GET", "/v1/traces/fb-run", gwToken, "")
	var view struct {
		Provider     string     `json:"provider"`
		ProviderType string     `json:"provider_type"`
		Model        string     `json:"model"`
		Tokens       tokensView `json:"tokens"`
		Spans        []spanView `json:"spans"`
	}
	if err := json.Unmarshal([]byte(tr.raw), &view); err != nil {
		t.Fatal(err)
	}
	wantTokens := tokensView{Input: 120, Output: 40, Total: 160, CacheRead: 100, CacheWrite: 15, Reasoning: 25}
	if view.Provider != "claude" || view.ProviderType != "anthropic_native" || view.Model != "claude-haiku-4-5" || view.Tokens != wantTokens {
		t.Errorf("trace = %s", tr.raw)
	}
	if len(view.Spans) != 2 || view.Spans[0].Attempt != 1 || view.Spans[0].ProviderType != "openai_compat" || view.Spans[0].Error == "" ||
		view.Spans[1].Attempt != 2 || view.Spans[1].Tokens != wantTokens {
		t.Errorf("trace spans = %s", tr.raw)
	}
	if !strings.Contains(tr.raw, `"tokens":{"input":0,"output":0,"total":0}`) {
		t.Errorf("a span without tokens = %s, want only input, output and total", tr.raw)
	}
	u := e.must(200, "GET", "/v1/usage?group_by=provider", gwToken, "")
	pts := u.body["data"].([]any)
	if len(pts) != 1 {
		t.Fatalf("usage = %s, want one point", u.raw)
	}
	p := pts[0].(map[string]any)
	for k, want := range map[string]any{"group": "claude", "input_tokens": 120.0, "output_tokens": 40.0, "cache_read_tokens": 100.0,
		"cache_write_tokens": 15.0, "reasoning_tokens": 25.0, "llm_calls": 2.0, "runs": 1.0} {
		if p[k] != want {
			t.Errorf("usage %s = %v, want %v", k, p[k], want)
		}
	}
	if u := e.must(200, "GET", "/v1/usage?model=claude-haiku-4-5", gwToken, ""); len(u.body["data"].([]any)) != 1 {
		t.Errorf("usage of the model that answered = %s, want its run", u.raw)
	}
	if u := e.must(200, "GET", "/v1/usage?provider=main", gwToken, ""); len(u.body["data"].([]any)) != 0 {
		t.Errorf("usage of the primary that failed = %s, want none", u.raw)
	}
	s := e.must(200, "GET", "/v1/usage/summary?period=24h", gwToken, "")
	cur := s.body["current"].(map[string]any)
	if got := fmt.Sprint(cur["cache_read_tokens"], cur["cache_write_tokens"], cur["reasoning_tokens"]); got != "100 15 25" {
		t.Errorf("summary current = %v, want cache_read 100, cache_write 15, reasoning 25", cur)
	}
}
