package gateway

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"gatehouse/actors/gateway"
)

// TestUserBinding: a read or write key acts for the user it was created
// for and nobody else; the gateway token and admin keys are trusted
// backends that act for the user they name. Ownership and sharing hold on
// every agent operation, runs included, and each credential's bucket is
// its own.
func TestUserBinding(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo"}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"alices","provider":"echo","model":"m","system_prompt":"alice's secret prompt"}`, as("alice")...)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"bobs","provider":"echo","model":"m","system_prompt":"bob's secret prompt"}`, as("bob")...)
	key := func(name, scope, user string) string {
		body := `{"name":"` + name + `","scopes":["` + scope + `"]`
		if user != "" {
			body += `,"user_id":"` + user + `"`
		}
		r := e.must(201, "POST", "/v1/api-keys", gwToken, body+`}`)
		if got := r.body["user_id"]; got != user {
			t.Fatalf("created key user_id = %v, want %q", got, user)
		}
		return r.body["key"].(string)
	}
	readA, writeA, admin := key("ra", "operator.read", "alice"), key("wa", "operator.write", "alice"), key("adm", "operator.admin", "")

	chat := func(agent, user string) string {
		body := `{"model":"agent:` + agent + `","messages":[{"role":"user","content":"hi"}]`
		if user != "" {
			body += `,"user":"` + user + `"`
		}
		return body + `}`
	}
	tests := []struct {
		name, token, method, path, body string
		hdr                             []string
		want                            int
	}{
		{"read key as another user", readA, "GET", "/v1/agents", "", as("bob"), 403},
		{"read key as its user", readA, "GET", "/v1/agents", "", as("alice"), 200},
		{"read key, no header: its user", readA, "GET", "/v1/agents/alices", "", nil, 200},
		{"read key cannot see bob's agent", readA, "GET", "/v1/agents/bobs", "", nil, 404},
		{"write key cannot update bob's agent", writeA, "PUT", "/v1/agents/bobs", `{"system_prompt":"x"}`, nil, 404},
		{"write key cannot delete as bob", writeA, "DELETE", "/v1/agents/bobs", "", as("bob"), 403},
		{"write key cannot chat with bob's agent", writeA, "POST", "/v1/chat/completions", chat("bobs", ""), nil, 404},
		{"write key cannot respond with bob's agent", writeA, "POST", "/v1/responses", `{"model":"agent:bobs","input":"hi"}`, nil, 404},
		{"write key cannot name bob in the body", writeA, "POST", "/v1/chat/completions", chat("alices", "bob"), nil, 403},
		{"write key cannot wake bob's agent", writeA, "POST", "/v1/agents/bobs/wake", `{"message":"hi"}`, nil, 404},
		{"write key chats with its user's agent", writeA, "POST", "/v1/chat/completions", chat("alices", ""), nil, 200},
		{"admin key acts for bob", admin, "GET", "/v1/agents/bobs", "", as("bob"), 200},
		{"admin key as bob cannot run alice's agent", admin, "POST", "/v1/chat/completions", chat("alices", ""), as("bob"), 404},
		{"admin key for nobody runs any agent", admin, "POST", "/v1/chat/completions", chat("bobs", ""), nil, 200},
		{"token as bob, body user ignored", gwToken, "POST", "/v1/chat/completions", chat("bobs", "alice"), as("bob"), 200},
		{"token, body user: acts for alice", gwToken, "POST", "/v1/chat/completions", chat("bobs", "alice"), nil, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.method, tt.path, tt.token, tt.body, tt.hdr...)
			if r.status != tt.want {
				t.Fatalf("= %d %s, want %d", r.status, r.raw, tt.want)
			}
			if tt.want == 403 && r.errCode() != codeUnauthorized {
				t.Errorf("code = %q, want UNAUTHORIZED", r.errCode())
			}
			if strings.Contains(r.raw, "bob's secret prompt") && tt.token != gwToken && tt.token != admin {
				t.Errorf("alice's key saw bob's prompt: %s", r.raw)
			}
		})
	}
	list := e.must(200, "GET", "/v1/agents", readA, "")
	if n := len(list.body["data"].([]any)); n != 1 {
		t.Errorf("alice's read key lists %d agents, want 1 (hers)", n)
	}

}

