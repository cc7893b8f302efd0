package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/valyala/fasthttp"
)

var keyPattern = regexp.MustCompile(`^svc_live_[A-Za-z0-9]{32}$`)

func TestCreateKey(t *testing.T) {
	w := newTestEnv(t, withWorld())
	tests := []struct {
		name   string
		body   string
		cookie string
		status int
		code   string
	}{
		{"ok", `{"name":"ci"}`, w.aliceCk, 201, ""},
		{"one rune", `{"name":"x"}`, w.aliceCk, 201, ""},
		{"100 runes", `{"name":"` + strings.Repeat("a", 100) + `"}`, w.aliceCk, 201, ""},
		{"100 multi-byte runes", `{"name":"` + strings.Repeat("é", 100) + `"}`, w.aliceCk, 201, ""},
		{"100 emoji", `{"name":"` + strings.Repeat("🔑", 100) + `"}`, w.aliceCk, 201, ""},
		{"empty name", `{"name":""}`, w.aliceCk, 400, codeValidation},
		{"101 runes", `{"name":"` + strings.Repeat("a", 101) + `"}`, w.aliceCk, 400, codeValidation},
		{"101 multi-byte runes", `{"name":"` + strings.Repeat("é", 101) + `"}`, w.aliceCk, 400, codeValidation},
		{"missing name", `{}`, w.aliceCk, 400, codeValidation},
		{"null name", `{"name":null}`, w.aliceCk, 400, codeValidation},
		{"number name", `{"name":42}`, w.aliceCk, 400, codeValidation},
		{"whitespace name", `{"name":"   "}`, w.aliceCk, 400, codeValidation},
		{"control character", `{"name":"a\nb"}`, w.aliceCk, 400, codeValidation},
		{"unknown fields ignored", `{"name":"x","color":"red"}`, w.aliceCk, 201, ""},
		{"future expiresAt", `{"name":"x","expiresAt":"2030-01-01T00:00:00Z"}`, w.aliceCk, 201, ""},
		{"null expiresAt", `{"name":"x","expiresAt":null}`, w.aliceCk, 201, ""},
		{"past expiresAt", `{"name":"x","expiresAt":"2020-01-01T00:00:00Z"}`, w.aliceCk, 400, codeValidation},
		{"bad expiresAt", `{"name":"x","expiresAt":"tomorrow"}`, w.aliceCk, 400, codeValidation},
		{"numeric expiresAt", `{"name":"x","expiresAt":1893456000}`, w.aliceCk, 400, codeValidation},
		{"malformed JSON", `{"name":`, w.aliceCk, 400, codeInvalidJSON},
		{"not an object", `"name"`, w.aliceCk, 400, codeInvalidJSON},
		{"trailing data", `{"name":"x"} {}`, w.aliceCk, 400, codeInvalidJSON},
		{"no license", `{"name":"x"}`, w.carolCookie, 403, codeLicenseRequired},
		{"no session", `{"name":"x"}`, "", 401, codeUnauthorized},
		{"bad session", `{"name":"x"}`, "nope", 401, codeUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := w.do(t, request{method: "POST", path: "/api/keys", body: tt.body, cookie: tt.cookie})
			mustStatus(t, r, tt.status, tt.code)
			if tt.status != 201 {
				if msg, _ := r.json["message"].(string); msg == "" {
					t.Errorf("error without message: %s", r.body)
				}
				return
			}
			if key, _ := r.json["key"].(string); !keyPattern.MatchString(key) {
				t.Errorf("key = %q, want svc_live_ + 32 alphanumerics", key)
			}
			if _, ok := parseID(fmt.Sprint(r.json["id"])); !ok || r.json["message"] == "" || r.json["name"] == nil {
				t.Errorf("create body %s", r.body)
			}
		})
	}
}

func TestCreateKeyValidationMessageNamesField(t *testing.T) {
	w := newTestEnv(t, withWorld())
	r := w.do(t, request{method: "POST", path: "/api/keys", body: `{"name":""}`, cookie: w.aliceCk})
	if msg, _ := r.json["message"].(string); !strings.HasPrefix(msg, "name ") {
		t.Errorf("message = %q, want it to name the field", msg)
	}
}

func TestBodyLimit(t *testing.T) {
	w := newTestEnv(t, withWorld(), withConfig(func(c *Config) { c.MaxBodyBytes = 64; c.MaxProxyBodyBytes = 128 }))
	tests := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"at the limit", `{"name":"` + strings.Repeat("a", 64-11) + `"}`, 201, ""},
		{"over the JSON limit", `{"name":"` + strings.Repeat("a", 64-10) + `"}`, 413, codeTooLarge},
		{"over the listener limit", `{"name":"` + strings.Repeat("a", 200) + `"}`, 413, codeTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustStatus(t, w.do(t, request{method: "POST", path: "/api/keys", body: tt.body, cookie: w.aliceCk}), tt.status, tt.code)
		})
	}
}

