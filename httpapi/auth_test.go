package httpapi

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/valyala/fasthttp"
)

func TestLogin(t *testing.T) {
	w := newTestEnv(t, withWorld())
	tests := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"ok", `{"email":"alice@example.com","password":"password123"}`, 200, ""},
		{"wrong password", `{"email":"alice@example.com","password":"nope-nope"}`, 401, codeInvalidCreds},
		{"unknown email", `{"email":"who@example.com","password":"password123"}`, 401, codeInvalidCreds},
		{"missing password", `{"email":"alice@example.com"}`, 400, codeValidation},
		{"email not a string", `{"email":1,"password":"password123"}`, 400, codeValidation},
		{"malformed", `{"email":`, 400, codeInvalidJSON},
		{"array", `[]`, 400, codeInvalidJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := w.do(t, request{method: "POST", path: "/api/auth/login", body: tt.body})
			mustStatus(t, r, tt.status, tt.code)
			if tt.status != 200 {
				if len(r.cookies) != 0 {
					t.Errorf("failed login set cookies %v", r.cookies)
				}
				return
			}
			want := map[string]any{"user": map[string]any{
				"id": w.alice.ID.String(), "email": "alice@example.com", "role": "user",
				"plan": "standard", "licenseActive": true,
			}}
			if diff := cmp.Diff(want, r.json); diff != "" {
				t.Errorf("login body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSessionCookie(t *testing.T) {
	tests := []struct {
		name   string
		secure bool
	}{{"plain", false}, {"secure", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTestEnv(t, withWorld(), withConfig(func(c *Config) { c.SecureCookies = tt.secure }))
			r := w.do(t, request{method: "POST", path: "/api/auth/login", body: `{"email":"bob@example.com","password":"password123"}`})
			mustStatus(t, r, 200, "")
			c := parseCookie(t, r)
			maxAge := int((7 * 24 * time.Hour).Seconds())
			switch {
			case string(c.Key()) != CookieName, len(c.Value()) == 0:
				t.Errorf("cookie %s", c)
			case !c.HTTPOnly(), c.SameSite() != fasthttp.CookieSameSiteLaxMode, string(c.Path()) != "/":
				t.Errorf("cookie attributes %s", c)
			case c.Secure() != tt.secure:
				t.Errorf("cookie Secure = %v, want %v", c.Secure(), tt.secure)
			case c.MaxAge() != maxAge:
				t.Errorf("cookie Max-Age = %d, want %d", c.MaxAge(), maxAge)
			}
			token := string(c.Value())

			me := w.do(t, request{method: "GET", path: "/api/auth/me", cookie: token})
			mustStatus(t, me, 200, "")
			if got := me.json["user"].(map[string]any)["email"]; got != "bob@example.com" {
				t.Errorf("me email = %v", got)
			}
			out := w.do(t, request{method: "POST", path: "/api/auth/logout", cookie: token})
			mustStatus(t, out, 200, "")
			if out.json["success"] != true {
				t.Errorf("logout body %s", out.body)
			}
			if cleared := parseCookie(t, out); len(cleared.Value()) != 0 || !strings.Contains(out.cookies[0], "max-age=0") {
				t.Errorf("logout cookie %q does not clear the session", out.cookies[0])
			}
			mustStatus(t, w.do(t, request{method: "GET", path: "/api/auth/me", cookie: token}), 401, codeUnauthorized)
		})
	}
}

func parseCookie(tb testing.TB, r response) *fasthttp.Cookie {
	tb.Helper()
	if len(r.cookies) != 1 {
		tb.Fatalf("Set-Cookie = %v, want one", r.cookies)
	}
	c := &fasthttp.Cookie{}
	if err := c.Parse(r.cookies[0]); err != nil {
		tb.Fatalf("parse cookie %q: %v", r.cookies[0], err)
	}
	return c
}

func TestMe(t *testing.T) {
	w := newTestEnv(t, withWorld())
	tests := []struct {
		name   string
		cookie string
		status int
		code   string
	}{
		{"no session", "", 401, codeUnauthorized},
		{"unknown session", "bogus", 401, codeUnauthorized},
		{"ok", w.aliceCk, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustStatus(t, w.do(t, request{method: "GET", path: "/api/auth/me", cookie: tt.cookie}), tt.status, tt.code)
		})
	}
	t.Run("expired session", func(t *testing.T) {
		w.sys.clk.Advance(8 * 24 * time.Hour)
		t.Cleanup(func() { w.sys.clk.Advance(-8 * 24 * time.Hour) })
		mustStatus(t, w.do(t, request{method: "GET", path: "/api/auth/me", cookie: w.aliceCk}), 401, codeUnauthorized)
	})
	t.Run("logout without session", func(t *testing.T) {
		mustStatus(t, w.do(t, request{method: "POST", path: "/api/auth/logout"}), 200, "")
	})
	t.Run("unavailable", func(t *testing.T) {
		w.sys.setUnavailable(true)
		t.Cleanup(func() { w.sys.setUnavailable(false) })
		mustStatus(t, w.do(t, request{method: "GET", path: "/api/auth/me", cookie: w.aliceCk}), 503, codeUnavailable)
	})
}

