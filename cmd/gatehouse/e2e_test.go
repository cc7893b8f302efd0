package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestEndToEnd walks the README's curl walk-through against the real
// binary, restarts it, and scans the data dir for secrets.
func TestEndToEnd(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	up := upstream(t)
	dataDir := t.TempDir()
	cfg := writeConfig(t, dataDir, map[string]any{"services": map[string]any{"stub": map[string]any{"upstream": up}}})
	c := startChild(t, cfg)
	admin := newClient(c.api)
	admin.login(t, adminEmail, adminPassword)
	const userPassword = "user-password-1"
	var created struct{ ID string }
	expect(t, "create user", 201)(admin.do("POST", "/api/users", map[string]any{
		"email": "dev@example.com", "password": userPassword, "plan": "standard", "licenseActive": true,
	}, nil, &created))
	user := newClient(c.api)
	user.login(t, "dev@example.com", userPassword)

	var k createdKey
	expect(t, "create key", 201)(user.do("POST", "/api/keys", map[string]string{"name": "ci"}, nil, &k))
	hdr := map[string]string{"X-API-Key": k.Key}
	expect(t, "validate", 200)(user.do("POST", "/api/keys/validate", nil, hdr, nil))
	expect(t, "validate bearer", 200)(user.do("POST", "/api/keys/validate", nil, map[string]string{"Authorization": "Bearer " + k.Key}, nil))
	for range 3 {
		expect(t, "proxy", 200)(user.do("GET", "/api/proxy/stub/v1/models", nil, hdr, nil))
	}
	var use struct {
		DailyUsage      []struct{ Count int64 }
		TotalUsageCount int64
		RateLimit       struct{ Limit, Used, Remaining int64 }
	}
	expect(t, "usage", 200)(user.do("GET", "/api/keys/"+k.ID+"/usage", nil, nil, &use))
	if len(use.DailyUsage) != 7 || use.TotalUsageCount != 3 || use.RateLimit.Used != 3 || use.RateLimit.Limit != 1000 {
		t.Errorf("usage = %+v", use)
	}
	expect(t, "patch limit", 200)(admin.do("PATCH", "/api/keys/"+k.ID, map[string]any{"rateLimit": 4}, nil, nil))
	expect(t, "proxy 4th", 200)(user.do("GET", "/api/proxy/stub/v1/models", nil, hdr, nil))
	expect(t, "proxy over limit", 429)(user.do("GET", "/api/proxy/stub/v1/models", nil, hdr, nil))

	var rot struct{ Key string }
	expect(t, "rotate", 200)(user.do("POST", "/api/keys/"+k.ID+"/rotate", nil, nil, &rot))
	expect(t, "validate new", 200)(user.do("POST", "/api/keys/validate", nil, map[string]string{"X-API-Key": rot.Key}, nil))
	expect(t, "validate old in grace", 200)(user.do("POST", "/api/keys/validate", nil, hdr, nil))
	expect(t, "create second user", 201)(admin.do("POST", "/api/users", map[string]any{
		"email": "other@example.com", "password": userPassword, "plan": "premium", "licenseActive": false,
	}, nil, nil))
	other := newClientLoggedIn(t, c.api, "other@example.com", userPassword)
	expect(t, "another user's key", 404)(other.do("GET", "/api/keys/"+k.ID, nil, nil, nil))
	expect(t, "create without license", 403)(other.do("POST", "/api/keys", map[string]string{"name": "x"}, nil, nil))

	c.stop(t)
	c = startChild(t, cfg)
	user.base = c.api
	var d keyDetail
	expect(t, "session survives restart", 200)(user.do("GET", "/api/keys/"+k.ID, nil, nil, &d))
	if d.Key.UsageCount != 4 || d.Key.RateLimit != 4 || !d.Key.IsActive {
		t.Errorf("after restart key = %+v, want usage 4, limit 4, active", d.Key)
	}
	expect(t, "still limited after restart", 429)(user.do("GET", "/api/proxy/stub/v1/models", nil, map[string]string{"X-API-Key": rot.Key}, nil))
	expect(t, "revoke", 200)(user.do("POST", "/api/keys/"+k.ID+"/revoke", nil, nil, nil))
	var v struct {
		Valid bool
		Error string
	}
	expect(t, "validate revoked", 401)(user.do("POST", "/api/keys/validate", nil, hdr, &v))
	if v.Valid || v.Error != "KEY_REVOKED" {
		t.Errorf("validate revoked = %+v", v)
	}
	c.stop(t)
	scanForSecrets(t, dataDir, k.Key, rot.Key, userPassword, adminPassword)
}

func newClientLoggedIn(tb testing.TB, base, email, password string) *client {
	tb.Helper()
	c := newClient(base)
	c.login(tb, email, password)
	return c
}

// expect returns a checker for client.do's results.
func expect(tb testing.TB, what string, want int) func(int, error) {
	tb.Helper()
	return func(got int, err error) {
		tb.Helper()
		if err != nil || got != want {
			tb.Fatalf("%s = %d, %v; want %d", what, got, err, want)
		}
	}
}

// scanForSecrets fails if any file under dir contains one of the secrets.
func scanForSecrets(tb testing.TB, dir string, secrets ...string) {
	tb.Helper()
	files := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) || bytes.Contains(b, []byte(s[max(0, len(s)-16):])) {
				tb.Errorf("%s contains a secret in plaintext", path)
			}
		}
		return nil
	})
	if err != nil || files < 3 {
		tb.Fatalf("scan %s: %d files, %v", dir, files, err)
	}
}