func TestListKeys(t *testing.T) {
	w := newTestEnv(t, withWorld())
	first, _ := w.createKey(t, w.aliceCk, "first")
	w.sys.clk.Advance(time.Minute)
	second, _ := w.createKey(t, w.aliceCk, "second")
	w.createKey(t, w.bobCk, "bobs")

	r := w.do(t, request{method: "GET", path: "/api/keys", cookie: w.aliceCk})
	mustStatus(t, r, 200, "")
	keys := r.json["keys"].([]any)
	if len(keys) != 2 {
		t.Fatalf("GET /api/keys = %d keys, want 2: %s", len(keys), r.body)
	}
	got := keys[0].(map[string]any)
	want := map[string]any{
		"id": second.String(), "name": "second", "prefix": "svc_live", "keyPreview": got["keyPreview"],
		"rateLimit": 1000.0, "isActive": true, "lastUsedAt": nil, "usageCount": 0.0,
		"expiresAt": nil, "createdAt": "2026-11-22T10:01:00Z", "rotatedAt": nil, "gracePeriodEndsAt": nil,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("newest key (-want +got):\n%s", diff)
	}
	if id := keys[1].(map[string]any)["id"]; id != first.String() {
		t.Errorf("second entry = %v, want the older key %v", id, first)
	}
	if p, _ := got["keyPreview"].(string); !strings.HasPrefix(p, "svc_live_") || len(p) > 30 {
		t.Errorf("keyPreview = %q", p)
	}

	tests := []struct {
		name   string
		query  string
		cookie string
		status int
		code   string
		n      int
	}{
		{"admin views bob", "?viewAs=" + w.bob.ID.String(), w.adminCk, 200, "", 1},
		{"admin views nobody", "?viewAs=00000000-0000-0000-0000-000000000001", w.adminCk, 200, "", 0},
		{"admin bad uuid", "?viewAs=bob", w.adminCk, 400, codeValidation, 0},
		{"admin empty viewAs", "?viewAs=", w.adminCk, 400, codeValidation, 0},
		{"user viewAs", "?viewAs=" + w.bob.ID.String(), w.aliceCk, 403, codeForbidden, 0},
		{"user bad viewAs", "?viewAs=x", w.aliceCk, 403, codeForbidden, 0},
		{"no keys", "", w.carolCookie, 200, "", 0},
		{"no session", "", "", 401, codeUnauthorized, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := w.do(t, request{method: "GET", path: "/api/keys" + tt.query, cookie: tt.cookie})
			mustStatus(t, r, tt.status, tt.code)
			if tt.status == 200 {
				keys, ok := r.json["keys"].([]any)
				if !ok || len(keys) != tt.n {
					t.Errorf("keys = %s, want %d entries", r.body, tt.n)
				}
			}
		})
	}
}

func TestGetKeyDetail(t *testing.T) {
	w := newTestEnv(t, withWorld())
	id, _ := w.createKey(t, w.bobCk, "detail")
	r := w.do(t, request{method: "GET", path: "/api/keys/" + id.String(), cookie: w.bobCk})
	mustStatus(t, r, 200, "")
	want := map[string]any{"key": map[string]any{
		"id": id.String(), "name": "detail", "prefix": "svc_live", "rateLimit": 10000.0, "isActive": true,
		"rotatedAt": nil, "gracePeriodEndsAt": nil, "lastUsedAt": nil, "usageCount": 0.0,
		"expiresAt": nil, "createdAt": "2026-11-22T10:00:00Z",
	}}
	if diff := cmp.Diff(want, r.json); diff != "" {
		t.Errorf("GET /api/keys/{id} (-want +got):\n%s", diff)
	}
}

// TestKeyOwnership runs every /api/keys/{id} endpoint as the owner, another
// user, an admin, nobody, and with unknown and malformed ids.
func TestKeyOwnership(t *testing.T) {
	endpoints := []struct {
		method, suffix, body string
		ok                   int
	}{
		{"GET", "", "", 200},
		{"GET", "/usage", "", 200},
		{"POST", "/rotate", "", 200},
		{"POST", "/revoke", "", 200},
		{"DELETE", "", "", 200},
	}
	for _, ep := range endpoints {
		t.Run(ep.method+ep.suffix, func(t *testing.T) {
			w := newTestEnv(t, withWorld())
			id, _ := w.createKey(t, w.aliceCk, "owned")
			own, _ := w.createKey(t, w.aliceCk, "owned too")
			callers := []struct {
				name   string
				cookie string
				id     string
				status int
				code   string
			}{
				{"other user", w.bobCk, id.String(), 404, codeKeyNotFound},
				{"no session", "", id.String(), 401, codeUnauthorized},
				{"unknown id", w.aliceCk, "00000000-0000-4000-8000-000000000000", 404, codeKeyNotFound},
				{"malformed id", w.aliceCk, "not-a-uuid", 404, codeKeyNotFound},
				{"braced id", w.aliceCk, "{" + id.String() + "}", 404, codeKeyNotFound},
				{"owner", w.aliceCk, own.String(), ep.ok, ""},
				{"admin", w.adminCk, id.String(), ep.ok, ""},
			}
			for _, c := range callers {
				t.Run(c.name, func(t *testing.T) {
					r := w.do(t, request{method: ep.method, path: "/api/keys/" + c.id + ep.suffix, cookie: c.cookie})
					mustStatus(t, r, c.status, c.code)
				})
			}
		})
	}
}

