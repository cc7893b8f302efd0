package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gatehouse/actors/clock"
)

func TestGatewayAuth(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	tests := []struct {
		name, method, path, auth string
		want                     int
		code                     string
	}{
		{"health is public", "GET", "/health", "", 200, ""},
		{"missing token", "GET", "/v1/providers", "", 401, codeUnauthorized},
		{"wrong token", "GET", "/v1/providers", "Bearer nope", 401, codeUnauthorized},
		{"malformed api key", "GET", "/v1/providers", "Bearer gateway_zz", 401, codeUnauthorized},
		{"unknown api key", "GET", "/v1/providers", "Bearer gateway_0123456789abcdef0123456789abcdef", 401, codeUnauthorized},
		{"basic scheme", "GET", "/v1/providers", "Basic " + gwToken, 401, codeUnauthorized},
		{"gateway token", "GET", "/v1/providers", "Bearer " + gwToken, 200, ""},
		{"metrics need auth", "GET", "/metrics", "", 401, codeUnauthorized},
		{"metrics", "GET", "/metrics", "Bearer " + gwToken, 200, ""},
		{"unknown route", "GET", "/v1/nope", "Bearer " + gwToken, 404, codeNotFound},
		{"query token refused on api routes", "GET", "/v1/providers?token=" + gwToken, "", 401, codeUnauthorized},
	}
	defer func() {
		m := e.must(200, "GET", "/metrics", gwToken, "")
		if !strings.Contains(m.raw, `gatehouse_http_requests_total{listener="gateway",method="GET",route="/v1/providers",status="401"}`) {
			t.Errorf("metrics lack the gateway route series")
		}
	}()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hdr []string
			if tt.auth != "" {
				hdr = []string{"Authorization", tt.auth}
			}
			r := e.do(tt.method, tt.path, "", "", hdr...)
			if r.status != tt.want || r.errCode() != tt.code {
				t.Errorf("%s %s = %d %q, want %d %q (%s)", tt.method, tt.path, r.status, r.errCode(), tt.want, tt.code, r.raw)
			}
		})
	}
}

