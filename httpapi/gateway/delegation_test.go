package gateway

import (
	"strings"
	"testing"
)

// TestDelegationAndMemory: an agent delegates to another agent its user
// may use (recorded, with the delegate's trace), never to a stranger's
// agent nor around a cycle; memory_search finds the run's user's entries
// and never another user's.
func TestDelegationAndMemory(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo","settings":{"delay_ms":0}}`)
	for _, a := range []struct{ key, user string }{{"lead", "alice"}, {"helper", "alice"}, {"private", "bob"}} {
		e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"`+a.key+`","provider":"echo","model":"m"}`, "X-Gateway-User-Id", a.user)
	}
	alice := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"a","scopes":["operator.write"],"user_id":"alice"}`).body["key"].(string)
	bob := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"b","scopes":["operator.write"],"user_id":"bob"}`).body["key"].(string)
	if got := e.chat(alice, "lead", `/tool delegate {"agent":"helper","task":"say hi"}`); got != "echo: echo: say hi" {
		t.Errorf("delegated answer = %q", got)
	}
	if got := e.chat(alice, "lead", `/tool delegate {"agent":"private","task":"x"}`); !strings.Contains(got, `error: no agent "private"`) {
		t.Errorf("delegating to bob's agent = %q", got)
	}
	inner := `/tool delegate {\"agent\":\"lead\",\"task\":\"loop\"}`
	if got := e.chat(alice, "lead", `/tool delegate {"agent":"helper","task":"`+inner+`"}`); !strings.Contains(got, "delegation cycle") {
		t.Errorf("a cycle = %q", got)
	}
	// Recorded: the two that ran (the cycle was refused inside the second,
	// whose run answered with the refusal); none for bob's agent.
	r := e.must(200, "GET", "/v1/delegations?status=ok", alice, "").body
	ds := r["data"].([]any)
	if r["total"] != 2.0 {
		t.Fatalf("delegations = %v", r)
	}
	d := ds[1].(map[string]any) // oldest last
	if d["result"] != "echo: say hi" || d["user_id"] != "alice" || d["task"] != "say hi" {
		t.Errorf("delegation = %v", d)
	}
	waitTraces(t, e, 5)
	e.must(200, "GET", "/v1/traces/"+d["trace_id"].(string), alice, "")
	e.must(200, "GET", "/v1/delegations/"+d["id"].(string), alice, "")
	e.must(404, "GET", "/v1/delegations/"+d["id"].(string), bob, "")
	if r := e.must(200, "GET", "/v1/delegations", bob, "").body; r["total"] != 0.0 {
		t.Errorf("bob sees %v", r)
	}
	if all := e.must(200, "GET", "/v1/delegations", gwToken, "").body; all["total"] != 2.0 {
		t.Errorf("all delegations = %v", all)
	}

	// Memory.
	e.must(201, "POST", "/v1/memory", alice, `{"content":"Alice likes green tea","agent_id":"lead","tags":["drinks"]}`)
	bobs := e.must(201, "POST", "/v1/memory", bob, `{"content":"Bob likes tea too"}`).body["id"].(string)
	e.must(403, "POST", "/v1/memory", bob, `{"content":"x","user_id":"alice"}`)
	e.must(400, "POST", "/v1/memory", alice, `{"content":""}`)
	got := e.chat(alice, "lead", `/tool memory_search {"query":"tea"}`)
	if !strings.Contains(got, "green") || strings.Contains(got, "Bob") {
		t.Errorf("alice's memory_search = %q", got)
	}
	if got := e.chat(alice, "lead", `/tool memory_save {"content":"Alice's birthday is in May"}`); !strings.Contains(got, "saved") {
		t.Errorf("memory_save = %q", got)
	}
	if r := e.must(200, "GET", "/v1/memory?q=birthday", alice, "").body; r["total"] != 1.0 {
		t.Errorf("alice's search = %v", r)
	}
	if r := e.must(200, "GET", "/v1/memory", gwToken, "").body; r["total"] != 3.0 {
		t.Errorf("all memory = %v", r)
	}
	e.must(404, "DELETE", "/v1/memory/"+bobs, alice, "")
	e.must(204, "DELETE", "/v1/memory/"+bobs, bob, "")
}
