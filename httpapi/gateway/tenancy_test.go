package gateway

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/webhook"
)

// TestUnboundKeySeesNothing (issue 21, 8): a read key bound to no user
// (made before keys were bound to users; the API refuses such keys now, so
// the caller is built as authentication builds it for one) gets no other
// user's agent, workspace or skills: an empty user never skips a check.
func TestUnboundKeySeesNothing(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("helper", `{"delay_ms":0}`, "") // alice's
	c := Caller{KeyID: uuid.New(), Scopes: []gateway.Scope{gateway.ScopeRead}}
	ctx := ctxT(t)
	if a, err := e.srv.getAgent(ctx, c, idIn{ID: "helper"}); err == nil {
		t.Errorf("getAgent = %+v, want no agent", a)
	}
	if l, err := e.srv.agentSkills(ctx, c, idIn{ID: "helper"}); err == nil {
		t.Errorf("agentSkills = %+v, want an error", l)
	}
	if l, err := e.srv.listFiles(ctx, c, filesIn{AgentID: "helper"}); err == nil {
		t.Errorf("listFiles = %+v, want an error", l)
	}
	if l, err := e.srv.listAgents(ctx, c, None{}); err != nil || len(l.Data) != 0 {
		t.Errorf("listAgents = %+v, %v; want none", l, err)
	}
	if l, err := e.srv.listModels(ctx, c, None{}); err != nil || len(l.Data) != 0 {
		t.Errorf("listModels = %+v, %v; want none", l, err)
	}
}

// TestDefaultAgentNotHijacked (issue 21, 5): bob's agent keyed "default",
// shared with alice, never becomes alice's default; her own is_default
// agent does. A caller acting for no user runs only the operator's
// default (gateway.default_agent), and none when it is unset.
func TestDefaultAgentNotHijacked(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken, gw: func(c *gateway.Config) { c.DefaultAgent = "" }})
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo","settings":{"delay_ms":0}}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"default","provider":"echo","model":"m","system_prompt":"bob rules here","shared_with":["alice"]}`, as("bob")...)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"mine","provider":"echo","model":"m","system_prompt":"alice's own","is_default":true}`, as("alice")...)
	chat := `{"messages":[{"role":"user","content":"hi"}]}`
	r := e.must(200, "POST", "/v1/chat/completions", gwToken, chat, as("alice")...)
	if got := r.body["model"]; got != "gateway:mine" {
		t.Errorf("alice's model-less chat ran %v, want her own default gateway:mine", got)
	}
	e.must(200, "PUT", "/v1/agents/mine", gwToken, `{"is_default":false}`, as("alice")...)
	if r := e.do("POST", "/v1/chat/completions", gwToken, chat, as("alice")...); r.status != 404 {
		t.Errorf("alice without a default of her own = %d %s, want 404 (bob's shared agent is not hers)", r.status, r.raw)
	}
	if r := e.do("POST", "/v1/chat/completions", gwToken, chat); r.status != 404 {
		t.Errorf("no user, no operator default = %d %s, want 404", r.status, r.raw)
	}
}

// TestApprovalNeverWidensGrant (issue 21, 14): approving a user's access
// request for a server they already hold a grant on keeps the grant's
// tool_deny (an admin's decision); it does not replace it with an
// unrestricted one.
func TestApprovalNeverWidensGrant(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.must(201, "POST", "/v1/mcp/servers", gwToken, `{"name":"ev","transport":"streamable-http","url":"http://127.0.0.1:1/mcp"}`)
	e.must(201, "POST", "/v1/mcp/servers/ev/grants/user", gwToken, `{"user_id":"alice","tool_deny":["get-env"]}`)
	q := e.must(201, "POST", "/v1/mcp/requests", gwToken, `{"server_id":"ev","reason":"need it"}`, as("alice")...)
	e.must(200, "POST", "/v1/mcp/requests/"+q.body["id"].(string)+"/review", gwToken, `{"approved":true}`)
	acc, err := e.gw.MCPAccessFor(ctxT(t), uuid.New(), "alice")
	if err != nil || len(acc) != 1 || len(acc[0].Grants) != 1 {
		t.Fatalf("MCPAccessFor(alice) = %+v, %v; want one server with one grant", acc, err)
	}
	if g := acc[0].Grants[0]; len(g.ToolDeny) != 1 || g.ToolDeny[0] != "get-env" {
		t.Errorf("after approval alice's grant = %+v, want tool_deny [get-env] kept", g)
	}
}

