package httpapi

import (
	"context"
	"fmt"
	"gatehouse/actors/keys"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
)

// keyIDOf resolves a secret to its key id (Validate counts nothing).
func (e *testEnv) keyIDOf(tb testing.TB, secret string) uuid.UUID {
	tb.Helper()
	res := e.sys.System.Validate(context.Background(), []byte(secret))
	if res.Err != nil {
		tb.Fatalf("Validate(%s) = %v", secret, res.Err)
	}
	return res.KeyID
}

func keyPatchExpiry(t time.Time) keys.KeyPatch { return keys.KeyPatch{ExpiresAt: &t} }

func (e *testEnv) validate(tb testing.TB, secret string) response {
	tb.Helper()
	return e.do(tb, request{method: "POST", path: "/api/keys/validate", headers: []string{"X-API-Key", secret}})
}

func TestRotateKey(t *testing.T) {
	w := newTestEnv(t, withWorld(), withConfig(func(c *Config) { c.GracePeriod = 24 * time.Hour }))
	id, old := w.createKey(t, w.aliceCk, "rot")
	path := "/api/keys/" + id.String()

	r := w.do(t, request{method: "POST", path: path + "/rotate", cookie: w.aliceCk})
	mustStatus(t, r, 200, "")
	fresh, _ := r.json["key"].(string)
	if !keyPattern.MatchString(fresh) || fresh == old || r.json["gracePeriodHours"] != 24.0 || r.json["message"] == "" {
		t.Fatalf("rotate body %s", r.body)
	}
	detail := w.do(t, request{method: "GET", path: path, cookie: w.aliceCk}).json["key"].(map[string]any)
	if detail["rotatedAt"] != "2026-11-22T10:00:00Z" || detail["gracePeriodEndsAt"] != "2026-11-23T10:00:00Z" {
		t.Errorf("after rotate: rotatedAt %v, gracePeriodEndsAt %v", detail["rotatedAt"], detail["gracePeriodEndsAt"])
	}
	mustStatus(t, w.validate(t, old), 200, "")
	mustStatus(t, w.validate(t, fresh), 200, "")
	w.sys.clk.Advance(24*time.Hour + time.Second)
	if r := w.validate(t, old); r.status != 401 || r.json["error"] != codeKeyExpired {
		t.Errorf("old key after the grace period: %d %s", r.status, r.body)
	}
	mustStatus(t, w.validate(t, fresh), 200, "")

	mustStatus(t, w.do(t, request{method: "POST", path: path + "/revoke", cookie: w.aliceCk}), 200, "")
	mustStatus(t, w.do(t, request{method: "POST", path: path + "/rotate", cookie: w.aliceCk}), 400, codeKeyInactive)
}

func TestGracePeriodHoursFromConfig(t *testing.T) {
	w := newTestEnv(t, withWorld(), withConfig(func(c *Config) { c.GracePeriod = 48*time.Hour + 30*time.Minute }))
	id, _ := w.createKey(t, w.aliceCk, "rot")
	r := w.do(t, request{method: "POST", path: "/api/keys/" + id.String() + "/rotate", cookie: w.aliceCk})
	if r.json["gracePeriodHours"] != 48.0 {
		t.Errorf("gracePeriodHours = %v, want 48", r.json["gracePeriodHours"])
	}
}

