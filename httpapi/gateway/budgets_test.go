package gateway

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/actors/clock"
	"gatehouse/actors/gateway"
)

// TestBudgetsCRUD: create, read, update, list and delete over HTTP, with
// the answers' shape and every validation refusal.
func TestBudgetsCRUD(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("helper", `{}`, "")
	r := e.must(201, "POST", "/v1/budgets", gwToken, `{"subject":{"type":"user","id":"alice"},"period":"day","max_usd":2.5,"max_tokens_per_minute":9000}`)
	id, _ := r.body["id"].(string)
	for _, k := range []string{"id", "subject", "period", "max_usd", "max_tokens", "max_tokens_per_minute", "spent_usd", "spent_tokens",
		"reserved_usd", "reserved_tokens", "resets_at", "created_at", "updated_at"} {
		if _, ok := r.body[k]; !ok {
			t.Errorf("create answer lacks %q: %s", k, r.raw)
		}
	}
	if r.body["max_usd"] != 2.5 || r.body["max_tokens"] != nil || r.body["spent_usd"] != 0.0 || r.body["resets_at"] == nil {
		t.Errorf("create answer = %s", r.raw)
	}
	r = e.must(200, "PUT", "/v1/budgets/"+id, gwToken, `{"period":"total","max_tokens":1000}`)
	if r.body["period"] != "total" || r.body["max_tokens"] != 1000.0 || r.body["max_usd"] != 2.5 || r.body["resets_at"] != nil {
		t.Errorf("update answer = %s", r.raw)
	}
	e.must(200, "GET", "/v1/budgets/"+id, gwToken, "")
	e.must(201, "POST", "/v1/budgets", gwToken, `{"subject":{"type":"agent","id":"helper"},"period":"month","max_tokens":50}`)
	if r := e.must(200, "GET", "/v1/budgets", gwToken, ""); len(r.body["data"].([]any)) != 2 {
		t.Errorf("list = %s", r.raw)
	}
	tests := []struct {
		body   string
		status int
		want   string
	}{
		{`{"period":"day","max_usd":1}`, 400, "subject"},
		{`{"subject":{"type":"team","id":"x"},"period":"day","max_usd":1}`, 400, "subject.type"},
		{`{"subject":{"type":"user","id":"bob"},"period":"week","max_usd":1}`, 400, "period"},
		{`{"subject":{"type":"user","id":"bob"},"period":"day"}`, 400, "max_usd"},
		{`{"subject":{"type":"user","id":"bob"},"period":"day","max_tokens":-3}`, 400, "max_tokens"},
		{`{"subject":{"type":"agent","id":"nobody"},"period":"day","max_usd":1}`, 404, ""},
		{`{"subject":{"type":"api_key","id":"6ed2183d-7733-446f-975a-55970e7470f0"},"period":"day","max_usd":1}`, 404, ""},
		{`{"subject":{"type":"user","id":"alice"},"period":"total","max_usd":1}`, 409, ""},
	}
	for _, tt := range tests {
		r := e.do("POST", "/v1/budgets", gwToken, tt.body)
		if r.status != tt.status || !strings.Contains(r.errMsg(), tt.want) {
			t.Errorf("POST %s = %d %s, want %d naming %q", tt.body, r.status, r.raw, tt.status, tt.want)
		}
	}
	e.must(204, "DELETE", "/v1/budgets/"+id, gwToken, "")
	e.must(404, "GET", "/v1/budgets/"+id, gwToken, "")
}

