package httpapi

import (
	"context"
	"strings"
	"testing"
	"time"

	"gatehouse/actors/accounts"
	"gatehouse/actors/control"
)

// bearer is the header pair of an access token.
func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

// newToken creates a token through the API with cookie and returns it.
func (e *testEnv) newToken(tb testing.TB, cookie, body string) string {
	tb.Helper()
	r := e.do(tb, request{method: "POST", path: "/api/tokens", cookie: cookie, body: body})
	mustStatus(tb, r, 201, "")
	tok, _ := r.json["token"].(string)
	if !strings.HasPrefix(tok, control.TokenPrefix) || len(tok) != 40 || r.headers["Cache-Control"] != "no-store" {
		tb.Fatalf("created token %q (Cache-Control %q)", tok, r.headers["Cache-Control"])
	}
	return tok
}

func TestTokenRules(t *testing.T) {
	up := newStubUpstream(t)
	w := newTestEnv(t, withWorld(), withConfig(func(c *Config) { c.Services = map[string]Service{"echo": {Upstream: "http://" + up.addr}} }))
	write := w.newToken(t, w.aliceCk, `{"name":"ci","scopes":["write"]}`)
	read := w.newToken(t, w.aliceCk, `{"name":"ro","scopes":["read"]}`)
	adminTok := w.newToken(t, w.adminCk, `{"name":"ops","scopes":["admin"]}`)
	adminWrite := w.newToken(t, w.adminCk, `{"name":"ops-w","scopes":["write"]}`)
	_, liveKey := w.createKey(t, w.aliceCk, "k")

	tests := []struct {
		name   string
		req    request
		status int
		code   string
	}{
		{"admin scope for a user", request{method: "POST", path: "/api/tokens", cookie: w.aliceCk, body: `{"name":"x","scopes":["admin"]}`}, 400, codeValidation},
		{"no scopes", request{method: "POST", path: "/api/tokens", cookie: w.aliceCk, body: `{"name":"x","scopes":[]}`}, 400, codeValidation},
		{"unknown scope", request{method: "POST", path: "/api/tokens", cookie: w.aliceCk, body: `{"name":"x","scopes":["root"]}`}, 400, codeValidation},
		{"no name", request{method: "POST", path: "/api/tokens", cookie: w.aliceCk, body: `{"scopes":["read"]}`}, 400, codeValidation},
		{"expiry in the past", request{method: "POST", path: "/api/tokens", cookie: w.aliceCk, body: `{"name":"x","scopes":["read"],"expiresAt":"2020-01-01T00:00:00Z"}`}, 400, codeValidation},
		{"userId needs admin", request{method: "POST", path: "/api/tokens", cookie: w.aliceCk, body: `{"name":"x","scopes":["read"],"userId":"` + w.bob.ID.String() + `"}`}, 403, codeForbidden},
		{"read token cannot write", request{method: "POST", path: "/api/keys", headers: bearer(read), body: `{"name":"x"}`}, 403, codeInsufficientScope},
		{"read token cannot mint a write token", request{method: "POST", path: "/api/tokens", headers: bearer(read), body: `{"name":"x","scopes":["write"]}`}, 403, codeInsufficientScope},
		{"user token on an admin route", request{method: "GET", path: "/api/users", headers: bearer(write)}, 403, codeInsufficientScope},
		{"admin's write token on an admin route", request{method: "GET", path: "/api/users", headers: bearer(adminWrite)}, 403, codeInsufficientScope},
		{"admin's write token cannot viewAs", request{method: "GET", path: "/api/keys?viewAs=" + w.alice.ID.String(), headers: bearer(adminWrite)}, 403, codeForbidden},
		{"an API key is not a token", request{method: "GET", path: "/api/keys", headers: bearer(liveKey)}, 401, codeInvalidToken},
		{"unknown token", request{method: "GET", path: "/api/keys", headers: bearer("svc_pat_" + strings.Repeat("Z", 32))}, 401, codeInvalidToken},
		{"other scheme", request{method: "GET", path: "/api/keys", headers: []string{"Authorization", "Basic eDp5"}}, 401, codeInvalidToken},
		{"a token is not an API key", request{method: "GET", path: "/api/proxy/echo/v1/x", headers: []string{"X-API-Key", write}}, 401, codeInvalidKey},
		{"a token as bearer on the proxy", request{method: "GET", path: "/api/proxy/echo/v1/x", headers: bearer(write)}, 401, codeInvalidKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := w.do(t, tt.req)
			mustStatus(t, r, tt.status, tt.code)
			if strings.Contains(string(r.body), liveKey) || strings.Contains(string(r.body), write) {
				t.Errorf("answer quotes a secret: %s", r.body)
			}
		})
	}
	if r := w.do(t, request{method: "POST", path: "/api/keys/validate", headers: bearer(write)}); r.status != 401 || r.json["valid"] != false {
		t.Errorf("a token on validate: %d %s", r.status, r.body)
	}

	// Within its scopes a token acts as its user; the CSRF rules of the
	// cookie do not apply to it (a browser never adds the header).
	r := w.do(t, request{method: "POST", path: "/api/keys", headers: append(bearer(write), "Origin", "https://evil.example"), body: `{"name":"via token"}`})
	mustStatus(t, r, 201, "")
	mustStatus(t, w.do(t, request{method: "GET", path: "/api/keys", headers: bearer(read)}), 200, "")
	me := w.do(t, request{method: "GET", path: "/api/auth/me", headers: bearer(read)})
	if me.status != 200 || me.json["user"].(map[string]any)["id"] != w.alice.ID.String() {
		t.Errorf("me with a token: %d %s", me.status, me.body)
	}
	// An admin token may use the admin routes and viewAs.
	mustStatus(t, w.do(t, request{method: "GET", path: "/api/users", headers: bearer(adminTok)}), 200, "")
	v := w.do(t, request{method: "GET", path: "/api/keys?viewAs=" + w.alice.ID.String(), headers: bearer(adminTok)})
	if v.status != 200 || len(v.json["keys"].([]any)) != 2 {
		t.Errorf("viewAs with an admin token: %d %s", v.status, v.body)
	}
	// An admin creates a token for a user; it acts as that user.
	forBob := w.do(t, request{method: "POST", path: "/api/tokens", headers: bearer(adminTok), body: `{"name":"bob-ci","scopes":["read"],"userId":"` + w.bob.ID.String() + `"}`})
	mustStatus(t, forBob, 201, "")
	bobMe := w.do(t, request{method: "GET", path: "/api/auth/me", headers: bearer(forBob.json["token"].(string))})
	if bobMe.json["user"].(map[string]any)["id"] != w.bob.ID.String() {
		t.Errorf("token for bob acts as %s", bobMe.body)
	}

	// The list shows metadata, never the secret, and lastUsedAt.
	l := w.do(t, request{method: "GET", path: "/api/tokens", cookie: w.aliceCk})
	mustStatus(t, l, 200, "")
	if strings.Contains(string(l.body), write) || strings.Contains(string(l.body), "svc_pat_") || len(l.json["tokens"].([]any)) != 2 {
		t.Fatalf("list: %s", l.body)
	}
	for _, x := range l.json["tokens"].([]any) {
		tk := x.(map[string]any)
		if tk["lastUsedAt"] == nil {
			t.Errorf("token %v: lastUsedAt null after use", tk["name"])
		}
	}
	// Revoked: the next request fails. Another user's token is not found.
	id := l.json["tokens"].([]any)[0].(map[string]any)["id"].(string)
	mustStatus(t, w.do(t, request{method: "DELETE", path: "/api/tokens/" + id, cookie: w.bobCk}), 404, codeTokenNotFound)
	mustStatus(t, w.do(t, request{method: "DELETE", path: "/api/tokens/" + id, cookie: w.aliceCk}), 200, "")
	for _, tok := range []string{read, write} {
		r := w.do(t, request{method: "GET", path: "/api/keys", headers: bearer(tok)})
		if r.status == 200 {
			continue // the other one
		}
		mustStatus(t, r, 401, codeInvalidToken)
	}

	// A demoted admin's admin token is revoked with the role (and so is
	// the token it minted for bob).
	if _, err := w.sys.UpdateUser(context.Background(), w.admin.ID, accounts.UserPatch{Role: ptr(accounts.RoleUser)}); err != nil {
		t.Fatal(err)
	}
	w.sys.clk.Advance(time.Hour) // past the wait the bad tokens above earned
	mustStatus(t, w.do(t, request{method: "GET", path: "/api/users", headers: bearer(adminTok)}), 401, codeInvalidToken)
	w.sys.clk.Advance(time.Hour) // that failure renewed the wait
	mustStatus(t, w.do(t, request{method: "GET", path: "/api/auth/me", headers: bearer(forBob.json["token"].(string))}), 401, codeInvalidToken)
}