func TestRevokeAndDeleteKey(t *testing.T) {
	w := newTestEnv(t, withWorld())
	id, secret := w.createKey(t, w.aliceCk, "rev")
	path := "/api/keys/" + id.String()

	r := w.do(t, request{method: "POST", path: path + "/revoke", cookie: w.aliceCk})
	mustStatus(t, r, 200, "")
	if r.json["success"] != true || r.json["message"] == "" {
		t.Errorf("revoke body %s", r.body)
	}
	if v := w.validate(t, secret); v.json["error"] != codeKeyRevoked {
		t.Errorf("validate revoked key = %s", v.body)
	}
	if d := w.do(t, request{method: "GET", path: path, cookie: w.aliceCk}); d.json["key"].(map[string]any)["isActive"] != false {
		t.Errorf("revoked key detail %s", d.body)
	}
	mustStatus(t, w.do(t, request{method: "POST", path: path + "/revoke", cookie: w.aliceCk}), 200, "")

	r = w.do(t, request{method: "DELETE", path: path, cookie: w.aliceCk})
	mustStatus(t, r, 200, "")
	if diff := cmp.Diff(map[string]any{"success": true}, r.json); diff != "" {
		t.Errorf("delete body (-want +got):\n%s", diff)
	}
	mustStatus(t, w.do(t, request{method: "GET", path: path, cookie: w.aliceCk}), 404, codeKeyNotFound)
	mustStatus(t, w.do(t, request{method: "DELETE", path: path, cookie: w.aliceCk}), 404, codeKeyNotFound)
	mustStatus(t, w.do(t, request{method: "POST", path: path + "/rotate", cookie: w.aliceCk}), 404, codeKeyNotFound)
}

func TestPatchKey(t *testing.T) {
	w := newTestEnv(t, withWorld())
	id, _ := w.createKey(t, w.aliceCk, "p")
	path := "/api/keys/" + id.String()
	tests := []struct {
		name   string
		cookie string
		body   string
		status int
		code   string
		check  func(k map[string]any) bool
	}{
		{"owner is not admin", w.aliceCk, `{"rateLimit":5}`, 403, codeForbidden, nil},
		{"other user", w.bobCk, `{"rateLimit":5}`, 403, codeForbidden, nil},
		{"no session", "", `{"rateLimit":5}`, 401, codeUnauthorized, nil},
		{"rate limit", w.adminCk, `{"rateLimit":5}`, 200, "", func(k map[string]any) bool { return k["rateLimit"] == 5.0 }},
		{"max rate limit", w.adminCk, `{"rateLimit":1000000000}`, 200, "", nil},
		{"zero", w.adminCk, `{"rateLimit":0}`, 400, codeValidation, nil},
		{"negative", w.adminCk, `{"rateLimit":-1}`, 400, codeValidation, nil},
		{"too big", w.adminCk, `{"rateLimit":1000000001}`, 400, codeValidation, nil},
		{"fraction", w.adminCk, `{"rateLimit":1.5}`, 400, codeValidation, nil},
		{"exponent", w.adminCk, `{"rateLimit":1e3}`, 400, codeValidation, nil},
		{"string", w.adminCk, `{"rateLimit":"5"}`, 400, codeValidation, nil},
		{"name", w.adminCk, `{"name":"renamed"}`, 200, "", func(k map[string]any) bool { return k["name"] == "renamed" }},
		{"name too long", w.adminCk, `{"name":"` + strings.Repeat("x", 101) + `"}`, 400, codeValidation, nil},
		{"name null", w.adminCk, `{"name":null}`, 400, codeValidation, nil},
		{"expiry", w.adminCk, `{"expiresAt":"2030-01-01T00:00:00+01:00"}`, 200, "",
			func(k map[string]any) bool { return k["expiresAt"] == "2029-12-31T23:00:00Z" }},
		{"clear expiry", w.adminCk, `{"expiresAt":null}`, 200, "", func(k map[string]any) bool { return k["expiresAt"] == nil }},
		{"past expiry", w.adminCk, `{"expiresAt":"2001-01-01T00:00:00Z"}`, 400, codeValidation, nil},
		{"empty patch", w.adminCk, `{}`, 400, codeValidation, nil},
		{"malformed", w.adminCk, `{"rateLimit":`, 400, codeInvalidJSON, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := w.do(t, request{method: "PATCH", path: path, body: tt.body, cookie: tt.cookie})
			mustStatus(t, r, tt.status, tt.code)
			if tt.check != nil && !tt.check(r.json["key"].(map[string]any)) {
				t.Errorf("PATCH %s: body %s", tt.body, r.body)
			}
		})
	}
	mustStatus(t, w.do(t, request{method: "PATCH", path: "/api/keys/00000000-0000-4000-8000-000000000000",
		body: `{"rateLimit":5}`, cookie: w.adminCk}), 404, codeKeyNotFound)
}