// TestBucketPerCredential: the token bucket keys on the credential and
// the user it acts for, never on a header alone: a read key acting for
// alice spends only its own budget, and naming other users neither
// escapes it nor reaches theirs.
func TestBucketPerCredential(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken, rpm: 60}) // burst 5, the clock stands still
	r := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"ra","scopes":["operator.read"],"user_id":"alice"}`)
	readA := r.body["key"].(string)
	for i := range 5 {
		e.must(200, "GET", "/v1/providers", readA, "")
		if r := e.do("GET", "/v1/providers", readA, "", as("carol")...); r.status != 403 {
			t.Fatalf("request %d as carol = %d, want 403 (and no bucket of carol's spent)", i, r.status)
		}
	}
	if r := e.do("GET", "/v1/providers", readA, ""); r.status != 429 {
		t.Fatalf("6th request of alice's read key = %d, want 429", r.status)
	}
	for _, who := range []string{"alice", "carol"} {
		if r := e.do("GET", "/v1/agents", gwToken, "", as(who)...); r.status != 200 {
			t.Errorf("gateway token for %s after the read key's 429 = %d, want 200 (its own bucket)", who, r.status)
		}
	}
}

func as(u string) []string { return []string{"X-Gateway-User-Id", u} }

// TestModelsAndResponsesMessages: GET /v1/models lists what the caller may
// run; /v1/responses takes chat-style messages too.
func TestModelsAndResponsesMessages(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("alices", `{"delay_ms":1}`, "") // owned by alice
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"bobs","provider":"echo","model":"m"}`, as("bob")...)
	read := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"r","scopes":["operator.read"],"user_id":"alice"}`).body["key"].(string)
	ids := func(r gwResp) []string {
		var out []string
		for _, m := range r.body["data"].([]any) {
			out = append(out, m.(map[string]any)["id"].(string))
		}
		return out
	}
	if got := ids(e.must(200, "GET", "/v1/models", read, "")); len(got) != 1 || got[0] != "gateway:alices" {
		t.Errorf("alice's models = %v, want [gateway:alices]", got)
	}
	if got := ids(e.must(200, "GET", "/v1/models", gwToken, "")); len(got) != 2 {
		t.Errorf("the token's models = %v, want both agents", got)
	}
	r := e.must(200, "POST", "/v1/responses", gwToken, `{"model":"agent:alices","messages":[{"role":"user","content":"from messages"}]}`, as("alice")...)
	if !strings.Contains(r.raw, "from messages") {
		t.Errorf("responses with messages = %s", r.raw)
	}
	e.must(400, "POST", "/v1/responses", gwToken, `{"model":"agent:alices"}`, as("alice")...)
}

// TestSharing: the owner shares with roles; a user may read and run, an
// operator may also edit the prompt, neither may update anything else or
// delete; revoking ends access at once; strangers get 404.
func TestSharing(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("shared", `{"delay_ms":1}`, "") // owned by alice
	share := func(user, body string, want int) gwResp {
		t.Helper()
		return e.must(want, "POST", "/v1/agents/shared/sharing", gwToken, body, as(user)...)
	}
	share("alice", `{"user_id":"bob","role":"user"}`, 201)
	r := share("alice", `{"user_id":"olga","role":"operator"}`, 201)
	if n := len(r.body["data"].([]any)); n != 2 {
		t.Fatalf("shares after two = %s", r.raw)
	}
	share("bob", `{"user_id":"carol"}`, 403)                 // not the owner
	share("alice", `{"user_id":"x","role":"admin"}`, 400)    // no such role
	share("alice", `{"user_id":"alice","role":"user"}`, 400) // the owner itself
	share("mallory", `{"user_id":"zed","role":"user"}`, 404) // a stranger

	chat := `{"model":"agent:shared","messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		name, user, method, path, body string
		want                           int
	}{
		{"user reads", "bob", "GET", "/v1/agents/shared", "", 200},
		{"user runs", "bob", "POST", "/v1/chat/completions", chat, 200},
		{"user cannot edit the prompt", "bob", "PUT", "/v1/agents/shared", `{"system_prompt":"x"}`, 403},
		{"user cannot list shares", "bob", "GET", "/v1/agents/shared/sharing", "", 403},
		{"operator edits the prompt", "olga", "PUT", "/v1/agents/shared", `{"system_prompt":"operated"}`, 200},
		{"operator cannot change the model", "olga", "PUT", "/v1/agents/shared", `{"system_prompt":"y","model":"z"}`, 403},
		{"operator lists shares", "olga", "GET", "/v1/agents/shared/sharing", "", 200},
		{"operator cannot delete", "olga", "DELETE", "/v1/agents/shared", "", 403},
		{"stranger", "mallory", "GET", "/v1/agents/shared", "", 404},
		{"stranger cannot run", "mallory", "POST", "/v1/chat/completions", chat, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.must(tt.want, tt.method, tt.path, gwToken, tt.body, as(tt.user)...)
		})
	}
	if got := e.must(200, "GET", "/v1/agents/shared", gwToken, "", as("alice")...).body["system_prompt"]; got != "operated" {
		t.Errorf("prompt after the operator's edit = %v", got)
	}
	e.must(204, "DELETE", "/v1/agents/shared/sharing/bob", gwToken, "", as("alice")...)
	e.must(404, "DELETE", "/v1/agents/shared/sharing/bob", gwToken, "", as("alice")...)
	e.must(404, "GET", "/v1/agents/shared", gwToken, "", as("bob")...)
	e.must(404, "POST", "/v1/chat/completions", gwToken, chat, as("bob")...)
	r = e.must(200, "GET", "/v1/agents/shared/sharing", gwToken, "", as("alice")...)
	if !strings.Contains(r.raw, `"user_id":"olga","role":"operator"`) || strings.Contains(r.raw, "bob") {
		t.Errorf("shares after revoking bob = %s", r.raw)
	}
}