func ptr[T any](v T) *T { return &v }

func TestTokenExpiresAndBadTokensThrottled(t *testing.T) {
	w := newTestEnv(t, withWorld())
	exp := w.sys.clk.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	tok := w.newToken(t, w.aliceCk, `{"name":"short","scopes":["read"],"expiresAt":"`+exp+`"}`)
	mustStatus(t, w.do(t, request{method: "GET", path: "/api/keys", headers: bearer(tok)}), 200, "")
	w.sys.clk.Advance(2 * time.Hour)
	mustStatus(t, w.do(t, request{method: "GET", path: "/api/keys", headers: bearer(tok)}), 401, codeTokenExpired)

	good := w.newToken(t, w.aliceCk, `{"name":"good","scopes":["read"]}`)
	var last response
	for range 8 {
		last = w.do(t, request{method: "GET", path: "/api/keys", headers: bearer("svc_pat_" + strings.Repeat("q", 32))})
	}
	mustStatus(t, last, 429, codeRateLimited)
	if last.json["retryAfter"] == nil || last.headers["Retry-After"] == "" {
		t.Errorf("429 without retryAfter: %v %s", last.headers, last.body)
	}
	// Only the bad tokens wait: a valid token from the same address (the
	// rest of a team behind one NAT) passes, and the bad ones still wait.
	mustStatus(t, w.do(t, request{method: "GET", path: "/api/keys", headers: bearer(good)}), 200, "")
	mustStatus(t, w.do(t, request{method: "GET", path: "/api/keys", headers: bearer(tok)}), 429, codeRateLimited)
	w.sys.clk.Advance(time.Hour)
	mustStatus(t, w.do(t, request{method: "GET", path: "/api/keys", headers: bearer(tok)}), 401, codeTokenExpired)
	mustStatus(t, w.do(t, request{method: "GET", path: "/api/keys", headers: bearer(good)}), 200, "")
}