// TestPrivateSkill (issue 21, 12): a private skill is listed, read and
// granted only for its uploader (and trusted backends): to anyone else it
// does not exist, and it is never granted to another user's agent.
func TestPrivateSkill(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken, gw: func(c *gateway.Config) { c.BlobDir = t.TempDir() }})
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo","settings":{"delay_ms":0}}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"alices","provider":"echo","model":"m"}`, as("alice")...)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"bobs","provider":"echo","model":"m"}`, as("bob")...)
	aliceAdmin := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"aa","scopes":["operator.admin"],"user_id":"alice"}`).body["key"].(string)
	bob := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"b","scopes":["operator.read"],"user_id":"bob"}`).body["key"].(string)
	alice := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"a","scopes":["operator.read"],"user_id":"alice"}`).body["key"].(string)
	md := "---\nname: Diary\ndescription: alice's private notes\n---\n# notes\n"
	uploadSkill(t, e, aliceAdmin, skillZip(t, map[string]string{"diary/SKILL.md": md}))
	e.must(200, "PUT", "/v1/skills/diary", aliceAdmin, `{"visibility":"private"}`)
	for _, path := range []string{"/v1/skills/diary", "/v1/skills/diary/versions", "/v1/skills/diary/files", "/v1/skills/diary/files/SKILL.md"} {
		if r := e.do("GET", path, bob, ""); r.status != 404 {
			t.Errorf("bob GET %s = %d %s, want 404", path, r.status, r.raw)
		}
		e.must(200, "GET", path, alice, "")
	}
	if r := e.must(200, "GET", "/v1/skills", bob, ""); strings.Contains(r.raw, "diary") {
		t.Errorf("bob's skill list shows alice's private skill: %s", r.raw)
	}
	if r := e.must(200, "GET", "/v1/agents/bobs/skills", bob, ""); strings.Contains(r.raw, "diary") {
		t.Errorf("bob's agent skills show alice's private skill: %s", r.raw)
	}
	if r := e.must(200, "GET", "/v1/skills", alice, ""); !strings.Contains(r.raw, "diary") {
		t.Errorf("alice's skill list lacks her private skill: %s", r.raw)
	}
	if r := e.do("POST", "/v1/skills/diary/grants/agent", gwToken, `{"agent_id":"bobs"}`); r.status != 400 {
		t.Errorf("granting alice's private skill to bob's agent = %d %s, want 400", r.status, r.raw)
	}
	e.must(201, "POST", "/v1/skills/diary/grants/agent", gwToken, `{"agent_id":"alices"}`)
}

// TestWebhookSenderIsNotAUser (issue 21, 6): a webhook sender whose
// sender_id is "alice" acts in its instance's namespace: the run does not
// get alice's USER.md, and the session is not alice's.
func TestWebhookSenderIsNotAUser(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	stub := &promptStub{}
	srv := httptest.NewServer(stub)
	defer srv.Close()
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"stub","provider_type":"openai_compat","api_base":"`+srv.URL+`/v1"}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"desk","provider":"stub","model":"m"}`, as("alice")...)
	e.must(200, "PUT", "/v1/agents/desk/instances/alice/files/USER.md", gwToken, "ALICE-PRIVATE-NOTE", as("alice")...)
	e.must(200, "POST", "/v1/chat/completions", gwToken, `{"model":"gateway:desk","messages":[{"role":"user","content":"hi"}]}`, as("alice")...)
	if !strings.Contains(stub.sent(), "ALICE-PRIVATE-NOTE") {
		t.Fatalf("alice's own run lacks her USER.md: %s", stub.sent())
	}
	const secret = "s3cret-0123456789abcdef"
	id := e.must(201, "POST", "/v1/channel-instances", gwToken, `{"name":"desk","channel_type":"webhook","agent_id":"desk","credentials":{"secret":"`+secret+`"}}`).body["id"].(string)
	now := e.gw.Now().Unix()
	body := `{"sender_id":"alice","message":"what do you know about me?"}`
	r := e.do("POST", "/v1/channels/"+id+"/inbound", "", body, webhook.HeaderTimestamp, strconv.FormatInt(now, 10), webhook.HeaderSignature, webhook.Sign(secret, now, []byte(body)))
	if r.status != 200 {
		t.Fatalf("inbound = %d %s", r.status, r.raw)
	}
	if strings.Contains(stub.sent(), "ALICE-PRIVATE-NOTE") {
		t.Errorf("a sender named alice got alice's USER.md: %s", stub.sent())
	}
	if l := e.must(200, "GET", "/v1/sessions", gwToken, "", as("alice")...).body["data"].([]any); len(l) != 0 {
		t.Errorf("alice's sessions = %v, want none: the sender's session is not hers", l)
	}
}