// TestBudgetsMine: a user's key reads the budgets that bind them (their
// own, their keys', their agents') and nothing else.
func TestBudgetsMine(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("helper", `{}`, "") // alice's
	r := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"a","scopes":["operator.write"],"user_id":"alice"}`)
	aliceKey, aliceKeyID := r.body["key"].(string), r.body["id"].(string)
	e.must(201, "POST", "/v1/budgets", gwToken, `{"subject":{"type":"user","id":"alice"},"period":"month","max_usd":10}`)
	e.must(201, "POST", "/v1/budgets", gwToken, `{"subject":{"type":"api_key","id":"`+aliceKeyID+`"},"period":"day","max_tokens":100000}`)
	e.must(201, "POST", "/v1/budgets", gwToken, `{"subject":{"type":"agent","id":"helper"},"period":"total","max_usd":50}`)
	e.must(201, "POST", "/v1/budgets", gwToken, `{"subject":{"type":"user","id":"bob"},"period":"day","max_usd":1}`)
	r = e.must(200, "GET", "/v1/budgets?mine=true", aliceKey, "")
	var got []string
	for _, b := range r.body["data"].([]any) {
		s := b.(map[string]any)["subject"].(map[string]any)
		got = append(got, s["type"].(string))
	}
	if strings.Join(got, ",") != "agent,api_key,user" {
		t.Errorf("alice's budgets = %v, want her agent's, key's and own: %s", got, r.raw)
	}
	if r := e.must(200, "GET", "/v1/budgets", aliceKey, ""); len(r.body["data"].([]any)) != 3 {
		t.Errorf("a user listing budgets = %s, want only her 3", r.raw)
	}
	if r := e.must(200, "GET", "/v1/budgets", gwToken, ""); len(r.body["data"].([]any)) != 4 {
		t.Errorf("an admin listing budgets = %s, want all 4", r.raw)
	}
	// The key's budget binds the runs made with the key.
	e.must(201, "POST", "/v1/budgets", gwToken, `{"subject":{"type":"api_key","id":"`+aliceKeyID+`"},"period":"total","max_tokens":10}`)
	r = e.do("POST", "/v1/chat/completions", aliceKey, `{"model":"gateway:helper","messages":[{"role":"user","content":"hi"}]}`)
	if r.status != http.StatusTooManyRequests || !strings.Contains(r.errMsg(), "api_key "+aliceKeyID) {
		t.Errorf("a run with a key over its budget = %d %s", r.status, r.raw)
	}
	for _, m := range []string{"POST", "PUT"} {
		if r := e.do(m, "/v1/budgets", aliceKey, `{}`); r.status != http.StatusForbidden && r.status != http.StatusMethodNotAllowed {
			t.Errorf("a user %s /v1/budgets = %d, want 403", m, r.status)
		}
	}
}

// TestBudgetRefusal429: a run whose call does not fit is 429
// RESOURCE_EXHAUSTED, not retryable, with Retry-After at the reset (none
// for a total budget), and the provider is not called; a run that fits
// carries X-Gateway-Budget-Remaining.
func TestBudgetRefusal429(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 28, 23, 0, 0, 0, time.UTC))
	e := newGWEnv(t, gwOpts{token: gwToken, clk: clk})
	e.seedAgent("helper", `{}`, "")
	as := []string{"X-Gateway-User-Id", "alice"}
	ask := `{"model":"gateway:helper","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
	r := e.must(201, "POST", "/v1/budgets", gwToken, `{"subject":{"type":"user","id":"alice"},"period":"day","max_tokens":100000}`)
	id := r.body["id"].(string)
	r = e.must(200, "POST", "/v1/chat/completions", gwToken, ask, as...)
	if h := r.header.Get(BudgetRemainingHeader); !strings.HasPrefix(h, "tokens=") {
		t.Errorf("%s = %q, want tokens=…", BudgetRemainingHeader, h)
	}
	spent := e.must(200, "GET", "/v1/budgets/"+id, gwToken, "")
	if spent.body["spent_tokens"].(float64) <= 0 || spent.body["reserved_tokens"] != 0.0 {
		t.Errorf("after one run: %s", spent.raw)
	}
	r = e.must(200, "POST", "/v1/chat/completions", gwToken, strings.Replace(ask, `"max_tokens":50`, `"max_tokens":50,"stream":true`, 1), as...)
	if h := r.header.Get(BudgetRemainingHeader); !strings.HasPrefix(h, "tokens=") {
		t.Errorf("stream: %s = %q, want tokens=… at its start", BudgetRemainingHeader, h)
	}
	e.must(200, "PUT", "/v1/budgets/"+id, gwToken, `{"max_tokens":60}`)
	r = e.do("POST", "/v1/chat/completions", gwToken, ask, as...)
	er, _ := r.body["error"].(map[string]any)
	if r.status != http.StatusTooManyRequests || r.errCode() != "RESOURCE_EXHAUSTED" || er["retryable"] != false ||
		!strings.Contains(r.errMsg(), "user alice") || !strings.Contains(r.errMsg(), "day") {
		t.Fatalf("over budget = %d %s", r.status, r.raw)
	}
	if got := r.header.Get("Retry-After"); got != strconv.Itoa(3600) {
		t.Errorf("Retry-After = %q, want 3600 (the UTC day's end)", got)
	}
	e.must(200, "PUT", "/v1/budgets/"+id, gwToken, `{"period":"total"}`)
	r = e.do("POST", "/v1/chat/completions", gwToken, ask, as...)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "" {
		t.Errorf("over a total budget = %d, Retry-After %q; want 429 without", r.status, r.header.Get("Retry-After"))
	}
	// A stream gets it as its error event.
	r = e.do("POST", "/v1/chat/completions", gwToken, strings.Replace(ask, `"max_tokens":50`, `"max_tokens":50,"stream":true`, 1), as...)
	if r.status != http.StatusOK || !strings.Contains(r.raw, `"code":"RESOURCE_EXHAUSTED"`) || !strings.Contains(r.raw, `"retryable":false`) {
		t.Errorf("streamed over budget = %d %s, want its error event", r.status, r.raw)
	}
	b, err := e.gw.GetBudget(ctxT(t), id)
	if err != nil || b.ReservedTokens != 0 {
		t.Errorf("after refusals: %+v, %v", b, err)
	}
}