// TestKeyServiceWithTokenOnly drives the whole key service with access
// tokens alone, no cookie: an admin token (the one bootstrap step, as an
// operator would create it once) creates a user and that user's token,
// which manages a key end to end; the admin token manages services and
// the key's service list.
func TestKeyServiceWithTokenOnly(t *testing.T) {
	up := newStubUpstream(t)
	e := newTestEnv(t, withConfig(func(c *Config) {
		c.Services = map[string]Service{"echo": {Upstream: "http://" + up.addr + "/base"}}
	}))
	ctx := context.Background()
	root := e.addUser(t, "root@example.com", accounts.RoleAdmin, accounts.PlanPremium, true)
	_, adminTok, err := e.sys.ctl.CreateToken(ctx, control.NewToken{UserID: root.ID, Name: "bootstrap", Scopes: []control.Scope{control.ScopeAdmin}})
	if err != nil {
		t.Fatal(err)
	}
	admin := func(method, path, body string) response {
		return e.do(t, request{method: method, path: path, body: body, headers: bearer(adminTok)})
	}
	u := admin("POST", "/api/users", `{"email":"dev@example.com","password":"password123","licenseActive":true}`)
	mustStatus(t, u, 201, "")
	uid := u.json["id"].(string)
	mustStatus(t, admin("PATCH", "/api/users/"+uid, `{"plan":"premium"}`), 200, "")
	tr := admin("POST", "/api/tokens", `{"name":"dev-ci","scopes":["write"],"userId":"`+uid+`"}`)
	mustStatus(t, tr, 201, "")
	devTok := tr.json["token"].(string)
	dev := func(method, path, body string) response {
		return e.do(t, request{method: method, path: path, body: body, headers: bearer(devTok)})
	}
	mustStatus(t, admin("POST", "/api/services", `{"name":"other","upstream":"http://`+up.addr+`/other"}`), 201, "")

	k := dev("POST", "/api/keys", `{"name":"svc","services":["echo"]}`)
	mustStatus(t, k, 201, "")
	keyID, secret := k.json["id"].(string), k.json["key"].(string)
	if l := dev("GET", "/api/keys", ""); l.status != 200 || len(l.json["keys"].([]any)) != 1 {
		t.Fatalf("list: %s", l.body)
	}
	if d := dev("GET", "/api/keys/"+keyID, ""); d.status != 200 || d.json["key"].(map[string]any)["services"].([]any)[0] != "echo" {
		t.Fatalf("detail: %s", d.body)
	}
	if v := e.validate(t, secret); v.status != 200 || v.json["userId"] != uid {
		t.Fatalf("validate: %s", v.body)
	}
	mustStatus(t, e.do(t, request{method: "GET", path: "/api/proxy/echo/v1/ok", headers: []string{"X-API-Key", secret}}), 202, "")
	mustStatus(t, e.do(t, request{method: "GET", path: "/api/proxy/other/v1/no", headers: []string{"X-API-Key", secret}}), 403, codeServiceNotAllowed)
	if got := dev("GET", "/api/keys/"+keyID+"/usage?days=1", ""); got.status != 200 || got.json["rateLimit"].(map[string]any)["used"].(float64) != 2 {
		t.Fatalf("usage: %s", got.body)
	}
	mustStatus(t, admin("PATCH", "/api/keys/"+keyID, `{"services":null}`), 200, "")
	mustStatus(t, e.do(t, request{method: "GET", path: "/api/proxy/other/v1/now", headers: []string{"X-API-Key", secret}}), 202, "")
	rot := dev("POST", "/api/keys/"+keyID+"/rotate", "")
	mustStatus(t, rot, 200, "")
	mustStatus(t, dev("POST", "/api/keys/"+keyID+"/revoke", ""), 200, "")
	if v := e.validate(t, rot.json["key"].(string)); v.status != 401 || v.json["error"] != codeKeyRevoked {
		t.Fatalf("validate after revoke: %s", v.body)
	}
	mustStatus(t, dev("DELETE", "/api/keys/"+keyID, ""), 200, "")
	mustStatus(t, dev("GET", "/api/keys/"+keyID, ""), 404, codeKeyNotFound)
	mustStatus(t, admin("DELETE", "/api/services/other", ""), 200, "")
	mustStatus(t, admin("GET", "/metrics", ""), 200, "")
	// A token revokes itself; logout-all ends every token of the user.
	self := dev("POST", "/api/tokens", `{"name":"self","scopes":["write"]}`)
	mustStatus(t, self, 201, "")
	selfTok := self.json["token"].(string)
	mustStatus(t, e.do(t, request{method: "DELETE", path: "/api/tokens/" + self.json["id"].(string), headers: bearer(selfTok)}), 200, "")
	mustStatus(t, e.do(t, request{method: "GET", path: "/api/keys", headers: bearer(selfTok)}), 401, codeInvalidToken)
	mustStatus(t, dev("POST", "/api/auth/logout-all", ""), 200, "")
	mustStatus(t, dev("GET", "/api/keys", ""), 401, codeInvalidToken)
}