func TestGatewayAPIKeysAndScopes(t *testing.T) {
	clk := clock.NewFake(time.Now())
	e := newGWEnv(t, gwOpts{token: gwToken, clk: clk})
	keys := map[string]string{}
	for _, sc := range []string{"operator.read", "operator.write", "operator.admin"} {
		r := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"`+sc+`","scopes":["`+sc+`"],"user_id":"u1"}`)
		raw, _ := r.body["key"].(string)
		if !regexp.MustCompile(`^gateway_[0-9a-f]{32}$`).MatchString(raw) {
			t.Fatalf("created key = %q, want gateway_ + 32 lowercase hex", raw)
		}
		keys[sc] = raw
	}
	list := e.must(200, "GET", "/v1/api-keys", gwToken, "")
	for _, raw := range keys {
		if strings.Contains(list.raw, raw) || strings.Contains(list.raw, raw[8:]) {
			t.Errorf("list shows a raw key: %s", list.raw)
		}
	}
	if n := len(list.body["data"].([]any)); n != 3 {
		t.Errorf("list has %d keys, want 3", n)
	}
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo"}`)
	user := []string{"X-Gateway-User-Id", "u1"}
	tests := []struct {
		scope, method, path, body string
		want                      int
	}{
		{"operator.read", "GET", "/v1/providers", "", 200},
		{"operator.read", "GET", "/v1/agents", "", 200},
		{"operator.read", "POST", "/v1/agents", `{"agent_key":"r","provider":"echo","model":"m"}`, 403},
		{"operator.read", "POST", "/v1/providers", `{"name":"x","provider_type":"echo"}`, 403},
		{"operator.read", "GET", "/v1/api-keys", "", 403},
		{"operator.read", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, 403},
		{"operator.write", "POST", "/v1/agents", `{"agent_key":"w","provider":"echo","model":"m"}`, 201},
		{"operator.write", "POST", "/v1/providers", `{"name":"x","provider_type":"echo"}`, 403},
		{"operator.write", "DELETE", "/v1/providers/echo", "", 403},
		{"operator.write", "POST", "/v1/api-keys", `{"name":"n","scopes":["operator.read"],"user_id":"u1"}`, 403},
		{"operator.admin", "POST", "/v1/providers", `{"name":"y","provider_type":"echo"}`, 201},
		{"operator.admin", "GET", "/v1/api-keys", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.scope+" "+tt.method+" "+tt.path, func(t *testing.T) {
			r := e.do(tt.method, tt.path, keys[tt.scope], tt.body, user...)
			if r.status != tt.want {
				t.Fatalf("= %d %s, want %d", r.status, r.raw, tt.want)
			}
			if tt.want == 403 && r.errCode() != codeUnauthorized {
				t.Errorf("code = %q, want UNAUTHORIZED", r.errCode())
			}
		})
	}
	// Revocation takes effect on the next request.
	var readID string
	for _, k := range list.body["data"].([]any) {
		if m := k.(map[string]any); m["name"] == "operator.read" {
			readID = m["id"].(string)
		}
	}
	e.must(204, "DELETE", "/v1/api-keys/"+readID, gwToken, "")
	if r := e.do("GET", "/v1/providers", keys["operator.read"], ""); r.status != 401 || r.errCode() != codeUnauthorized {
		t.Errorf("revoked key = %d %s, want 401 UNAUTHORIZED", r.status, r.raw)
	}
	e.must(404, "DELETE", "/v1/api-keys/00000000-0000-0000-0000-000000000000", gwToken, "")
	// Expiry too.
	r := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"short","scopes":["operator.read"],"user_id":"u1","expires_in":60}`)
	short := r.body["key"].(string)
	e.must(200, "GET", "/v1/providers", short, "")
	clk.Advance(61 * time.Second)
	if r := e.do("GET", "/v1/providers", short, ""); r.status != 401 {
		t.Errorf("expired key = %d, want 401", r.status)
	}
	for _, body := range []string{`{"name":"x","scopes":["operator.root"]}`, `{"name":"","scopes":["operator.read"],"user_id":"u1"}`, `{"name":"x","scopes":[]}`,
		`{"name":"x","scopes":["operator.read"],"user_id":"u1","expires_in":-1}`, `{"name":"x","scopes":["operator.read"]}`, `{"name":"x","scopes":["operator.write"],"user_id":""}`} {
		if r := e.do("POST", "/v1/api-keys", gwToken, body); r.status != 400 || r.errCode() != codeInvalid {
			t.Errorf("POST /v1/api-keys %s = %d %s, want 400 INVALID_REQUEST", body, r.status, r.raw)
		}
	}
}

func TestGatewayErrorEnvelopeAndLanguages(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	tests := []struct {
		lang, want string
	}{
		{"", "missing bearer token"},
		{"vi", "thiếu mã xác thực"},
		{"vi-VN,vi;q=0.9", "thiếu mã xác thực"},
		{"zh-CN", "缺少令牌"},
		{"fr-FR, zh;q=0.5, vi;q=0.4", "缺少令牌"},
		{"en;q=0.2, vi;q=0.9", "thiếu mã xác thực"},
		{"de, fr", "missing bearer token"},
		{"vi;q=0", "missing bearer token"},
	}
	for _, tt := range tests {
		t.Run(tt.lang, func(t *testing.T) {
			r := e.do("GET", "/v1/providers", "", "", "Accept-Language", tt.lang)
			if !strings.HasPrefix(r.errMsg(), tt.want) {
				t.Errorf("message = %q, want prefix %q", r.errMsg(), tt.want)
			}
			env := r.body["error"].(map[string]any)
			for _, f := range []string{"code", "message", "retryable", "retryAfterMs", "type"} {
				if _, ok := env[f]; !ok {
					t.Errorf("envelope lacks %s: %s", f, r.raw)
				}
			}
			if env["retryable"] != false || env["retryAfterMs"] != float64(0) || env["type"] != "authentication_error" {
				t.Errorf("envelope = %v", env)
			}
		})
	}
	// Every catalogue entry has all three languages.
	for id, row := range catalogue {
		for i, s := range row {
			if s == "" {
				t.Errorf("catalogue[%s][%s] is empty", id, langTags[i])
			}
		}
	}
}

func TestGatewayHeadersAndBody(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		hdr    []string
		want   int
		code   string
	}{
		{"tenant uuid", "GET", "/v1/providers", "", []string{"X-Gateway-Tenant-Id", "6f1c2a8e-6a43-4c1e-9a55-0d2c6d1e9b11"}, 200, ""},
		{"tenant slug", "GET", "/v1/providers", "", []string{"X-Gateway-Tenant-Id", "acme-corp"}, 200, ""},
		{"tenant bad", "GET", "/v1/providers", "", []string{"X-Gateway-Tenant-Id", "no spaces!"}, 400, codeInvalid},
		{"agents need user", "POST", "/v1/agents", `{"agent_key":"x","provider":"echo","model":"m"}`, nil, 400, codeInvalid},
		{"bad json", "POST", "/v1/providers", "{", nil, 400, codeInvalid},
		{"wrong type", "POST", "/v1/providers", `{"name":5}`, nil, 400, codeInvalid},
		{"method not allowed", "PATCH", "/v1/providers", "", nil, 405, codeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.method, tt.path, gwToken, tt.body, tt.hdr...)
			if r.status != tt.want || r.errCode() != tt.code {
				t.Errorf("= %d %q, want %d %q (%.200s)", r.status, r.errCode(), tt.want, tt.code, r.raw)
			}
		})
	}
}

// TestGatewayOversizeBody sends a body over the limit: the gateway
// answers 413 from its Content-Length without reading it, and the client,
// still writing, reads that answer (the listener closes gracefully).
func TestGatewayOversizeBody(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/providers HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nAccept-Language: vi\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", gwToken, 2<<20)
	go func() { _, _ = conn.Write(bytes.Repeat([]byte(" "), 2<<20)) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 413 || !strings.Contains(string(b), `"code":"INVALID_REQUEST"`) || !strings.Contains(string(b), "quá lớn") {
		t.Errorf("= %d %s, want 413 INVALID_REQUEST in Vietnamese", resp.StatusCode, b)
	}
}

func TestGatewayRateLimit(t *testing.T) {
	clk := clock.NewFake(time.Now())
	e := newGWEnv(t, gwOpts{token: gwToken, rpm: 60, clk: clk})
	hit := func(hdr ...string) gwResp { return e.do("GET", "/v1/providers", gwToken, "", hdr...) }
	for i := range 5 {
		if r := hit("X-Gateway-User-Id", "u1"); r.status != 200 {
			t.Fatalf("request %d = %d, want 200 (burst 5)", i+1, r.status)
		}
	}
	r := hit("X-Gateway-User-Id", "u1")
	if r.status != fasthttp.StatusTooManyRequests || r.header.Get("Retry-After") != "60" || r.errCode() != codeExhausted {
		t.Fatalf("6th request = %d Retry-After %q %s, want 429 60 RESOURCE_EXHAUSTED", r.status, r.header.Get("Retry-After"), r.raw)
	}
	env := r.body["error"].(map[string]any)
	if env["retryable"] != true || env["retryAfterMs"] != float64(60000) {
		t.Errorf("envelope = %v, want retryable true, retryAfterMs 60000", env)
	}
	// Another user has its own bucket; without a user the client IP is
	// the subject.
	if r := hit("X-Gateway-User-Id", "u2"); r.status != 200 {
		t.Errorf("other user = %d, want 200", r.status)
	}
	for range 5 {
		hit()
	}
	if r := hit(); r.status != 429 {
		t.Errorf("6th request from one IP = %d, want 429", r.status)
	}
	clk.Advance(time.Second) // rpm/60 = one token per second
	if r := hit("X-Gateway-User-Id", "u1"); r.status != 200 {
		t.Errorf("after refill = %d, want 200", r.status)
	}
}

func TestGatewayOpenMode(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: ""})
	e.must(200, "GET", "/v1/providers", "", "")
	e.must(201, "POST", "/v1/providers", "", `{"name":"echo","provider_type":"echo"}`)
	if r := e.do("GET", "/v1/providers", "nope", ""); r.status != 401 {
		t.Errorf("bad token in open mode = %d, want 401", r.status)
	}
	// A script's empty $T: "Authorization: Bearer " is no token in open mode.
	if r := e.do("GET", "/v1/providers", "", "", "Authorization", "Bearer "); r.status != 200 {
		t.Errorf("empty bearer in open mode = %d %s, want 200", r.status, r.raw)
	}
}

func TestGatewayProviders(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	const secret = "sk-test-abcdefgh12345678"
	r := e.must(201, "POST", "/v1/providers", gwToken, `{"name":"oa","display_name":"OpenAI","provider_type":"openai_compat","api_base":"http://127.0.0.1:9/v1","api_key":"`+secret+`","settings":{"x":1}}`)
	id := r.body["id"].(string)
	if r.body["api_key"] != "****5678" || r.body["enabled"] != true {
		t.Errorf("created = %s", r.raw)
	}
	for _, path := range []string{"/v1/providers", "/v1/providers/" + id, "/v1/providers/oa"} {
		if r := e.must(200, "GET", path, gwToken, ""); strings.Contains(r.raw, secret) || !strings.Contains(r.raw, "****5678") {
			t.Errorf("GET %s shows the key unmasked or not at all: %s", path, r.raw)
		}
	}
	r = e.must(200, "PUT", "/v1/providers/"+id, gwToken, `{"display_name":"Renamed","enabled":false}`)
	if r.body["display_name"] != "Renamed" || r.body["enabled"] != false || r.body["api_key"] != "****5678" || r.body["api_base"] != "http://127.0.0.1:9/v1" {
		t.Errorf("updated = %s", r.raw)
	}
	tests := []struct {
		name, method, path, body string
		want                     int
		code                     string
	}{
		{"duplicate name", "POST", "/v1/providers", `{"name":"oa","provider_type":"echo"}`, 409, codeExists},
		{"bad type", "POST", "/v1/providers", `{"name":"z","provider_type":"magic"}`, 400, codeInvalid},
		{"openai needs api_base", "POST", "/v1/providers", `{"name":"z","provider_type":"openai_compat"}`, 400, codeInvalid},
		{"settings not object", "POST", "/v1/providers", `{"name":"z","provider_type":"echo","settings":[1]}`, 400, codeInvalid},
		{"missing", "GET", "/v1/providers/nope", "", 404, codeNotFound},
		{"update missing", "PUT", "/v1/providers/nope", `{}`, 404, codeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.method, tt.path, gwToken, tt.body)
			if r.status != tt.want || r.errCode() != tt.code {
				t.Errorf("= %d %q, want %d %q (%s)", r.status, r.errCode(), tt.want, tt.code, r.raw)
			}
		})
	}
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"a1","provider":"oa","model":"m"}`, "X-Gateway-User-Id", "u")
	if r := e.do("DELETE", "/v1/providers/oa", gwToken, ""); r.status != 412 || r.errCode() != codePrecondition {
		t.Errorf("delete in use = %d %s, want 412 FAILED_PRECONDITION", r.status, r.raw)
	}
	e.must(204, "DELETE", "/v1/agents/a1", gwToken, "", "X-Gateway-User-Id", "u")
	e.must(204, "DELETE", "/v1/providers/oa", gwToken, "")
	e.must(404, "GET", "/v1/providers/oa", gwToken, "")
}

