package httpapi

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCreateUser(t *testing.T) {
	w := newTestEnv(t, withWorld())
	tests := []struct {
		name   string
		cookie string
		body   string
		status int
		code   string
	}{
		{"ok", w.adminCk, `{"email":"dan@example.com","password":"password123","plan":"premium","licenseActive":true}`, 201, ""},
		{"admin role", w.adminCk, `{"email":"eve@example.com","password":"password123","role":"admin","plan":"standard","licenseActive":false}`, 201, ""},
		{"defaults", w.adminCk, `{"email":"fay@example.com","password":"password123"}`, 201, ""},
		{"duplicate email", w.adminCk, `{"email":"alice@example.com","password":"password123","plan":"standard","licenseActive":true}`, 409, codeEmailTaken},
		{"bad role", w.adminCk, `{"email":"g@example.com","password":"password123","role":"root"}`, 400, codeValidation},
		{"bad plan", w.adminCk, `{"email":"g@example.com","password":"password123","plan":"gold"}`, 400, codeValidation},
		{"license not bool", w.adminCk, `{"email":"g@example.com","password":"password123","licenseActive":"yes"}`, 400, codeValidation},
		{"missing email", w.adminCk, `{"password":"password123"}`, 400, codeValidation},
		{"short password (service rule)", w.adminCk, `{"email":"g@example.com","password":"short"}`, 400, codeValidation},
		{"bad email (service rule)", w.adminCk, `{"email":"nope","password":"password123"}`, 400, codeValidation},
		{"malformed", w.adminCk, `{`, 400, codeInvalidJSON},
		{"not admin", w.aliceCk, `{"email":"h@example.com","password":"password123"}`, 403, codeForbidden},
		{"no session", "", `{"email":"h@example.com","password":"password123"}`, 401, codeUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := w.do(t, request{method: "POST", path: "/api/users", body: tt.body, cookie: tt.cookie})
			mustStatus(t, r, tt.status, tt.code)
		})
	}
	r := w.do(t, request{method: "POST", path: "/api/users", cookie: w.adminCk,
		body: `{"email":"ivy@example.com","password":"password123","plan":"premium","licenseActive":true}`})
	want := map[string]any{
		"id": r.json["id"], "email": "ivy@example.com", "role": "user", "plan": "premium",
		"licenseActive": true, "createdAt": "2026-11-22T10:00:00Z", "keyRateLimit": nil,
	}
	if diff := cmp.Diff(want, r.json); diff != "" {
		t.Errorf("create user body (-want +got):\n%s", diff)
	}
	r = w.do(t, request{method: "POST", path: "/api/users", cookie: w.adminCk, body: `{"email":"x@example.com","password":"short"}`})
	if r.json["message"] != "password must be 8-1024 bytes" {
		t.Errorf("service validation message = %q, want it readable and without the actors prefix", r.json["message"])
	}
}

func TestListAndPatchUsers(t *testing.T) {
	w := newTestEnv(t, withWorld())
	r := w.do(t, request{method: "GET", path: "/api/users", cookie: w.adminCk})
	mustStatus(t, r, 200, "")
	if users := r.json["users"].([]any); len(users) != 4 {
		t.Errorf("GET /api/users = %d users, want 4", len(users))
	}
	mustStatus(t, w.do(t, request{method: "GET", path: "/api/users", cookie: w.aliceCk}), 403, codeForbidden)
	mustStatus(t, w.do(t, request{method: "GET", path: "/api/users"}), 401, codeUnauthorized)

	path := "/api/users/" + w.carol.ID.String()
	tests := []struct {
		name   string
		cookie string
		path   string
		body   string
		status int
		code   string
	}{
		{"license and plan", w.adminCk, path, `{"licenseActive":true,"plan":"premium"}`, 200, ""},
		{"role", w.adminCk, path, `{"role":"admin"}`, 200, ""},
		{"password", w.adminCk, path, `{"password":"newpassword1"}`, 200, ""},
		{"short password", w.adminCk, path, `{"password":"x"}`, 400, codeValidation},
		{"bad plan", w.adminCk, path, `{"plan":"free"}`, 400, codeValidation},
		{"email immutable", w.adminCk, path, `{"email":"c@example.com"}`, 400, codeValidation},
		{"unknown user", w.adminCk, "/api/users/00000000-0000-4000-8000-000000000000", `{"role":"user"}`, 404, codeNotFound},
		{"malformed id", w.adminCk, "/api/users/carol", `{"role":"user"}`, 404, codeNotFound},
		{"not admin", w.aliceCk, path, `{"licenseActive":true}`, 403, codeForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustStatus(t, w.do(t, request{method: "PATCH", path: tt.path, body: tt.body, cookie: tt.cookie}), tt.status, tt.code)
		})
	}
	r = w.do(t, request{method: "PATCH", path: path, body: `{}`, cookie: w.adminCk})
	want := map[string]any{
		"id": w.carol.ID.String(), "email": "carol@example.com", "role": "admin", "plan": "premium",
		"licenseActive": true, "createdAt": "2026-11-22T10:00:00Z", "keyRateLimit": nil,
	}
	if diff := cmp.Diff(want, r.json); diff != "" {
		t.Errorf("patched user (-want +got):\n%s", diff)
	}
	// A new license, role or password ended carol's session.
	mustStatus(t, w.do(t, request{method: "POST", path: "/api/keys", body: `{"name":"now"}`, cookie: w.carolCookie}), 401, codeUnauthorized)
	// Her new password works, and the license now lets her create keys.
	r = w.do(t, request{method: "POST", path: "/api/auth/login", body: `{"email":"carol@example.com","password":"newpassword1"}`})
	mustStatus(t, r, 200, "")
	ck := parseCookie(t, r).Value()
	mustStatus(t, w.do(t, request{method: "POST", path: "/api/keys", body: `{"name":"now"}`, cookie: string(ck)}), 201, "")
}