func TestKeyUsage(t *testing.T) {
	w := newTestEnv(t, withWorld())
	id, secret := w.createKey(t, w.aliceCk, "u")
	ctx := context.Background()
	w.sys.clk.Advance(-48 * time.Hour) // two requests two days ago
	for range 2 {
		w.sys.Authorize(ctx, []byte(secret))
	}
	w.sys.clk.Advance(48 * time.Hour)
	for range 3 {
		w.sys.Authorize(ctx, []byte(secret))
	}
	// the three requests of now leave the sliding window in an hour
	resetAt := w.sys.clk.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	path := "/api/keys/" + id.String() + "/usage"
	tests := []struct {
		query  string
		status int
		days   int
	}{
		{"", 200, 7}, {"?days=1", 200, 1}, {"?days=30", 200, 30}, {"?days=3", 200, 3},
		{"?days=0", 400, 0}, {"?days=31", 400, 0}, {"?days=abc", 400, 0},
		{"?days=", 400, 0}, {"?days=-1", 400, 0}, {"?days=1.5", 400, 0},
	}
	for _, tt := range tests {
		t.Run("days"+tt.query, func(t *testing.T) {
			r := w.do(t, request{method: "GET", path: path + tt.query, cookie: w.aliceCk})
			if tt.status != 200 {
				mustStatus(t, r, tt.status, codeValidation)
				return
			}
			mustStatus(t, r, 200, "")
			daily := r.json["dailyUsage"].([]any)
			if len(daily) != tt.days {
				t.Fatalf("dailyUsage has %d entries, want %d", len(daily), tt.days)
			}
			if last := daily[len(daily)-1].(map[string]any); last["date"] != "2026-11-22" || last["count"] != 3.0 {
				t.Errorf("today = %v", last)
			}
			if tt.days >= 3 {
				if d := daily[len(daily)-3].(map[string]any); d["date"] != "2026-11-20" || d["count"] != 2.0 {
					t.Errorf("two days ago = %v", d)
				}
			}
			want := map[string]any{"limit": 1000.0, "used": 3.0, "remaining": 997.0, "windowHours": 1.0, "resetAt": resetAt}
			if diff := cmp.Diff(want, r.json["rateLimit"]); diff != "" || r.json["totalUsageCount"] != 5.0 {
				t.Errorf("rateLimit (-want +got):\n%s total %v", diff, r.json["totalUsageCount"])
			}
		})
	}
}

