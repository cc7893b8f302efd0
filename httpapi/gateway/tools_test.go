package gateway

import (
	"strings"
	"testing"
	"time"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/toolexec"
)

// TestCustomToolsOff: custom tools run commands on the host, so they
// need tools.exec_enabled.
func TestCustomToolsOff(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	r := e.do("POST", "/v1/tools/custom", gwToken, `{"name":"t","command":["cat"]}`)
	if r.status != 412 || !strings.Contains(r.errMsg(), "tools.exec_enabled") {
		t.Errorf("create with exec off = %d %s", r.status, r.raw)
	}
}

// TestCustomTools: CRUD, the exec rules over HTTP (no server secret
// reaches a tool, the timeout, the output cap), tools.invoke, and an
// agent calling a custom tool in a chat.
func TestCustomTools(t *testing.T) {
	t.Setenv("GATEHOUSE_TEST_SERVER_SECRET", "server-env-secret")
	ws := t.TempDir()
	e := newGWEnv(t, gwOpts{token: gwToken, gw: func(c *gateway.Config) { c.ToolsExecEnabled, c.WorkspaceDir = true, ws }})
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo","api_key":"sk-echo-provider-secret","settings":{"delay_ms":0}}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"a1","provider":"echo","model":"m"}`, "X-Gateway-User-Id", "alice")
	writer := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"w","scopes":["operator.write"],"user_id":"alice"}`).body["key"].(string)
	for _, tt := range []struct{ body, field string }{
		{`{"name":"Bad","command":["cat"]}`, "name"},
		{`{"name":"delegate","command":["cat"]}`, "name"},
		{`{"name":"t"}`, "command"},
		{`{"name":"t","command":["cat"],"working_dir":"../x"}`, "working_dir"},
		{`{"name":"t","command":["cat"],"timeout_seconds":0}`, "timeout_seconds"},
		{`{"name":"t","command":["cat"],"parameters":{"type":"string"}}`, "parameters.type"},
		{`{"name":"t","command":["cat"],"env":{"BAD NAME":"x"}}`, "env"},
	} {
		if r := e.do("POST", "/v1/tools/custom", gwToken, tt.body); r.status != 400 || !strings.Contains(r.errMsg(), tt.field) {
			t.Errorf("create %s = %d %s, want 400 naming %s", tt.body, r.status, r.raw, tt.field)
		}
	}
	e.must(403, "POST", "/v1/tools/custom", writer, `{"name":"t","command":["cat"]}`)
	r := e.must(201, "POST", "/v1/tools/custom", gwToken, `{"name":"env_dump","description":"prints its environment","command":["env"],"agent_id":"a1","env":{"TOOL_TOKEN":"tool-secret-1"}}`)
	if strings.Contains(r.raw, "tool-secret-1") || r.body["env_keys"].([]any)[0] != "TOOL_TOKEN" || r.body["timeout_seconds"] != 60.0 {
		t.Errorf("created = %s", r.raw)
	}
	e.must(201, "POST", "/v1/tools/custom", gwToken, `{"name":"slow","command":["sh","-c","sleep 30 & sleep 30"],"timeout_seconds":1}`)
	e.must(201, "POST", "/v1/tools/custom", gwToken, `{"name":"big","command":["head","-c","10000000","/dev/zero"]}`)
	e.must(201, "POST", "/v1/tools/custom", gwToken, `{"name":"fail","command":["sh","-c","echo half done; exit 3"],"working_dir":"scratch"}`)
	e.must(409, "POST", "/v1/tools/custom", gwToken, `{"name":"big","command":["cat"]}`)
	if l := e.must(200, "GET", "/v1/tools/custom?agent_id=a1", writer, "").body; l["total"] != 1.0 {
		t.Errorf("a1's tools = %v", l)
	}
	if l := e.must(200, "GET", "/v1/tools/custom?limit=2&offset=1", writer, "").body; l["total"] != 4.0 || len(l["data"].([]any)) != 2 {
		t.Errorf("page = %v", l)
	}

	invoke := func(tool, args string) gwResp {
		return e.do("POST", "/v1/tools/invoke", writer, `{"tool":"`+tool+`","args":`+args+`,"agentId":"a1"}`)
	}
	r = invoke("env_dump", `{}`)
	out, _ := r.body["output"].(string)
	if r.status != 200 || !strings.Contains(out, "TOOL_TOKEN=tool-secret-1") || !strings.Contains(out, "PATH="+toolexec.DefaultPath) {
		t.Fatalf("env_dump = %d %s", r.status, r.raw)
	}
	for _, secret := range []string{gwToken, "server-env-secret", "sk-echo-provider-secret", writer} {
		if strings.Contains(out, secret) {
			t.Errorf("a tool saw %q", secret)
		}
	}
	start := time.Now()
	r = invoke("slow", `{}`)
	if r.status != 422 || r.errCode() != codePrecondition || !strings.Contains(r.errMsg(), "timed out") || time.Since(start) > 5*time.Second {
		t.Errorf("slow = %d %s after %v", r.status, r.raw, time.Since(start))
	}
	r = invoke("fail", `{}`)
	if r.status != 422 || !strings.Contains(r.raw, `"output":"half done\n"`) || !strings.Contains(r.errMsg(), "exit status 3") {
		t.Errorf("fail = %d %s", r.status, r.raw)
	}
	r = invoke("big", `{}`)
	if out, _ := r.body["output"].(string); r.status != 200 || len(out) > toolexec.MaxOutput+200 || !strings.Contains(out, "dropped") {
		t.Errorf("big = %d, %d bytes", r.status, len(out))
	}
	r = e.must(200, "POST", "/v1/tools/invoke", writer, `{"tool":"env_dump","agentId":"a1","dryRun":true}`)
	if r.body["description"] != "prints its environment" || r.body["output"] != nil {
		t.Errorf("dry run = %s", r.raw)
	}
	e.must(404, "POST", "/v1/tools/invoke", writer, `{"tool":"nope","agentId":"a1"}`)
	e.must(400, "POST", "/v1/tools/invoke", writer, `{"tool":"env_dump","agentId":"a1","args":[1]}`)

	// The agent calls the tool in a chat (the echo provider's /tool
	// convention); the trace has the call, its env masked.
	if content := e.chat(writer, "a1", "/tool env_dump {}"); !strings.Contains(content, "TOOL_TOKEN=tool-secret-1") {
		t.Errorf("chat answer = %q", content)
	}
	waitTraces(t, e, 1)
	trs, _ := e.gw.Traces(ctxT(t), gateway.TraceFilter{})
	tr := trs[0]
	if len(tr.Spans) != 3 || tr.Spans[1].Kind != gateway.SpanTool || tr.Spans[1].Name != "tool env_dump" || strings.Contains(tr.Spans[1].OutputPreview, "tool-secret-1") {
		t.Errorf("spans = %+v", tr.Spans)
	}
	if u := e.must(200, "GET", "/v1/usage/summary", gwToken, "").body["current"].(map[string]any); u["tool_calls"] != 1.0 || u["llm_calls"] != 2.0 {
		t.Errorf("usage = %v, want 1 tool call and 2 LLM calls", u)
	}
	// The same over the WebSocket RPC.
	w := dialWS(t, e)
	w.mustOK("connect", map[string]any{"token": writer})
	if p := w.mustOK("tools.invoke", map[string]any{"tool": "env_dump", "agentId": "a1"}); !strings.Contains(string(p), "TOOL_TOKEN=tool-secret-1") {
		t.Errorf("tools.invoke over ws = %s", p)
	}
	if p := w.mustOK("tools.custom.list", map[string]any{"agent_id": "a1"}); !strings.Contains(string(p), `"total":1`) {
		t.Errorf("tools.custom.list over ws = %s", p)
	}
	if p := w.mustOK("memory.create", map[string]any{"content": "from ws"}); !strings.Contains(string(p), `"user_id":"alice"`) {
		t.Errorf("memory.create over ws = %s", p)
	}
	e.must(200, "PUT", "/v1/tools/custom/env_dump", gwToken, `{"enabled":false}`)
	e.must(404, "POST", "/v1/tools/invoke", writer, `{"tool":"env_dump","agentId":"a1"}`)
	e.must(204, "DELETE", "/v1/tools/custom/env_dump", gwToken, "")
	e.must(404, "GET", "/v1/tools/custom/env_dump", gwToken, "")
}
