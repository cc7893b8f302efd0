package gateway

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestInstancesAndUserFiles: an instance per (agent, user) from the user's
// first run; USER.md written only by its user, only that name; it reaches
// the provider in that user's runs and nobody else's.
func TestInstancesAndUserFiles(t *testing.T) {
	st, up := newStub(t)
	e := newGWEnv(t, gwOpts{token: gwToken})
	seedStubAgent(e, up.URL, 30) // "default", owned by alice
	e.must(201, "POST", "/v1/agents/default/sharing", gwToken, `{"user_id":"bob"}`, as("alice")...)
	chat := `{"model":"agent:default","messages":[{"role":"user","content":"hi"}]}`
	files := "/v1/agents/default/instances/bob/files"

	e.must(200, "PUT", files+"/USER.md", gwToken, "Bob likes haiku.", as("bob")...)
	r := e.must(200, "GET", files, gwToken, "", as("bob")...)
	if !strings.Contains(r.raw, `"name":"USER.md","size":16,"editable":true`) || !strings.Contains(r.raw, `"name":"SYSTEM.md"`) {
		t.Errorf("bob's files = %s", r.raw)
	}
	e.must(200, "PUT", files+"/USER.md", gwToken, `{"content":"Bob likes haiku, in English."}`, as("bob")...)
	e.must(200, "GET", files, gwToken, "", as("alice")...) // the owner may read
	for _, tc := range []struct {
		name, user, path, body string
		want                   int
	}{
		{"the owner writing bob's file", "alice", files + "/USER.md", "x", 403},
		{"another file name", "bob", files + "/SOUL.md", "x", 403},
		{"too large", "bob", files + "/USER.md", strings.Repeat("x", 32<<10+1), 400},
		{"a stranger", "mallory", "/v1/agents/default/instances/mallory/files/USER.md", "x", 404},
	} {
		t.Run(tc.name, func(t *testing.T) { e.must(tc.want, "PUT", tc.path, gwToken, tc.body, as(tc.user)...) })
	}
	e.must(403, "GET", "/v1/agents/default/instances/alice/files", gwToken, "", as("bob")...)

	for _, u := range []string{"bob", "alice"} {
		e.must(200, "POST", "/v1/chat/completions", gwToken, chat, as(u)...)
	}
	st.mu.Lock()
	bodies := st.bodies
	st.mu.Unlock()
	if len(bodies) != 2 {
		t.Fatalf("upstream saw %d requests", len(bodies))
	}
	if m := fmt.Sprint(bodies[0]["messages"]); !strings.Contains(m, "Bob likes haiku, in English.") {
		t.Errorf("bob's run lacks his USER.md: %s", m)
	}
	if m := fmt.Sprint(bodies[1]["messages"]); strings.Contains(m, "haiku") {
		t.Errorf("alice's run carries bob's USER.md: %s", m)
	}

	// Instances come from the run records: wait for them to commit.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r = e.must(200, "GET", "/v1/agents/default/instances", gwToken, "", as("alice")...)
		if len(r.body["data"].([]any)) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(r.body["data"].([]any)); n != 2 || !strings.Contains(r.raw, `"runs":1`) {
		t.Errorf("the owner's instances = %s, want alice's and bob's", r.raw)
	}
	r = e.must(200, "GET", "/v1/agents/default/instances", gwToken, "", as("bob")...)
	if d := r.body["data"].([]any); len(d) != 1 || d[0].(map[string]any)["user_id"] != "bob" {
		t.Errorf("bob's view of the instances = %s, want his own only", r.raw)
	}
}
