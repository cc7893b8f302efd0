package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun"
	"gatehouse/actors/gateway/agentrun/llm"
)

// providerCallsFake is a ProviderCalls answering from its fields and
// recording the providers it was asked about.
type providerCallsFake struct {
	mu        sync.Mutex
	asked     []gateway.Provider
	models    []llm.Model
	modelsErr error
	took      time.Duration
	verifyErr error
	health    agentrun.ProviderHealth
}

func (f *providerCallsFake) ask(p gateway.Provider) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, p)
}

// last is the provider asked about last ("" name when none).
func (f *providerCallsFake) last() gateway.Provider {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.asked) == 0 {
		return gateway.Provider{}
	}
	return f.asked[len(f.asked)-1]
}

func (f *providerCallsFake) ProviderModels(_ context.Context, p gateway.Provider) ([]llm.Model, error) {
	f.ask(p)
	return f.models, f.modelsErr
}

func (f *providerCallsFake) VerifyProvider(_ context.Context, p gateway.Provider) (time.Duration, error) {
	f.ask(p)
	return f.took, f.verifyErr
}

func (f *providerCallsFake) ProviderHealth(p gateway.Provider) agentrun.ProviderHealth {
	f.ask(p)
	return f.health
}

// fakeCalls installs f as the server's ProviderCalls.
func fakeCalls(f *providerCallsFake) func(*Deps) {
	return func(d *Deps) { d.ProviderCalls = f }
}

