package gateway

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"
)

// mountEnv is the gateway mounted below /api/gateway on a second
// listener whose authority reads the caller from X-Test-User (and
// X-Test-Admin), as the console's reads the session: a stand-in for
// httpapi's bridge. ended makes every recheck fail.
type mountEnv struct {
	*gwEnv
	mounted string
	ended   atomic.Bool
}

func newMountEnv(t *testing.T) *mountEnv {
	t.Helper()
	m := &mountEnv{gwEnv: newGWEnv(t, gwOpts{token: gwToken})}
	auth := func(_ context.Context, rc *fasthttp.RequestCtx) (Caller, func(context.Context) error, bool) {
		user := string(rc.Request.Header.Peek("X-Test-User"))
		if user == "" {
			rc.Error(`{"error":"UNAUTHORIZED","message":"login required"}`, fasthttp.StatusUnauthorized)
			return Caller{}, nil, false
		}
		recheck := func(context.Context) error {
			if m.ended.Load() {
				return errTokenInvalid
			}
			return nil
		}
		return ConsoleCaller(user, len(rc.Request.Header.Peek("X-Test-Admin")) > 0), recheck, true
	}
	srv := &fasthttp.Server{Handler: m.srv.Mount("/api/gateway", auth)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	m.mounted = "http://" + ln.Addr().String()
	return m
}

// as sends a request to the mounted gateway as user (admin when set),
// with the headers extra (name, value pairs).
func (m *mountEnv) as(user string, admin bool, method, path, body string, extra ...string) gwResp {
	m.tb.Helper()
	base := m.url
	m.url = m.mounted
	defer func() { m.url = base }()
	var hdr []string
	if user != "" {
		hdr = append(hdr, "X-Test-User", user)
	}
	if admin {
		hdr = append(hdr, "X-Test-Admin", "1")
	}
	return m.do(method, "/api/gateway"+path, "", body, append(hdr, extra...)...)
}

// TestMount: the mounted routes are the table's, with its checks, for
// the caller the authority establishes: a console user's gateway user is
// their id, a console admin is a trusted backend for their own user, and
// their changes are audited as the console's.
func TestMount(t *testing.T) {
	m := newMountEnv(t)
	m.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo","settings":{"delay_ms":0}}`)
	tests := []struct {
		name               string
		user               string
		admin              bool
		method, path, body string
		want               int
		has                string
		hdr                []string
	}{
		{"the authority answers a stranger", "", false, "GET", "/v1/agents", "", 401, "login required", nil},
		{"a user creates an agent", "u-alice", false, "POST", "/v1/agents", `{"agent_key":"a1","provider":"echo","model":"m"}`, 201, `"owner_id":"u-alice"`, nil},
		{"and runs it", "u-alice", false, "POST", "/v1/agents/a1/wake", `{"message":"hi"}`, 200, `"content":"echo: hi"`, nil},
		{"streams over SSE", "u-alice", false, "POST", "/v1/chat/completions", `{"model":"gateway:a1","stream":true,"messages":[{"role":"user","content":"x"}]}`, 200, "data: [DONE]", nil},
		{"another user does not see it", "u-bob", false, "GET", "/v1/agents/a1", "", 404, "NOT_FOUND", nil},
		{"nor its traces", "u-bob", false, "GET", "/v1/traces?user_id=u-alice", "", 403, "UNAUTHORIZED", nil},
		{"a user is no admin", "u-alice", false, "POST", "/v1/providers", `{"name":"p2","provider_type":"echo"}`, 403, "operator.admin", nil},
		{"an admin is", "u-root", true, "POST", "/v1/providers", `{"name":"p2","provider_type":"echo"}`, 201, `"name":"p2"`, nil},
		{"an admin sees every user's traces", "u-root", true, "GET", "/v1/traces?user_id=u-alice", "", 200, `"user_id":"u-alice"`, nil},
		{"the changes are the console user's", "u-root", true, "GET", "/v1/activity?actor_type=console&action=agent.create", "", 200, `"actor_id":"u-alice"`, nil},
		{"no route outside /v1", "u-root", true, "GET", "/docs", "", 404, "NOT_FOUND", nil},
		{"no public route", "u-root", true, "GET", "/health", "", 404, "NOT_FOUND", nil},
		{"file paths are checked", "u-alice", false, "GET", "/v1/files/a1/%2e%2e/x", "", 400, "INVALID_REQUEST", nil},
		{"X-Gateway-Agent-Id picks the agent", "u-alice", false, "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"y"}]}`, 200, `"model":"gateway:a1"`,
			[]string{"X-Gateway-Agent-Id", "a1"}},
		{"X-Gateway-User-Id names no other user", "u-bob", false, "GET", "/v1/agents", "", 200, `"data":[]`, []string{"X-Gateway-User-Id", "u-alice"}},
		{"nor for an admin", "u-root", true, "GET", "/v1/agents", "", 200, `"data":[]`, []string{"X-Gateway-User-Id", "u-alice"}},
		{"a bad X-Gateway-Tenant-Id is refused", "u-alice", false, "GET", "/v1/agents", "", 400, "X-Gateway-Tenant-Id", []string{"X-Gateway-Tenant-Id", "a b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := m.as(tt.user, tt.admin, tt.method, tt.path, tt.body, tt.hdr...)
			if r.status != tt.want || !strings.Contains(r.raw, tt.has) {
				t.Fatalf("%s %s = %d %s; want %d with %q", tt.method, tt.path, r.status, r.raw, tt.want, tt.has)
			}
		})
	}
	// The gateway's own listener sees the same agents for X-Gateway-User-Id.
	r := m.must(200, "GET", "/v1/agents", gwToken, "", "X-Gateway-User-Id", "u-alice")
	if !strings.Contains(r.raw, `"agent_key":"a1"`) {
		t.Errorf("GET /v1/agents for u-alice on the gateway = %s", r.raw)
	}
}

// TestMountWS: the mounted WebSocket RPC needs no connect (the authority
// established the caller at the upgrade), runs session turns for that
// user, and ends (1008) once the authority's recheck fails.
func TestMountWS(t *testing.T) {
	m := newMountEnv(t)
	m.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo","settings":{"delay_ms":0}}`)
	m.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"a1","provider":"echo","model":"m"}`, "X-Gateway-User-Id", "u-alice")
	url := "ws" + strings.TrimPrefix(m.mounted, "http") + "/api/gateway/ws"
	if _, resp, err := websocket.DefaultDialer.Dial(url, nil); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("dial without a caller: %v %v", resp, err)
	}
	c, resp, err := websocket.DefaultDialer.Dial(url, http.Header{"X-Test-User": {"u-alice"}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	_ = resp.Body.Close()
	t.Cleanup(func() { _ = c.Close() })
	w := &wsClient{tb: t, c: c}
	if hello := string(w.mustOK("status", nil)); !strings.Contains(hello, `"user_id":"u-alice"`) || !strings.Contains(hello, `"role":"user"`) {
		t.Errorf("status = %s", hello)
	}
	f, events := w.call("chat.send", map[string]any{"agentId": "a1", "sessionKey": "s1", "message": "one two", "stream": true})
	if !f.OK || !strings.Contains(string(f.Payload), `"content":"echo: one two"`) || len(events) < 3 {
		t.Fatalf("chat.send = %+v with %d events", f, len(events))
	}
	if hist := string(w.mustOK("chat.history", map[string]any{"sessionKey": "s1"})); strings.Count(hist, `"role"`) != 2 {
		t.Errorf("chat.history = %s", hist)
	}
	if f, _ := w.call("connect", map[string]any{"token": "x"}); f.OK {
		t.Errorf("connect on a mounted socket = %+v, want an error", f)
	}
	m.ended.Store(true)
	if f, _ := w.call("status", nil); f.OK || f.Error == nil || f.Error.Code != codeUnauthorized {
		t.Fatalf("status after the authentication ended = %+v", f)
	}
	if code := w.closeCode(); code != websocket.ClosePolicyViolation {
		t.Errorf("close code = %d, want %d", code, websocket.ClosePolicyViolation)
	}
}