// TestReadKeysSeeNoAdminConfig (issue 21, 16): a user's read key sees the
// operators' providers, tools, MCP servers and channel instances by name
// and state only, never URLs, commands, config or secret hints, and a
// stranger's agent is 404 on the grant routes too.
func TestReadKeysSeeNoAdminConfig(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken, gw: func(c *gateway.Config) { c.ToolsExecEnabled = true }})
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"oa","provider_type":"openai_compat","api_base":"http://127.0.0.1:1/v1-secret-base","api_key":"sk-provider-secret-9876"}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"bobs","provider":"oa","model":"m"}`, as("bob")...)
	e.must(201, "POST", "/v1/tools/custom", gwToken, `{"name":"wc","description":"counts words","command":["/opt/secret-bin/wc","-w"],"env":{"TOKEN":"t0ken"}}`)
	e.must(201, "POST", "/v1/mcp/servers", gwToken, `{"name":"ev","transport":"streamable-http","url":"http://127.0.0.1:1/mcp-secret-path","headers":{"X-Auth":"hdr-secret"}}`)
	e.must(201, "POST", "/v1/mcp/servers/ev/grants/agent", gwToken, `{"agent_id":"bobs"}`)
	e.must(201, "POST", "/v1/channel-instances", gwToken, `{"name":"desk","channel_type":"webhook","agent_id":"bobs","config":{"async":true,"callback_url":"http://127.0.0.1:9/cb-secret"},"credentials":{"secret":"chan-secret-0123456789"}}`)
	read := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"r","scopes":["operator.read"],"user_id":"alice"}`).body["key"].(string)
	for _, path := range []string{"/v1/providers", "/v1/providers/oa", "/v1/tools/custom", "/v1/tools/custom/wc", "/v1/mcp/servers", "/v1/mcp/servers/ev", "/v1/channel-instances", "/v1/channel-instances/desk"} {
		r := e.must(200, "GET", path, read, "")
		for _, leak := range []string{"secret-base", "mcp-secret-path", "cb-secret", "9876", "secret-bin", "TOKEN", "X-Auth", "0123", "callback_url"} {
			if strings.Contains(r.raw, leak) {
				t.Errorf("read key GET %s shows %q: %s", path, leak, r.raw)
			}
		}
	}
	if r := e.do("GET", "/v1/mcp/grants/agent/bobs", read, ""); r.status != 404 {
		t.Errorf("read key GET bob's agent's grants = %d %s, want 404", r.status, r.raw)
	}
	if r := e.must(200, "GET", "/v1/providers/oa", gwToken, ""); !strings.Contains(r.raw, "secret-base") {
		t.Errorf("the gateway token sees the provider's endpoint: %s", r.raw)
	}
}

