package main

import (
	"strings"
	"testing"
)

func TestGatewayEmptyTokenNeedsLoopback(t *testing.T) {
	tests := []struct {
		host, token string
		ok          bool
	}{
		{"127.0.0.1", "", true},
		{"::1", "", true},
		{"localhost", "", true},
		{"0.0.0.0", "", false},
		{"192.0.2.1", "", false},
		{"0.0.0.0", "s3cret", true},
	}
	for _, tt := range tests {
		c := defaultConfig()
		c.Gateway.Host, c.Gateway.Token = tt.host, tt.token
		err := c.validate()
		if (err == nil) != tt.ok || err != nil && !strings.Contains(err.Error(), "gateway.token") {
			t.Errorf("validate(host %q, token %q) = %v, want ok %v (naming gateway.token)", tt.host, tt.token, err, tt.ok)
		}
	}
}

// TestGatewayCrashRestart: the real binary keeps providers, agents, API
// keys and usage across kill -9.
func TestGatewayCrashRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, map[string]any{
		"gateway":  map[string]any{"host": "127.0.0.1", "port": 0, "token": "gw-admin"},
		"snapshot": map[string]any{"every_records": 0, "interval": "0s", "retain": 2},
	})
	admin := map[string]string{"Authorization": "Bearer gw-admin", "X-Gateway-User-Id": "alice"}
	c := startChild(t, cfg)
	gc := newClient(c.gateway)
	var key struct{ Key string }
	steps := []struct {
		method, path string
		body         any
		want         int
		out          any
	}{
		{"POST", "/v1/providers", map[string]any{"name": "echo", "provider_type": "echo", "api_key": "sk-echo-unused-1234"}, 201, nil},
		{"POST", "/v1/agents", map[string]any{"agent_key": "default", "provider": "echo", "model": "m"}, 201, nil},
		{"POST", "/v1/api-keys", map[string]any{"name": "ci", "scopes": []string{"operator.write"}, "user_id": "alice"}, 201, &key},
		{"POST", "/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "hello"}}}, 200, nil},
	}
	for _, s := range steps {
		if code, err := gc.do(s.method, s.path, s.body, admin, s.out); code != s.want || err != nil {
			t.Fatalf("%s %s = %d, %v", s.method, s.path, code, err)
		}
	}
	c.kill()
	c = startChild(t, cfg)
	gc = newClient(c.gateway)
	var agent struct{ Status string }
	if code, err := gc.do("GET", "/v1/agents/default", nil, admin, &agent); code != 200 || err != nil || agent.Status != "active" {
		t.Fatalf("agent after crash = %d %+v %v", code, agent, err)
	}
	var out struct {
		Choices []struct{ Message struct{ Content string } }
	}
	withKey := map[string]string{"Authorization": "Bearer " + key.Key}
	body := map[string]any{"model": "agent:default", "messages": []map[string]string{{"role": "user", "content": "again"}}}
	if code, err := gc.do("POST", "/v1/chat/completions", body, withKey, &out); code != 200 || err != nil || len(out.Choices) != 1 || out.Choices[0].Message.Content != "echo: again" {
		t.Fatalf("chat with the API key after crash = %d %+v %v", code, out, err)
	}
	c.stop(t)
}
