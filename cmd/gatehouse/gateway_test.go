package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
)

func TestGatewayEmptyTokenNeedsLoopback(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	tests := []struct {
		host, token string
		ok          bool
	}{
		{"127.0.0.1", "", true},
		{"::1", "", true},
		{"localhost", "", true},
		{"0.0.0.0", "", false},
		{"192.0.2.1", "", false},
		{"0.0.0.0", "s3cret", false}, // too short off loopback
		{"0.0.0.0", strings.Repeat("k", 32), true},
		{"127.0.0.1", "s3cret", true},
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
	// Issue 9's state: a share, a USER.md, an instance (the chat above), a
	// session turn over the WebSocket RPC.
	for _, s := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"POST", "/v1/agents/default/sharing", map[string]any{"user_id": "bob", "role": "operator"}, 201},
		{"PUT", "/v1/agents/default/instances/alice/files/USER.md", map[string]any{"content": "Alice likes tea."}, 200},
	} {
		if code, err := gc.do(s.method, s.path, s.body, admin, nil); code != s.want || err != nil {
			t.Fatalf("%s %s = %d, %v", s.method, s.path, code, err)
		}
	}
	wsTurn(t, c.gateway, "gw-admin", "alice", "s1", "hello session")
	// Usage, traces and the activity log are exact after kill -9. Runs are
	// logged just after their answer: wait for both (the chat, the turn).
	observed := func() string {
		t.Helper()
		var b strings.Builder
		for _, path := range []string{"/v1/usage/summary?period=today", "/v1/usage?granularity=hour", "/v1/traces", "/v1/activity"} {
			var v any
			if code, err := gc.do("GET", path, nil, admin, &v); code != 200 || err != nil {
				t.Fatalf("GET %s = %d, %v", path, code, err)
			}
			fmt.Fprintf(&b, "%s %v\n", path, v)
		}
		return b.String()
	}
	if !eventually(5*time.Second, func() bool {
		var tr struct{ Total int }
		_, err := gc.do("GET", "/v1/traces", nil, admin, &tr)
		return err == nil && tr.Total >= 2
	}) {
		t.Fatal("the runs were not recorded")
	}
	before := observed()
	if !strings.Contains(before, "agent.share") || !strings.Contains(before, "chat.send") {
		t.Fatalf("before the crash:\n%s", before)
	}
	c.kill()
	c = startChild(t, cfg)
	gc = newClient(c.gateway)
	if after := observed(); after != before {
		t.Errorf("usage, traces or activity changed across kill -9:\nbefore:\n%s\nafter:\n%s", before, after)
	}
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
	var shares struct {
		Data []struct{ UserID, Role string }
	}
	if code, err := gc.do("GET", "/v1/agents/default/sharing", nil, admin, &shares); code != 200 || err != nil ||
		len(shares.Data) != 1 || shares.Data[0].Role != "operator" {
		t.Errorf("shares after crash = %d %+v %v", code, shares, err)
	}
	var files struct {
		Data []struct{ Name, Content string }
	}
	if code, err := gc.do("GET", "/v1/agents/default/instances/alice/files", nil, admin, &files); code != 200 || err != nil ||
		len(files.Data) != 2 || files.Data[1].Content != "Alice likes tea." {
		t.Errorf("USER.md after crash = %d %+v %v", code, files, err)
	}
	var inst struct{ Data []struct{ UserID string } }
	if code, err := gc.do("GET", "/v1/agents/default/instances", nil, admin, &inst); code != 200 || err != nil || len(inst.Data) == 0 {
		t.Errorf("instances after crash = %d %+v %v", code, inst, err)
	}
	var sess struct {
		Total int
		Data  []struct {
			Key          string
			MessageCount int `json:"message_count"`
		}
	}
	if code, err := gc.do("GET", "/v1/sessions", nil, admin, &sess); code != 200 || err != nil || sess.Total != 1 || sess.Data[0].MessageCount != 2 {
		t.Errorf("sessions after crash = %d %+v %v", code, sess, err)
	}
	c.stop(t)
}

// wsTurn runs one chat.send over the gateway's WebSocket RPC and waits for
// its answer.
func wsTurn(t *testing.T, base, token, user, session, message string) {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/ws", nil)
	if err != nil {
		t.Fatalf("dial ws: %v", err)
	}
	_ = resp.Body.Close()
	defer ws.Close()
	send := func(id, method string, params any) {
		if err := ws.WriteJSON(map[string]any{"type": "req", "id": id, "method": method, "params": params}); err != nil {
			t.Fatal(err)
		}
	}
	send("1", "connect", map[string]any{"token": token, "user_id": user})
	send("2", "chat.send", map[string]any{"agentId": "default", "sessionKey": session, "message": message})
	_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		var f struct {
			Type, ID string
			OK       bool
			Error    any
		}
		if err := ws.ReadJSON(&f); err != nil {
			t.Fatalf("ws read: %v", err)
		}
		if f.Type != "res" {
			continue
		}
		if !f.OK {
			t.Fatalf("ws %s = %+v", f.ID, f.Error)
		}
		if f.ID == "2" {
			return
		}
	}
}
