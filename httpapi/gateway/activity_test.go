package gateway

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestActivityLog: every change made through the API, and nothing else,
// has an entry naming its author (the token, or the API key's id: never a
// secret); refused changes and reads leave none; only admins read it.
func TestActivityLog(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	alice := []string{"X-Gateway-User-Id", "alice"}
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo","api_key":"sk-echo-secret-123"}`)
	a1 := e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"a1","provider":"echo","model":"m"}`, alice...).body["id"].(string)
	key := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"bob","scopes":["operator.write"],"user_id":"bob"}`).body
	bobKey, bobKeyID := key["key"].(string), key["id"].(string)
	e.must(201, "POST", "/v1/agents", bobKey, `{"agent_key":"b1","provider":"echo","model":"m"}`)
	e.must(201, "POST", "/v1/agents/a1/sharing", gwToken, `{"user_id":"bob","role":"user"}`, alice...)
	e.must(200, "PUT", "/v1/agents/a1", gwToken, `{"system_prompt":"be kind"}`, alice...)
	e.must(200, "PUT", "/v1/agents/a1/instances/alice/files/USER.md", gwToken, `{"content":"I like tea"}`, alice...)
	// Refused changes and reads: no entries.
	e.must(412, "DELETE", "/v1/providers/echo", gwToken, "")
	e.must(400, "POST", "/v1/agents", gwToken, `{"agent_key":"Bad Key"}`, alice...)
	e.must(200, "GET", "/v1/agents", gwToken, "", alice...)
	e.must(403, "POST", "/v1/providers", bobKey, `{"name":"x","provider_type":"echo"}`)
	e.must(204, "DELETE", "/v1/agents/a1/sharing/bob", gwToken, "", alice...)
	e.must(204, "DELETE", "/v1/api-keys/"+bobKeyID, gwToken, "")

	r := e.must(200, "GET", "/v1/activity", gwToken, "").body
	var got []string
	for _, x := range r["data"].([]any) {
		a := x.(map[string]any)
		got = append(got, a["action"].(string)+" by "+a["actor_type"].(string)+":"+a["actor_id"].(string)+" for "+a["user_id"].(string))
		if a["ip"] != "127.0.0.1" || a["id"] == "" || a["at"] == "" || a["summary"] == "" {
			t.Errorf("entry = %v", a)
		}
	}
	want := []string{
		"api_key.revoke by token:gateway_token for ",
		"agent.unshare by token:gateway_token for alice",
		"user_file.update by token:gateway_token for alice",
		"agent.update by token:gateway_token for alice",
		"agent.share by token:gateway_token for alice",
		"agent.create by api_key:" + bobKeyID + " for bob",
		"api_key.create by token:gateway_token for ",
		"agent.create by token:gateway_token for alice",
		"provider.create by token:gateway_token for ",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("activity (-want +got):\n%s", diff)
	}
	if r["total"] != float64(len(want)) {
		t.Errorf("total = %v", r["total"])
	}
	if strings.Contains(e.must(200, "GET", "/v1/activity", gwToken, "").raw, "sk-echo-secret-123") ||
		strings.Contains(e.must(200, "GET", "/v1/activity", gwToken, "").raw, bobKey) {
		t.Error("a secret reached the activity log")
	}

	r = e.must(200, "GET", "/v1/activity?actor_id="+bobKeyID, gwToken, "").body
	if r["total"] != 1.0 {
		t.Errorf("bob's key's entries = %v", r)
	}
	r = e.must(200, "GET", "/v1/activity?entity_id="+a1+"&limit=2&offset=1", gwToken, "").body
	if r["total"] != 5.0 || len(r["data"].([]any)) != 2 || r["data"].([]any)[0].(map[string]any)["action"] != "user_file.update" {
		t.Errorf("a1's entries, page 2 = %v", r)
	}
	readKey := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"r","scopes":["operator.write"],"user_id":"carol"}`).body["key"].(string)
	e.must(403, "GET", "/v1/activity", readKey, "")
	e.must(400, "GET", "/v1/activity?from=yesterday", gwToken, "")
	// Refused credentials are counted, not logged.
	e.must(401, "GET", "/v1/agents", "gateway_0123456789abcdef0123456789abcdef", "")
	m := e.must(200, "GET", "/metrics", gwToken, "").raw
	for _, want := range []string{`gatehouse_gateway_auth_failures_total{reason="invalid"} 1`, `gatehouse_gateway_auth_failures_total{reason="scope"} 2`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if r := e.must(200, "GET", "/v1/activity", gwToken, "").body; r["total"] != float64(len(want)+1) { // + the read key's creation
		t.Errorf("total after refused requests = %v", r["total"])
	}
}