// TestTokenMintedByToken (issue 31): a token minted with a token cannot
// outlive it (its expiry when it asks for none, 400 for a later one) and
// dies with it, also when minted for another user.
func TestTokenMintedByToken(t *testing.T) {
	w := newTestEnv(t, withWorld())
	exp := w.sys.clk.Now().Add(time.Hour).UTC().Truncate(time.Second)
	parent := w.newToken(t, w.aliceCk, `{"name":"p","scopes":["write"],"expiresAt":"`+exp.Format(time.RFC3339)+`"}`)
	child := w.do(t, request{method: "POST", path: "/api/tokens", headers: bearer(parent), body: `{"name":"c","scopes":["write"]}`})
	mustStatus(t, child, 201, "")
	if child.json["expiresAt"] != exp.Format(time.RFC3339) {
		t.Errorf("a child asking no expiry expires %v, want its parent's %s", child.json["expiresAt"], exp.Format(time.RFC3339))
	}
	later := exp.Add(24 * time.Hour).Format(time.RFC3339)
	r := w.do(t, request{method: "POST", path: "/api/tokens", headers: bearer(parent), body: `{"name":"c","scopes":["read"],"expiresAt":"` + later + `"}`})
	mustStatus(t, r, 400, codeValidation)
	if !strings.Contains(string(r.body), "expiresAt") {
		t.Errorf("400 does not name expiresAt: %s", r.body)
	}
	grandchild := w.newTokenWith(t, bearer(child.json["token"].(string)), `{"name":"g","scopes":["read"]}`)
	sibling := w.newToken(t, w.aliceCk, `{"name":"s","scopes":["read"]}`) // a session's: no parent

	// An admin's token minting for bob: bob's token dies with the admin's.
	adminTok := w.newToken(t, w.adminCk, `{"name":"ops","scopes":["admin"]}`)
	forBob := w.newTokenWith(t, bearer(adminTok), `{"name":"bob-ci","scopes":["read"],"userId":"`+w.bob.ID.String()+`"}`)

	l := w.do(t, request{method: "GET", path: "/api/tokens", cookie: w.aliceCk})
	mustStatus(t, l, 200, "")
	for _, x := range l.json["tokens"].([]any) {
		if tk := x.(map[string]any); tk["name"] == "p" {
			mustStatus(t, w.do(t, request{method: "DELETE", path: "/api/tokens/" + tk["id"].(string), cookie: w.aliceCk}), 200, "")
		}
	}
	for _, tok := range []string{parent, child.json["token"].(string), grandchild} {
		mustStatus(t, w.do(t, request{method: "GET", path: "/api/auth/me", headers: bearer(tok)}), 401, codeInvalidToken)
	}
	mustStatus(t, w.do(t, request{method: "GET", path: "/api/auth/me", headers: bearer(sibling)}), 200, "")
	l = w.do(t, request{method: "GET", path: "/api/tokens", cookie: w.aliceCk})
	if n := len(l.json["tokens"].([]any)); n != 1 {
		t.Errorf("alice holds %d tokens after revoking the parent, want 1: %s", n, l.body)
	}

	mustStatus(t, w.do(t, request{method: "GET", path: "/api/auth/me", headers: bearer(forBob)}), 200, "")
	l = w.do(t, request{method: "GET", path: "/api/tokens", cookie: w.adminCk})
	mustStatus(t, w.do(t, request{method: "DELETE", path: "/api/tokens/" + l.json["tokens"].([]any)[0].(map[string]any)["id"].(string), cookie: w.adminCk}), 200, "")
	mustStatus(t, w.do(t, request{method: "GET", path: "/api/auth/me", headers: bearer(forBob)}), 401, codeInvalidToken)
}