// TestQuotas (issue 21, 4): past each per-user cap a request is 429
// RESOURCE_EXHAUSTED, not retryable and without Retry-After, its message
// naming the cap; another user is not affected; deleting media frees its
// bytes.
func TestQuotas(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken, gw: func(c *gateway.Config) {
		c.BlobDir = t.TempDir()
		c.Quotas = gateway.Quotas{MemoryEntries: 2, MediaBytes: 100, Sessions: 2, Agents: 2, PendingMCPRequests: 1}
	}})
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo","settings":{"delay_ms":0}}`)
	e.must(201, "POST", "/v1/mcp/servers", gwToken, `{"name":"ev","transport":"streamable-http","url":"http://127.0.0.1:1/mcp"}`)
	e.must(201, "POST", "/v1/mcp/servers", gwToken, `{"name":"ev2","transport":"streamable-http","url":"http://127.0.0.1:1/mcp"}`)
	capped := func(what string, r gwResp, setting string) {
		t.Helper()
		if r.status != 429 || r.errCode() != codeExhausted || r.header.Get("Retry-After") != "" || r.body["error"].(map[string]any)["retryable"] != false || !strings.Contains(r.errMsg(), setting) {
			t.Errorf("%s past its cap = %d Retry-After %q %s, want 429 RESOURCE_EXHAUSTED, not retryable, naming %s", what, r.status, r.header.Get("Retry-After"), r.raw, setting)
		}
	}
	agent := func(user, key string) gwResp {
		return e.do("POST", "/v1/agents", gwToken, `{"agent_key":"`+key+`","provider":"echo","model":"m"}`, as(user)...)
	}
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"a1","provider":"echo","model":"m"}`, as("alice")...)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"a2","provider":"echo","model":"m"}`, as("alice")...)
	capped("a third agent", agent("alice", "a3"), "agents_per_user")
	if r := agent("bob", "b1"); r.status != 201 {
		t.Errorf("bob's first agent = %d %s", r.status, r.raw)
	}
	for i := range 2 {
		e.must(201, "POST", "/v1/memory", gwToken, `{"content":"note `+strconv.Itoa(i)+`","user_id":"alice"}`, as("alice")...)
	}
	capped("a third memory entry", e.do("POST", "/v1/memory", gwToken, `{"content":"one more","user_id":"alice"}`, as("alice")...), "memory_entries_per_user")
	wake := func(key string) gwResp {
		return e.do("POST", "/v1/agents/a1/wake", gwToken, `{"message":"hi","session_key":"`+key+`"}`, as("alice")...)
	}
	e.must(200, "POST", "/v1/agents/a1/wake", gwToken, `{"message":"hi","session_key":"s1"}`, as("alice")...)
	e.must(200, "POST", "/v1/agents/a1/wake", gwToken, `{"message":"hi","session_key":"s2"}`, as("alice")...)
	if r := wake("s1"); r.status != 200 {
		t.Errorf("a turn of an existing session at the cap = %d %s, want 200", r.status, r.raw)
	}
	capped("a third session", wake("s3"), "sessions_per_user")
	e.must(201, "POST", "/v1/mcp/requests", gwToken, `{"server_id":"ev","reason":"x"}`, as("alice")...)
	capped("a second pending request", e.do("POST", "/v1/mcp/requests", gwToken, `{"server_id":"ev2","reason":"x"}`, as("alice")...), "mcp_requests_pending_per_user")
	write := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"w","scopes":["operator.write"],"user_id":"alice"}`).body["key"].(string)
	m := postFile(t, e, write, "/v1/media/upload", "a.txt", []byte(strings.Repeat("a", 60)))
	if m.status != 201 {
		t.Fatalf("upload = %d %s", m.status, m.raw)
	}
	capped("media past the byte cap", postFile(t, e, write, "/v1/media/upload", "b.txt", []byte(strings.Repeat("b", 60))), "media_bytes_per_user")
	bob := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"b","scopes":["operator.write"],"user_id":"bob"}`).body["key"].(string)
	e.must(404, "DELETE", "/v1/media/"+m.body["id"].(string), bob, "") // not his
	e.must(204, "DELETE", "/v1/media/"+m.body["id"].(string), write, "")
	e.must(404, "GET", "/v1/media/"+m.body["id"].(string), write, "")
	if r := postFile(t, e, write, "/v1/media/upload", "b.txt", []byte(strings.Repeat("b", 60))); r.status != 201 {
		t.Errorf("upload after a delete freed the bytes = %d %s", r.status, r.raw)
	}
}

