package httpapi

import (
	"bufio"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// FuzzAPIRequests sends arbitrary ids, query strings, JSON bodies, key
// headers and cookies to every route of the management API, validate and
// the proxy, as fasthttp parses them, straight into the server's handler
// on a real system: nothing may panic or answer 500.
func FuzzAPIRequests(f *testing.F) {
	p := newTestEnv(f, withProxyUpstreams())
	routes := []struct {
		method, path string
		cookie       string // whose session: "admin", "alice", "" none
	}{
		{"POST", "/api/auth/login", ""},
		{"POST", "/api/auth/logout", "alice"},
		{"GET", "/api/auth/me", "alice"},
		{"POST", "/api/users", "admin"},
		{"GET", "/api/users", "admin"},
		{"PATCH", "/api/users/{id}", "admin"},
		{"POST", "/api/keys", "alice"},
		{"GET", "/api/keys", "admin"},
		{"GET", "/api/keys/{id}", "alice"},
		{"PATCH", "/api/keys/{id}", "admin"},
		{"POST", "/api/keys/{id}/rotate", "alice"},
		{"GET", "/api/keys/{id}/usage", "alice"},
		{"POST", "/api/keys/validate", ""},
		{"GET", "/api/proxy/echo/v1/{id}", ""},
		{"POST", "/api/proxy/echo/v1/{id}", ""},
		{"GET", "/metrics", "admin"},
		{"POST", "/api/tokens", "alice"},
		{"GET", "/api/tokens", "admin"},
		{"DELETE", "/api/tokens/{id}", "alice"},
		{"POST", "/api/services", "admin"},
		{"GET", "/api/services/{id}", "admin"},
		{"PUT", "/api/services/{id}", "admin"},
		{"DELETE", "/api/services/{id}", "admin"},
	}
	cookies := map[string]string{"admin": p.adminCk, "alice": p.aliceCk}
	seeds := []struct{ id, query, body, key string }{
		{p.keyID, "", `{"name":"k2","rate_limit":10}`, p.secret},
		{p.bob.ID.String(), "viewAs=" + p.bob.ID.String(), `{"plan":"premium","license_active":false,"role":"user"}`, ""},
		{p.keyID, "days=7&days=8", `{"expires_at":"2030-01-01T00:00:00Z"}`, "svc_live_" + strings.Repeat("A", 43)},
		{"x..;", "days=-1", `{"email":"n@example.com","password":"password123","role":"admin"}`, "Bearer x"},
		{"%252e%252e", "limit=\xff", "{\"name\":\"\xff\xfe\"}", p.secret},
		{p.keyID, "", `{"email":"admin@example.com","password":"wrong"}`, ""},
		{"", "", `[1,2]`, "\x00"},
		{"echo", "viewAs=x", `{"name":"t","scopes":["read","admin"],"expiresAt":"2030-01-01T00:00:00Z","userId":"` + p.bob.ID.String() + `"}`, ""},
		{"svc", "", `{"name":"svc","upstream":"http://127.0.0.1:1/x","headers":{"A":"b\r\n"},"timeoutMs":1e3,"maxConns":-1,"enabled":"yes","services":["echo"]}`, ""},
	}
	for i := range routes {
		for _, s := range seeds {
			f.Add(uint8(i), s.id, s.query, s.body, s.key)
		}
	}
	h := p.srv.Handler()
	f.Fuzz(func(t *testing.T, ri uint8, id, query, body, key string) {
		rt := routes[int(ri)%len(routes)]
		path := strings.ReplaceAll(rt.path, "{id}", id)
		raw := rt.method + " " + path
		if query != "" {
			raw += "?" + query
		}
		raw += " HTTP/1.1\r\nHost: " + testHost + "\r\nX-API-Key: " + key + "\r\n"
		if c := cookies[rt.cookie]; c != "" {
			raw += "Cookie: " + CookieName + "=" + c + "\r\n"
		}
		raw += "Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		var req fasthttp.Request
		if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
			return // fasthttp refuses it before any handler: 400 from the server
		}
		var rc fasthttp.RequestCtx
		rc.Init(&req, clientAddr, nil)
		h(&rc)
		_ = rc.Response.Body() // drains (and closes) a streamed answer
		if code := rc.Response.StatusCode(); code == 500 {
			t.Fatalf("%s %s?%q body %q key %q = 500 %s", rt.method, path, query, body, key, rc.Response.Body())
		}
	})
}
