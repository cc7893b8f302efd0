package main

import (
	"testing"
)

// TestEndToEndAutomation runs the binary: an admin's access token adds a
// service through the API (an upstream credential in its headers),
// creates a key limited to it, and everything survives a restart (the
// token, the service, the key's list) after a kill -9 as after a clean
// stop; then the data dir is scanned for the token and the credential.
func TestEndToEndAutomation(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	up := upstream(t)
	dataDir := t.TempDir()
	cfg := writeConfig(t, dataDir, map[string]any{"services": map[string]any{"stub": map[string]any{"upstream": up}}})
	c := startChild(t, cfg)
	admin := newClientLoggedIn(t, c.api, adminEmail, adminPassword)
	var tok struct{ Token string }
	expect(t, "create token", 201)(admin.do("POST", "/api/tokens", map[string]any{"name": "bot", "scopes": []string{"admin"}}, nil, &tok))
	const credential = "upstream-credential-0123456789"
	bot := newClient(c.api) // no cookie from here on
	auth := map[string]string{"Authorization": "Bearer " + tok.Token}
	expect(t, "create service", 201)(bot.do("POST", "/api/services", map[string]any{
		"name": "api-svc", "upstream": up, "headers": map[string]string{"X-Upstream-Auth": credential},
	}, auth, nil))
	expect(t, "config service is read-only", 409)(bot.do("DELETE", "/api/services/stub", nil, auth, nil))
	var k createdKey
	expect(t, "create limited key", 201)(bot.do("POST", "/api/keys", map[string]any{"name": "k", "services": []string{"api-svc"}}, auth, &k))
	key := map[string]string{"X-API-Key": k.Key}
	expect(t, "proxy to the API's service", 200)(bot.do("GET", "/api/proxy/api-svc/v1/x", nil, key, nil))
	expect(t, "proxy to another service", 403)(bot.do("GET", "/api/proxy/stub/v1/x", nil, key, nil))
	expect(t, "the key is not a management credential", 401)(bot.do("GET", "/api/keys", nil, map[string]string{"Authorization": "Bearer " + k.Key}, nil))

	for _, crash := range []bool{true, false} {
		if crash {
			c.kill()
		} else {
			c.stop(t)
		}
		c = startChild(t, cfg)
		bot.base = c.api
		expect(t, "token after restart", 200)(bot.do("GET", "/api/services/api-svc", nil, auth, nil))
		expect(t, "service after restart", 200)(bot.do("GET", "/api/proxy/api-svc/v1/x", nil, key, nil))
		expect(t, "key's list after restart", 403)(bot.do("GET", "/api/proxy/stub/v1/x", nil, key, nil))
	}
	c.stop(t)
	scanForSecrets(t, dataDir, tok.Token, credential, k.Key)
}
