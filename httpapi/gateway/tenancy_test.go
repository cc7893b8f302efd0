package gateway

import (
	"testing"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
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