// TestDefaultAgent: a run that names no agent uses the agent_key default
// when the user may use it, else the user's is_default agent.
func TestDefaultAgent(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("helper", `{"delay_ms":1}`, `,"is_default":true`) // alice's
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"default","provider":"echo","model":"m"}`, as("bob")...)
	chat := `{"messages":[{"role":"user","content":"which one"}]}`
	for _, tc := range []struct{ user, want string }{{"alice", "helper"}, {"bob", "default"}} {
		r := e.must(200, "POST", "/v1/chat/completions", gwToken, chat, as(tc.user)...)
		if r.body["model"] != "gateway:"+tc.want {
			t.Errorf("%s's default run used %v, want %s", tc.user, r.body["model"], tc.want)
		}
	}
	e.must(404, "POST", "/v1/chat/completions", gwToken, chat, as("carol")...)
}

// TestBindingEveryRoute walks the route table: on every authenticated
// route, a read or write key acting for another user is refused with the
// binding error before anything runs; acting for its own user, it passes
// exactly the routes its scope allows (the scope check is the table's).
func TestBindingEveryRoute(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	keys := map[gateway.Scope]string{}
	for _, sc := range []gateway.Scope{gateway.ScopeRead, gateway.ScopeWrite} {
		keys[sc] = e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"k","scopes":["`+string(sc)+`"],"user_id":"alice"}`).body["key"].(string)
	}
	param := regexp.MustCompile(`\{[^}]+\}`)
	for _, rt := range e.srv.Routes() {
		if rt.Public {
			continue
		}
		path := param.ReplaceAllString(rt.Path, "x")
		for sc, key := range keys {
			t.Run(fmt.Sprintf("%s %s as %s", rt.Method, rt.Path, sc), func(t *testing.T) {
				r := e.do(rt.Method, path, key, "{}", as("bob")...)
				if r.status != 403 || !strings.Contains(r.errMsg(), "acts only for the user") {
					t.Errorf("acting for another user = %d %s, want 403 (binding)", r.status, r.raw)
				}
				r = e.do(rt.Method, path, key, "{}")
				scopeDenied := r.status == 403 && strings.Contains(r.errMsg(), "lacks the")
				if want := !sc.Grants(rt.Scope); scopeDenied != want {
					t.Errorf("acting for its user = %d %s; scope %s needs %s: denied %t, want %t", r.status, r.raw, sc, rt.Scope, scopeDenied, want)
				}
			})
		}
	}
}