// newTokenWith creates a token through the API with the headers of another
// credential (a token) and returns it.
func (e *testEnv) newTokenWith(tb testing.TB, headers []string, body string) string {
	tb.Helper()
	r := e.do(tb, request{method: "POST", path: "/api/tokens", headers: headers, body: body})
	mustStatus(tb, r, 201, "")
	return r.json["token"].(string)
}

// TestAccountRecoveryEndsTokens (issue 31): a password reset, a role or
// licence change and logout-all end the user's access tokens with their
// sessions; another change, and other users' tokens, leave them.
func TestAccountRecoveryEndsTokens(t *testing.T) {
	w := newTestEnv(t, withWorld())
	ctx := context.Background()
	bobTok := w.newToken(t, w.bobCk, `{"name":"bob","scopes":["read"]}`)
	tests := []struct {
		name    string
		req     func() request
		revokes bool
	}{
		{"plan", func() request {
			return request{method: "PATCH", path: "/api/users/" + w.alice.ID.String(), cookie: w.adminCk, body: `{"plan":"premium"}`}
		}, false},
		{"logout-all", func() request {
			return request{method: "POST", path: "/api/auth/logout-all", cookie: w.aliceCk}
		}, true},
		{"password reset", func() request {
			return request{method: "PATCH", path: "/api/users/" + w.alice.ID.String(), cookie: w.adminCk, body: `{"password":"a-new-password"}`}
		}, true},
		{"role", func() request {
			return request{method: "PATCH", path: "/api/users/" + w.alice.ID.String(), cookie: w.adminCk, body: `{"role":"admin"}`}
		}, true},
		{"licence", func() request {
			return request{method: "PATCH", path: "/api/users/" + w.alice.ID.String(), cookie: w.adminCk, body: `{"licenseActive":false}`}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, tok, err := w.sys.ctl.CreateToken(ctx, control.NewToken{UserID: w.alice.ID, Name: tt.name, Scopes: []control.Scope{control.ScopeRead}})
			if err != nil {
				t.Fatal(err)
			}
			mustStatus(t, w.do(t, tt.req()), 200, "")
			want, code := 200, ""
			if tt.revokes {
				want, code = 401, codeInvalidToken
			}
			mustStatus(t, w.do(t, request{method: "GET", path: "/api/auth/me", headers: bearer(tok)}), want, code)
			mustStatus(t, w.do(t, request{method: "GET", path: "/api/auth/me", headers: bearer(bobTok)}), 200, "")
			w.sys.clk.Advance(time.Hour) // no bad-token wait carried into the next case
		})
	}
}