func TestGatewayAgents(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo"}`)
	alice, bob, carol := []string{"X-Gateway-User-Id", "alice"}, []string{"X-Gateway-User-Id", "bob"}, []string{"X-Gateway-User-Id", "carol"}
	r := e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"helper","display_name":"Helper","provider":"echo","model":"m","system_prompt":"hi","shared_with":["bob"]}`, alice...)
	id := r.body["id"].(string)
	if r.body["status"] != "active" || r.body["owner_id"] != "alice" {
		t.Errorf("created = %s", r.raw)
	}
	tests := []struct {
		name, method, path, body string
		hdr                      []string
		want                     int
		code                     string
	}{
		{"duplicate key", "POST", "/v1/agents", `{"agent_key":"helper","provider":"echo","model":"m"}`, bob, 409, codeExists},
		{"unknown provider", "POST", "/v1/agents", `{"agent_key":"x","provider":"nope","model":"m"}`, bob, 400, codeInvalid},
		{"missing model", "POST", "/v1/agents", `{"agent_key":"x","provider":"echo"}`, bob, 400, codeInvalid},
		{"bad status", "PUT", "/v1/agents/helper", `{"status":"sleepy"}`, alice, 400, codeInvalid},
		{"get by id", "GET", "/v1/agents/" + id, "", alice, 200, ""},
		{"get by key", "GET", "/v1/agents/helper", "", alice, 200, ""},
		{"shared user may get", "GET", "/v1/agents/helper", "", bob, 200, ""},
		{"stranger may not", "GET", "/v1/agents/helper", "", carol, 404, codeNotFound},
		{"shared user may not update", "PUT", "/v1/agents/helper", `{"model":"x"}`, bob, 403, codeUnauthorized},
		{"shared user may not delete", "DELETE", "/v1/agents/helper", "", bob, 403, codeUnauthorized},
		{"owner updates", "PUT", "/v1/agents/helper", `{"status":"disabled"}`, alice, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.method, tt.path, gwToken, tt.body, tt.hdr...)
			if r.status != tt.want || r.errCode() != tt.code {
				t.Errorf("= %d %q, want %d %q (%s)", r.status, r.errCode(), tt.want, tt.code, r.raw)
			}
		})
	}
	for _, c := range []struct {
		hdr  []string
		want int
	}{{alice, 1}, {bob, 1}, {carol, 0}} {
		if n := len(e.must(200, "GET", "/v1/agents", gwToken, "", c.hdr...).body["data"].([]any)); n != c.want {
			t.Errorf("%s lists %d agents, want %d", c.hdr[1], n, c.want)
		}
	}
	if r := e.must(200, "GET", "/v1/agents/helper", gwToken, "", alice...); r.body["status"] != "disabled" {
		t.Errorf("status = %v, want disabled", r.body["status"])
	}
	chat := `{"model":"agent:helper","messages":[{"role":"user","content":"x"}]}`
	if r := e.do("POST", "/v1/chat/completions", gwToken, chat); r.status != 412 || r.errCode() != codePrecondition {
		t.Errorf("chat with a disabled agent = %d %s, want 412 FAILED_PRECONDITION", r.status, r.raw)
	}
	e.must(200, "PUT", "/v1/agents/helper", gwToken, `{"status":"active"}`, alice...)
	e.must(200, "PUT", "/v1/providers/echo", gwToken, `{"enabled":false}`)
	if r := e.do("POST", "/v1/chat/completions", gwToken, chat); r.status != 412 || r.errCode() != codePrecondition {
		t.Errorf("chat with a disabled provider = %d %s, want 412 FAILED_PRECONDITION", r.status, r.raw)
	}
	e.must(204, "DELETE", "/v1/agents/helper", gwToken, "", alice...)
	e.must(404, "GET", "/v1/agents/helper", gwToken, "", alice...)
}