// TestAdminKeyLimitOutlivesKey (issue 21, 13): an admin's limit on a
// user's key is the user's key limit from then on, shown on the user:
// deleting the key and creating another does not escape it; an admin sets
// it back to the plan's with null.
func TestAdminKeyLimitOutlivesKey(t *testing.T) {
	w := newTestEnv(t, withWorld())
	id, _ := w.createKey(t, w.aliceCk, "k1")
	mustStatus(t, w.do(t, request{method: "PATCH", path: "/api/keys/" + id.String(), body: `{"rateLimit":10}`, cookie: w.adminCk}), 200, "")
	mustStatus(t, w.do(t, request{method: "DELETE", path: "/api/keys/" + id.String(), cookie: w.aliceCk}), 200, "")
	limitOf := func(id uuid.UUID) any {
		t.Helper()
		r := w.do(t, request{method: "GET", path: "/api/keys/" + id.String(), cookie: w.aliceCk})
		mustStatus(t, r, 200, "")
		return r.json["key"].(map[string]any)["rateLimit"]
	}
	id2, _ := w.createKey(t, w.aliceCk, "k2")
	if got := limitOf(id2); got != 10.0 {
		t.Errorf("a new key after the admin's limit = rateLimit %v, want 10", got)
	}
	r := w.do(t, request{method: "GET", path: "/api/users", cookie: w.adminCk})
	mustStatus(t, r, 200, "")
	if !strings.Contains(string(r.body), `"keyRateLimit":10`) {
		t.Errorf("users = %s, want alice's keyRateLimit 10", r.body)
	}
	mustStatus(t, w.do(t, request{method: "PATCH", path: "/api/users/" + w.alice.ID.String(), body: `{"keyRateLimit":null}`, cookie: w.adminCk}), 200, "")
	id3, _ := w.createKey(t, w.aliceCk, "k3")
	if got := limitOf(id3); got == 10.0 {
		t.Errorf("after the admin cleared it, a new key = rateLimit %v, want the plan's", got)
	}
	mustStatus(t, w.do(t, request{method: "PATCH", path: "/api/users/" + w.alice.ID.String(), body: `{"keyRateLimit":-1}`, cookie: w.adminCk}), 400, "VALIDATION_ERROR")
}

// TestAdminKeyLimitRaiseIsThatKeys (issue 31): an admin's higher limit on
// one key (a load test) is that key's alone: the user's later keys keep
// their limit; a lower one still caps them, and a higher one after it
// does not lift the cap.
func TestAdminKeyLimitRaiseIsThatKeys(t *testing.T) {
	w := newTestEnv(t, withWorld())
	limitOf := func(id uuid.UUID) any {
		t.Helper()
		r := w.do(t, request{method: "GET", path: "/api/keys/" + id.String(), cookie: w.aliceCk})
		mustStatus(t, r, 200, "")
		return r.json["key"].(map[string]any)["rateLimit"]
	}
	keyLimit := func() any {
		t.Helper()
		r := w.do(t, request{method: "GET", path: "/api/users", cookie: w.adminCk})
		mustStatus(t, r, 200, "")
		for _, u := range r.json["users"].([]any) {
			if u := u.(map[string]any); u["id"] == w.alice.ID.String() {
				return u["keyRateLimit"]
			}
		}
		t.Fatal("alice not listed")
		return nil
	}
	patch := func(id uuid.UUID, limit int) {
		t.Helper()
		mustStatus(t, w.do(t, request{method: "PATCH", path: "/api/keys/" + id.String(), body: fmt.Sprintf(`{"rateLimit":%d}`, limit), cookie: w.adminCk}), 200, "")
	}
	plan, _ := w.createKey(t, w.aliceCk, "before")
	planLimit := limitOf(plan)
	load, _ := w.createKey(t, w.aliceCk, "load test")
	patch(load, 1_000_000)
	if got := limitOf(load); got != 1_000_000.0 {
		t.Errorf("the raised key = rateLimit %v, want 1000000", got)
	}
	if got := keyLimit(); got != nil {
		t.Errorf("alice's keyRateLimit after a raise = %v, want null", got)
	}
	later, _ := w.createKey(t, w.aliceCk, "later")
	if got := limitOf(later); got != planLimit {
		t.Errorf("a key created after the raise = rateLimit %v, want the plan's %v", got, planLimit)
	}
	patch(later, 10)
	patch(plan, 500)
	if got := keyLimit(); got != 10.0 {
		t.Errorf("alice's keyRateLimit after a lower then a higher limit = %v, want 10", got)
	}
	last, _ := w.createKey(t, w.aliceCk, "last")
	if got := limitOf(last); got != 10.0 {
		t.Errorf("a key after the lowered limit = rateLimit %v, want 10", got)
	}
	if got := limitOf(plan); got != 500.0 {
		t.Errorf("the key raised to 500 = rateLimit %v", got)
	}
}