func TestValidateKey(t *testing.T) {
	w := newTestEnv(t, withWorld())
	_, secret := w.createKey(t, w.aliceCk, "v")
	_, expiring := w.createKey(t, w.aliceCk, "e")
	revokedID, revoked := w.createKey(t, w.aliceCk, "r")
	mustStatus(t, w.do(t, request{method: "POST", path: "/api/keys/" + revokedID.String() + "/revoke", cookie: w.aliceCk}), 200, "")
	ctx := context.Background()
	expID := w.keyIDOf(t, expiring)
	exp := w.sys.clk.Now().Add(time.Hour)
	if _, err := w.sys.UpdateKey(ctx, expID, keyPatchExpiry(exp)); err != nil {
		t.Fatal(err)
	}
	w.sys.clk.Advance(2 * time.Hour)

	tests := []struct {
		name    string
		headers []string
		status  int
		code    string
	}{
		{"X-API-Key", []string{"X-API-Key", secret}, 200, ""},
		{"Bearer", []string{"Authorization", "Bearer " + secret}, 200, ""},
		{"lowercase bearer", []string{"Authorization", "bearer " + secret}, 200, ""},
		{"X-API-Key preferred", []string{"X-API-Key", secret, "Authorization", "Bearer svc_live_nope"}, 200, ""},
		{"missing", nil, 401, codeMissingKey},
		{"basic auth is no key", []string{"Authorization", "Basic dXNlcjpwYXNz"}, 401, codeMissingKey},
		{"unknown", []string{"X-API-Key", "svc_live_" + strings.Repeat("A", 32)}, 401, codeInvalidKey},
		{"garbage", []string{"X-API-Key", "hello"}, 401, codeInvalidKey},
		{"expired", []string{"X-API-Key", expiring}, 401, codeKeyExpired},
		{"revoked", []string{"Authorization", "Bearer " + revoked}, 401, codeKeyRevoked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := w.do(t, request{method: "POST", path: "/api/keys/validate", headers: tt.headers})
			if r.status != tt.status {
				t.Fatalf("status = %d (%s), want %d", r.status, r.body, tt.status)
			}
			want := map[string]any{"valid": false, "error": tt.code}
			if tt.status == 200 {
				want = map[string]any{"valid": true, "userId": w.alice.ID.String(), "rateLimit": 1000.0, "isActive": true}
			}
			if diff := cmp.Diff(want, r.json); diff != "" {
				t.Errorf("validate body (-want +got):\n%s", diff)
			}
		})
	}
	// Validation consumed nothing.
	u, err := w.sys.KeyUsage(ctx, w.keyIDOf(t, secret), 1)
	if err != nil || u.Used != 0 || u.Total != 0 {
		t.Errorf("after validate: usage %+v, %v; want nothing consumed", u, err)
	}
}

func TestWriteValidOK(t *testing.T) {
	tests := []struct {
		id     uuid.UUID
		limit  int64
		active bool
	}{
		{uuid.MustParse("6f1c8a52-3c39-4d0e-9a51-1f2a3b4c5d6e"), 1000, true},
		{uuid.Nil, 1_000_000_000, false},
		{uuid.New(), 1, true},
	}
	for _, tt := range tests {
		var rc fasthttp.RequestCtx
		writeValidOK(&rc, tt.id, tt.limit, tt.active)
		id, limit, active := tt.id, tt.limit, tt.active
		want, _ := json.Marshal(validateBody{Valid: true, UserID: &id, RateLimit: &limit, IsActive: &active})
		want = append(want, '\n')
		if got := rc.Response.Body(); string(got) != string(want) {
			t.Errorf("writeValidOK() = %s, want %s", got, want)
		}
		if n := testing.AllocsPerRun(100, func() { writeValidOK(&rc, tt.id, tt.limit, tt.active) }); n != 0 {
			t.Errorf("writeValidOK allocates %v times", n)
		}
	}
}