// TestBudgetWSRemaining: the WS chat.send result carries budget_remaining
// when a budget binds the run.
func TestBudgetWSRemaining(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("default", `{"delay_ms":1}`, "")
	e.must(201, "POST", "/v1/budgets", gwToken, `{"subject":{"type":"user","id":"alice"},"period":"month","max_tokens":100000}`)
	w := dialWS(t, e)
	w.mustOK("connect", map[string]any{"token": gwToken, "user_id": "alice"})
	res, _ := w.call("chat.send", map[string]any{"agentId": "default", "sessionKey": "s1", "message": "one two"})
	if !res.OK || !strings.Contains(string(res.Payload), `"budget_remaining":"tokens=`) {
		t.Errorf("chat.send = %+v %s, want budget_remaining", res.Error, res.Payload)
	}
}

// TestFormatRemaining: the header's value, each part only when a budget
// caps it.
func TestFormatRemaining(t *testing.T) {
	for _, tt := range []struct {
		rem  gateway.BudgetRemaining
		want string
	}{
		{gateway.BudgetRemaining{Nano: 1_234_567_000, Tokens: 12000}, "usd=1.234567;tokens=12000"},
		{gateway.BudgetRemaining{Nano: 0, Tokens: -1}, "usd=0.000000"},
		{gateway.BudgetRemaining{Nano: -1, Tokens: 0}, "tokens=0"},
		{gateway.BudgetRemaining{Nano: -1, Tokens: -1}, ""},
		{gateway.BudgetRemaining{Nano: 1e18, Tokens: 1 << 62}, "usd=1000000000.000000;tokens=4611686018427387904"},
	} {
		if got := formatRemaining(tt.rem); got != tt.want {
			t.Errorf("formatRemaining(%+v) = %q, want %q", tt.rem, got, tt.want)
		}
	}
}