// TestProviderModelsVerifyHealth: the admin's provider routes over HTTP
// and the WebSocket, with the runtime faked: the models list, an upstream
// failure as a 502 envelope, verification (also of a disabled provider)
// as {ok, latency_ms, error?}, and the key states in the detail.
func TestProviderModelsVerifyHealth(t *testing.T) {
	retry := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	f := &providerCallsFake{
		models: []llm.Model{{ID: "claude-sonnet-4-5", DisplayName: "Claude Sonnet 4.5"}, {ID: "claude-haiku-4-5"}},
		took:   42 * time.Millisecond,
		health: agentrun.ProviderHealth{Keys: []agentrun.KeyHealth{
			{Key: "****0001", State: agentrun.KeyReady},
			{Key: "****0002", State: agentrun.KeyCoolingDown, RetryAt: &retry, LastError: "status 429: rate_limit_error: slow down"},
		}, LastError: "status 429: rate_limit_error: slow down", LastErrorAt: &retry},
	}
	e := newGWEnv(t, gwOpts{token: gwToken, deps: fakeCalls(f)})
	created := e.must(201, "POST", "/v1/providers", gwToken, `{"name":"claude","provider_type":"anthropic","api_keys":["sk-a-0000000001","sk-b-0000000002"],"enabled":false}`)
	reader := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"r","scopes":["operator.read"],"user_id":"u1"}`).body["key"].(string)

	// The models list, by name and by id.
	for _, ref := range []string{"claude", created.body["id"].(string)} {
		r := e.must(200, "GET", "/v1/providers/"+ref+"/models", gwToken, "")
		if want := `{"data":[{"id":"claude-sonnet-4-5","display_name":"Claude Sonnet 4.5"},{"id":"claude-haiku-4-5"}]}`; strings.TrimSpace(r.raw) != want {
			t.Errorf("models = %s, want %s", r.raw, want)
		}
		if p := f.last(); p.Name != "claude" || p.ProviderType != "anthropic" || len(p.APIKeysSealed) != 2 {
			t.Errorf("runtime asked about %+v, want claude with its 2 sealed keys", p)
		}
	}
	f.models = nil
	if r := e.must(200, "GET", "/v1/providers/claude/models", gwToken, ""); strings.TrimSpace(r.raw) != `{"data":[]}` {
		t.Errorf("no models = %s, want {\"data\":[]}", r.raw)
	}
	f.modelsErr = &agentrun.ProviderError{Detail: "claude: status 401: authentication_error: invalid x-api-key"}
	r := e.do("GET", "/v1/providers/claude/models", gwToken, "")
	if r.status != 502 || r.errCode() != codeUnavailable || !strings.Contains(r.errMsg(), "invalid x-api-key") {
		t.Errorf("models of a failing upstream = %d %s, want 502 UNAVAILABLE with the provider's error", r.status, r.raw)
	}
	f.modelsErr = nil

	// Verification: ok, then failed (still 200), of a disabled provider.
	r = e.must(200, "POST", "/v1/providers/claude/verify", gwToken, "")
	if strings.TrimSpace(r.raw) != `{"ok":true,"latency_ms":42}` {
		t.Errorf("verify = %s, want ok in 42 ms", r.raw)
	}
	if f.last().Enabled {
		t.Errorf("verified provider is enabled, want the disabled one verified as it is")
	}
	f.verifyErr, f.took = &agentrun.ProviderError{Detail: "claude: status 403: permission_error: no access"}, 7*time.Millisecond
	r = e.must(200, "POST", "/v1/providers/claude/verify", gwToken, "")
	if strings.TrimSpace(r.raw) != `{"ok":false,"latency_ms":7,"error":"claude: status 403: permission_error: no access"}` {
		t.Errorf("failed verify = %s", r.raw)
	}
	f.verifyErr = context.DeadlineExceeded // not the request's deadline: a server error
	if r := e.do("POST", "/v1/providers/claude/verify", gwToken, ""); r.status == 200 {
		t.Errorf("verify with an unexpected error = %d %s, want an error status", r.status, r.raw)
	}
	f.verifyErr = nil

	// The detail: key states and the last error for admins only.
	var detail struct {
		APIKeys     []string             `json:"api_keys"`
		KeyStates   []agentrun.KeyHealth `json:"key_states"`
		LastError   string               `json:"last_error"`
		LastErrorAt *time.Time           `json:"last_error_at"`
	}
	r = e.must(200, "GET", "/v1/providers/claude", gwToken, "")
	if err := json.Unmarshal([]byte(r.raw), &detail); err != nil {
		t.Fatal(err)
	}
	if len(detail.KeyStates) != 2 || detail.KeyStates[1].State != agentrun.KeyCoolingDown || !detail.KeyStates[1].RetryAt.Equal(retry) ||
		detail.LastError != f.health.LastError || detail.LastErrorAt == nil || fmt.Sprint(detail.APIKeys) != "[****0001 ****0002]" {
		t.Errorf("admin detail = %s", r.raw)
	}
	f.health = agentrun.ProviderHealth{}
	if r := e.must(200, "GET", "/v1/providers/claude", gwToken, ""); !strings.Contains(r.raw, `"key_states":[]`) || strings.Contains(r.raw, "last_error") {
		t.Errorf("admin detail without calls = %s, want key_states [] and no last_error", r.raw)
	}
	if r := e.must(200, "GET", "/v1/providers/claude", reader, ""); strings.Contains(r.raw, "key_states") || strings.Contains(r.raw, "last_error") {
		t.Errorf("reader detail = %s, want no key states", r.raw)
	}

	// Scopes and unknown providers.
	for _, tt := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/v1/providers/claude/models", reader, 403},
		{"POST", "/v1/providers/claude/verify", reader, 403},
		{"GET", "/v1/providers/nope/models", gwToken, 404},
		{"POST", "/v1/providers/nope/verify", gwToken, 404},
		{"GET", "/v1/providers/claude/verify", gwToken, 405},
	} {
		if r := e.do(tt.method, tt.path, tt.token, ""); r.status != tt.want {
			t.Errorf("%s %s = %d %s, want %d", tt.method, tt.path, r.status, r.raw, tt.want)
		}
	}

	// The same over the WebSocket.
	ws := dialWS(t, e)
	ws.mustOK("connect", map[string]any{"token": gwToken})
	f.models = []llm.Model{{ID: "m1"}}
	if got := string(ws.mustOK("providers.models", map[string]any{"id": "claude"})); got != `{"data":[{"id":"m1"}]}` {
		t.Errorf("providers.models = %s", got)
	}
	if got := string(ws.mustOK("providers.verify", map[string]any{"id": "claude"})); got != `{"ok":true,"latency_ms":7}` {
		t.Errorf("providers.verify = %s", got)
	}

	// Both routes are documented.
	spec := e.must(200, "GET", "/docs/openapi.json", gwToken, "")
	paths, _ := spec.body["paths"].(map[string]any)
	for _, p := range []string{"/v1/providers/{id}/models", "/v1/providers/{id}/verify"} {
		if _, ok := paths[p]; !ok {
			t.Errorf("OpenAPI document lacks %s", p)
		}
	}
}
