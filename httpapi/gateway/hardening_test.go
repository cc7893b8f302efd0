package gateway

import (
	"net/http"
	"strings"
	"testing"
)

// TestGatewayBadInput (issue 14): invalid UTF-8 bodies are refused and
// change nothing; a provider's api_base may not carry credentials, a query
// or a fragment; a new API key's answer is not cacheable.
func TestGatewayBadInput(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.must(400, "POST", "/v1/providers", gwToken, "{\"name\":\"\xff\",\"provider_type\":\"echo\"}")
	if r := e.must(200, "GET", "/v1/providers", gwToken, ""); len(r.body["data"].([]any)) != 0 {
		t.Errorf("a refused body created a provider: %s", r.raw)
	}
	for _, base := range []string{"https://user:pw@api.example.com/v1", "https://api.example.com/v1?key=x", "https://api.example.com/v1#frag"} {
		r := e.do("POST", "/v1/providers", gwToken, `{"name":"p","provider_type":"openai_compat","api_base":"`+base+`"}`)
		if r.status != 400 || r.errCode() != codeInvalid {
			t.Errorf("api_base %s = %d %s, want 400", base, r.status, r.raw)
		}
	}
	r := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"k","scopes":["operator.admin"]}`)
	if got := r.header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("new API key answer: Cache-Control %q, want no-store", got)
	}
}

// TestOpenModeGuard (issue 14): with no gateway token, only this machine
// gets the admin: a foreign Host (DNS rebinding), a foreign Origin (a web
// page) and a body without its content type are refused.
func TestOpenModeGuard(t *testing.T) {
	e := newGWEnv(t, gwOpts{}) // open mode
	send := func(host, origin, ctype string) int {
		t.Helper()
		req, err := http.NewRequest("POST", e.url+"/v1/api-keys", strings.NewReader(`{"name":"k","scopes":["operator.admin"]}`))
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		req.Header.Set("Content-Type", ctype)
		resp, err := e.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	tests := []struct {
		name, host, origin, ctype string
		want                      int
	}{
		{"loopback, JSON", "", "", "application/json", 201},
		{"localhost with a port", "localhost:18790", "", "application/json; charset=utf-8", 201},
		{"a rebinding name", "evil.example:18790", "", "application/json", 403},
		{"a foreign page", "", "http://evil.example", "application/json", 403},
		{"a loopback page", "", "http://127.0.0.1:3000", "application/json", 201},
		{"text/plain from a form", "", "", "text/plain", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := send(tt.host, tt.origin, tt.ctype); got != tt.want {
				t.Errorf("= %d, want %d", got, tt.want)
			}
		})
	}
}
