package httpapi

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestBadInputChangesNothing (issue 14): a body that is not valid UTF-8
// is 400 and creates nothing; a repeated single-valued parameter is 400;
// answers that carry a full key are not cacheable.
func TestBadInputChangesNothing(t *testing.T) {
	w := newWorld(t)
	r := w.do(t, request{method: "POST", path: "/api/keys", cookie: w.aliceCk, body: "{\"name\":\"\xff\xfe\"}"})
	mustStatus(t, r, 400, codeInvalidJSON)
	list := w.do(t, request{method: "GET", path: "/api/keys", cookie: w.aliceCk})
	if keys := list.json["keys"].([]any); len(keys) != 0 {
		t.Fatalf("a refused body created %d keys", len(keys))
	}

	id, _ := w.createKey(t, w.aliceCk, "k")
	r = w.do(t, request{method: "GET", path: "/api/keys/" + id.String() + "/usage?days=7&days=8", cookie: w.aliceCk})
	mustStatus(t, r, 400, codeValidation)

	r = w.do(t, request{method: "POST", path: "/api/keys", cookie: w.aliceCk, body: `{"name":"fresh"}`})
	if r.status != 201 || r.headers["Cache-Control"] != "no-store" {
		t.Errorf("create = %d, Cache-Control %q; want 201 and no-store", r.status, r.headers["Cache-Control"])
	}
	r = w.do(t, request{method: "POST", path: "/api/keys/" + id.String() + "/rotate", cookie: w.aliceCk})
	if r.status != 200 || r.headers["Cache-Control"] != "no-store" {
		t.Errorf("rotate = %d, Cache-Control %q; want 200 and no-store", r.status, r.headers["Cache-Control"])
	}
}

// TestProxyDropsHopByHop (issue 14): a client's Connection header never
// reaches the upstream (an intermediary there would drop the headers it
// names: the identity headers gatehouse sets), nor do header names with
// "_" (read as "-" by some servers: a way to smuggle identity headers).
func TestProxyDropsHopByHop(t *testing.T) {
	p := newProxyWorld(t)
	r := p.do(t, request{method: "GET", path: "/api/proxy/echo/v1/x", headers: []string{
		"X-API-Key", p.secret, "Connection", "X-Gatehouse-User-Id, X-Upstream-Token", "X_Gatehouse_User_Id", "evil",
	}})
	if r.status != 202 {
		t.Fatalf("proxied answer = %d %s", r.status, r.body)
	}
	got := p.up.lastRequest().Headers
	for k, v := range got {
		if strings.EqualFold(k, "Connection") && v != "keep-alive" && v != "close" {
			t.Errorf("upstream got Connection: %q", v)
		}
		if strings.Contains(k, "_") {
			t.Errorf("upstream got %s: %q, want headers with _ dropped", k, v)
		}
	}
	if got["X-Gatehouse-User-Id"] != p.alice.ID.String() || got["X-Upstream-Token"] != "s3cret" {
		t.Errorf("identity or credential header missing upstream: %v", got)
	}
}

// TestLoginThrottleAndSessionEnd (issue 14): failed logins back off with
// 429 and Retry-After; a password change ends the user's sessions;
// logout-all ends every session of the caller.
func TestLoginThrottleAndSessionEnd(t *testing.T) {
	w := newWorld(t)
	login := func(pw string) response {
		return w.do(t, request{method: "POST", path: "/api/auth/login", body: `{"email":"bob@example.com","password":"` + pw + `"}`})
	}
	for range 5 {
		mustStatus(t, login("wrong password"), 401, codeInvalidCreds)
	}
	r := login("password123")
	mustStatus(t, r, 429, codeRateLimited)
	if r.headers["Retry-After"] != "1" {
		t.Errorf("throttled login: Retry-After %q, want 1", r.headers["Retry-After"])
	}
	w.sys.clk.Advance(time.Second)
	mustStatus(t, login("password123"), 200, "")

	// Two sessions of alice; logout-all from one ends both.
	second := w.login(t, "alice@example.com")
	mustStatus(t, w.do(t, request{method: "POST", path: "/api/auth/logout-all", cookie: second, headers: []string{"Origin", "http://" + testHost}}), 200, "")
	for _, ck := range []string{w.aliceCk, second} {
		mustStatus(t, w.do(t, request{method: "GET", path: "/api/auth/me", cookie: ck}), 401, codeUnauthorized)
	}

	// An admin resetting carol's password ends carol's session.
	mustStatus(t, w.do(t, request{method: "PATCH", path: "/api/users/" + w.carol.ID.String(), cookie: w.adminCk,
		headers: []string{"Origin", "http://" + testHost}, body: `{"password":"a new password"}`}), 200, "")
	mustStatus(t, w.do(t, request{method: "GET", path: "/api/auth/me", cookie: w.carolCookie}), 401, codeUnauthorized)
}

// TestProxyRefusesSmuggledPaths (issue 14): path parameters after dot
// segments, double-encoded dots and encoded NULs are 400 INVALID_PATH and
// reach no upstream; an upstream's Set-Cookie never reaches the client.
func TestProxyRefusesSmuggledPaths(t *testing.T) {
	p := newProxyWorld(t)
	for _, path := range []string{
		"/api/proxy/echo/v1/a/..;/admin", "/api/proxy/echo/v1/%252e%252e/admin", "/api/proxy/echo/v1/a%00b",
		"/api/proxy/echo/v1/%252f", "/api/proxy/echo/v1/x/.;/y",
	} {
		r := p.do(t, request{method: "GET", path: path, headers: []string{"X-API-Key", p.secret}})
		mustStatus(t, r, 400, codeInvalidPath)
	}
	r := p.do(t, request{method: "GET", path: "/api/proxy/echo/v1/a;b=1/ok", headers: []string{"X-API-Key", p.secret}})
	if r.status != 202 {
		t.Errorf("a path parameter on a plain segment = %d, want it proxied", r.status)
	}
	if len(r.cookies) != 0 {
		t.Errorf("the upstream's Set-Cookie reached the client: %v", r.cookies)
	}
}

// TestKeyLimitOverHTTP (issue 14): the plan's key limit (100 on standard)
// answers 403 KEY_LIMIT_REACHED and creates nothing.
func TestKeyLimitOverHTTP(t *testing.T) {
	w := newWorld(t)
	for i := range 100 {
		r := w.do(t, request{method: "POST", path: "/api/keys", cookie: w.aliceCk, body: fmt.Sprintf(`{"name":"k%d"}`, i)})
		mustStatus(t, r, 201, "")
	}
	mustStatus(t, w.do(t, request{method: "POST", path: "/api/keys", cookie: w.aliceCk, body: `{"name":"one too many"}`}), 403, codeKeyLimit)
	if n := len(w.do(t, request{method: "GET", path: "/api/keys", cookie: w.aliceCk}).json["keys"].([]any)); n != 100 {
		t.Errorf("alice holds %d keys, want 100", n)
	}
}