func TestCSRF(t *testing.T) {
	w := newTestEnv(t, withWorld())
	const create = `{"name":"k"}`
	tests := []struct {
		name    string
		method  string
		path    string
		body    string
		cookie  bool
		headers []string
		status  int
		code    string
	}{
		{"curl-like, no origin", "POST", "/api/keys", create, true, nil, 201, ""},
		{"same origin", "POST", "/api/keys", create, true, []string{"Origin", "http://api.test"}, 201, ""},
		{"same origin default port", "POST", "/api/keys", create, true, []string{"Origin", "http://api.test:80"}, 201, ""},
		{"cross origin", "POST", "/api/keys", create, true, []string{"Origin", "https://evil.example"}, 403, codeCSRF},
		{"cross origin other port", "POST", "/api/keys", create, true, []string{"Origin", "http://api.test:8081"}, 403, codeCSRF},
		{"null origin", "POST", "/api/keys", create, true, []string{"Origin", "null"}, 403, codeCSRF},
		{"same referer", "POST", "/api/keys", create, true, []string{"Referer", "http://api.test/app/keys"}, 201, ""},
		{"cross referer", "POST", "/api/keys", create, true, []string{"Referer", "https://evil.example/x"}, 403, codeCSRF},
		{"origin wins over referer", "POST", "/api/keys", create, true,
			[]string{"Origin", "https://evil.example", "Referer", "http://api.test/"}, 403, codeCSRF},
		{"form urlencoded", "POST", "/api/keys", create, true, []string{"Content-Type", "application/x-www-form-urlencoded"}, 403, codeCSRF},
		{"multipart", "POST", "/api/keys", create, true, []string{"Content-Type", "multipart/form-data; boundary=x"}, 403, codeCSRF},
		{"text plain", "POST", "/api/keys", create, true, []string{"Content-Type", "Text/Plain; charset=utf-8"}, 403, codeCSRF},
		{"GET is safe", "GET", "/api/keys", "", true, []string{"Origin", "https://evil.example"}, 200, ""},
		{"DELETE cross origin", "DELETE", "/api/keys/00000000-0000-0000-0000-000000000000", "", true,
			[]string{"Origin", "https://evil.example"}, 403, codeCSRF},
		{"no cookie is unauthorized", "POST", "/api/keys", create, false, []string{"Origin", "https://evil.example"}, 401, codeUnauthorized},
		{"login with curl -d content type", "POST", "/api/auth/login", `{"email":"alice@example.com","password":"password123"}`, false,
			[]string{"Content-Type", "application/x-www-form-urlencoded"}, 200, ""},
		{"login cross origin", "POST", "/api/auth/login", `{"email":"alice@example.com","password":"password123"}`, false,
			[]string{"Origin", "https://evil.example"}, 403, codeCSRF},
		{"logout cross origin", "POST", "/api/auth/logout", "", true, []string{"Origin", "https://evil.example"}, 403, codeCSRF},
		{"validate is key-authenticated", "POST", "/api/keys/validate", "", true,
			[]string{"Origin", "https://evil.example"}, 401, codeMissingKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := request{method: tt.method, path: tt.path, body: tt.body, headers: tt.headers}
			if tt.cookie {
				req.cookie = w.aliceCk
			}
			r := w.do(t, req)
			if tt.path == "/api/keys/validate" { // body {valid:false, error}
				if r.status != tt.status || r.json["error"] != tt.code {
					t.Fatalf("got %d %s", r.status, r.body)
				}
				return
			}
			mustStatus(t, r, tt.status, tt.code)
		})
	}
}