// TestWSCloseCancelsRun (issue 21, 3): a run asked for over the WebSocket
// RPC and answered in one piece ends when the socket closes, with its
// provider request, as over HTTP.
func TestWSCloseCancelsRun(t *testing.T) {
	st, up := newStub(t)
	st.hang = 30 * time.Second
	e := newGWEnv(t, gwOpts{token: gwToken})
	seedStubAgent(e, up.URL, 60)
	ws := dialWS(t, e)
	ws.mustOK("connect", map[string]any{"token": gwToken, "user_id": "alice"})
	ws.send("chat.completions", map[string]any{"model": "gateway:default", "messages": []map[string]any{{"role": "user", "content": "hi"}}})
	time.Sleep(200 * time.Millisecond) // the run reaches the upstream
	_ = ws.c.Close()
	select {
	case <-st.cancelled:
	case <-time.After(3 * time.Second):
		t.Fatal("the upstream request was not cancelled after the socket closed")
	}
}

// TestSessionKeysPerOwner (issue 21, 7): bob taking the key "s1" first
// neither blocks alice's "s1" nor shows her bob's; asking for a key of
// another user answers as for a key nobody has (no existence oracle).
func TestSessionKeysPerOwner(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("helper", `{"delay_ms":0}`, "") // alice's
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"bobs","provider":"echo","model":"m"}`, as("bob")...)
	e.must(200, "POST", "/v1/agents/bobs/wake", gwToken, `{"message":"bob was here","session_key":"s1"}`, as("bob")...)
	alice := dialWS(t, e)
	alice.mustOK("connect", map[string]any{"token": gwToken, "user_id": "alice"})
	mine, _ := alice.call("chat.history", map[string]any{"sessionKey": "s1"})
	none, _ := alice.call("chat.history", map[string]any{"sessionKey": "never-used"})
	if mine.OK || none.OK || mine.Error.Code != none.Error.Code || mine.Error.Message != none.Error.Message {
		t.Errorf("another user's key = %+v, a key nobody has = %+v: an existence oracle", mine.Error, none.Error)
	}
	e.must(200, "POST", "/v1/agents/helper/wake", gwToken, `{"message":"alice's own","session_key":"s1"}`, as("alice")...)
	h := string(alice.mustOK("chat.history", map[string]any{"sessionKey": "s1"}))
	if strings.Contains(h, "bob was here") || !strings.Contains(h, "alice's own") {
		t.Errorf("alice's s1 = %s, want her own turn only", h)
	}
	bob := dialWS(t, e)
	bob.mustOK("connect", map[string]any{"token": gwToken, "user_id": "bob"})
	if h := string(bob.mustOK("chat.history", map[string]any{"sessionKey": "s1"})); strings.Contains(h, "alice's own") {
		t.Errorf("bob's s1 = %s, shows alice's turn", h)
	}
}

// TestDelegateHidesStrangersAgents (issue 21, also): the delegate tool
// answers alike for a stranger's disabled agent and for no agent at all.
func TestDelegateHidesStrangersAgents(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo","settings":{"delay_ms":0}}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"lead","provider":"echo","model":"m"}`, as("alice")...)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"hidden","provider":"echo","model":"m"}`, as("bob")...)
	e.must(200, "PUT", "/v1/agents/hidden", gwToken, `{"status":"disabled"}`, as("bob")...)
	alice := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"a","scopes":["operator.write"],"user_id":"alice"}`).body["key"].(string)
	disabled := e.chat(alice, "lead", `/tool delegate {"agent":"hidden","task":"x"}`)
	missing := e.chat(alice, "lead", `/tool delegate {"agent":"nosuch","task":"x"}`)
	if strings.ReplaceAll(disabled, "hidden", "X") != strings.ReplaceAll(missing, "nosuch", "X") {
		t.Errorf("a stranger's disabled agent = %q, no agent = %q: they must read alike", disabled, missing)
	}
}
