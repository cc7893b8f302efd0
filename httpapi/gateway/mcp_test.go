package gateway

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gatehouse/actors/gateway"
)

// everything returns node and the path of the pinned
// @modelcontextprotocol/server-everything (make test-deps installs it).
func everything(t *testing.T) (node, script string) {
	t.Helper()
	node = needTool(t, "node", "install Node.js 20+")
	script, _ = filepath.Abs(filepath.Join(gwClientDir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js"))
	if _, err := os.Stat(script); err != nil {
		missing(t, "run `make test-deps` (npm ci --prefix "+gwClientDir+")")
	}
	return node, script
}

// startEverythingHTTP runs server-everything over streamable HTTP on a
// free loopback port and returns its /mcp URL.
func startEverythingHTTP(t *testing.T, node, script string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(node, script, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	up := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening") {
				up <- true
			}
		}
	}()
	select {
	case <-up:
	case <-time.After(20 * time.Second):
		t.Fatal("server-everything (streamable HTTP) did not start")
	}
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}

// killIn kills the processes whose working directory is dir (the stdio
// MCP server the gateway started there) and reports how many.
func killIn(t *testing.T, dir string) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && cwd == dir {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			n++
		}
	}
	return n
}

// TestMCPServers drives the real @modelcontextprotocol/server-everything
// over stdio and streamable HTTP: live status and tools, grants to an
// agent and to a user with filters, tools.invoke and an agent's run
// calling MCP tools, a server killed mid-call (a clean error, then a
// reconnect), access requests and their review.
func TestMCPServers(t *testing.T) {
	node, script := everything(t)
	ws := t.TempDir()
	e := newGWEnv(t, gwOpts{token: gwToken, gw: func(c *gateway.Config) { c.ToolsExecEnabled, c.WorkspaceDir = true, ws }})
	httpURL := startEverythingHTTP(t, node, script)
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo","settings":{"delay_ms":0}}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"a1","provider":"echo","model":"m"}`, "X-Gateway-User-Id", "alice")
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"b1","provider":"echo","model":"m"}`, "X-Gateway-User-Id", "bob")
	alice := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"a","scopes":["operator.write"],"user_id":"alice"}`).body["key"].(string)
	bob := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"b","scopes":["operator.write"],"user_id":"bob"}`).body["key"].(string)

	for _, tt := range []struct{ body, field string }{
		{`{"name":"x","transport":"carrier-pigeon"}`, "transport"},
		{`{"name":"x","transport":"stdio"}`, "command"},
		{`{"name":"x","transport":"streamable-http","url":"http://u:p@h/mcp"}`, "url"},
		{`{"name":"X Y","transport":"sse","url":"http://h/sse"}`, "name"},
	} {
		if r := e.do("POST", "/v1/mcp/servers", gwToken, tt.body); r.status != 400 || !strings.Contains(r.errMsg(), tt.field) {
			t.Errorf("create %s = %d %s", tt.body, r.status, r.raw)
		}
	}
	stdio := e.must(201, "POST", "/v1/mcp/servers", gwToken, fmt.Sprintf(`{"name":"ev-stdio","transport":"stdio","command":%q,"args":[%q,"stdio"],"env":{"EV_SECRET":"env-secret-1"},"tool_prefix":"local"}`, node, script)).body
	e.must(201, "POST", "/v1/mcp/servers", gwToken, fmt.Sprintf(`{"name":"ev-http","transport":"streamable-http","url":%q,"headers":{"X-Test":"hdr-secret-1"}}`, httpURL))
	e.must(403, "POST", "/v1/mcp/servers", alice, `{"name":"x","transport":"sse","url":"http://h/sse"}`)
	for _, name := range []string{"ev-stdio", "ev-http"} {
		r := e.must(200, "GET", "/v1/mcp/servers/"+name, alice, "")
		st := r.body["status"].(map[string]any)
		if st["connected"] != true || !strings.Contains(fmt.Sprint(st["tools"]), "get-sum") || strings.Contains(r.raw, "secret-1") {
			t.Fatalf("%s = %s", name, r.raw)
		}
	}

	invoke := func(key, tool, args string) gwResp {
		return e.do("POST", "/v1/tools/invoke", key, `{"tool":"`+tool+`","args":`+args+`,"agentId":"a1"}`)
	}
	if r := invoke(alice, "ev-stdio.echo", `{"message":"hi"}`); r.status != 404 {
		t.Errorf("before any grant = %d %s", r.status, r.raw)
	}
	e.must(201, "POST", "/v1/mcp/servers/ev-stdio/grants/agent", gwToken, `{"agent_id":"a1","tool_allow":["echo","get-sum","trigger-long-running-operation"]}`)
	if g := e.must(200, "GET", "/v1/mcp/grants/agent/a1", alice, "").body["data"].([]any); len(g) != 1 {
		t.Errorf("a1's grants = %v", g)
	}
	if r := invoke(alice, "echo", `{"message":"hi"}`); r.status != 200 || !strings.Contains(r.body["output"].(string), "Echo: hi") {
		t.Errorf("echo = %d %s", r.status, r.raw)
	}
	if r := invoke(alice, "ev-stdio.get-sum", `{"a":2,"b":3}`); r.status != 200 || !strings.Contains(r.body["output"].(string), "5") {
		t.Errorf("get-sum = %d %s", r.status, r.raw)
	}
	if r := invoke(alice, "ev-stdio.get-env", `{}`); r.status != 404 {
		t.Errorf("a tool outside tool_allow = %d", r.status)
	}
	// A user grant adds the HTTP server's tools to alice's runs. Servers
	// are taken by name: ev-http's echo keeps its name, ev-stdio's
	// collides and takes its server's tool_prefix.
	e.must(201, "POST", "/v1/mcp/servers/ev-http/grants/user", gwToken, `{"user_id":"alice","tool_deny":["get-env"]}`)
	if r := e.must(200, "POST", "/v1/tools/invoke", alice, `{"tool":"ev-stdio.echo","agentId":"a1","dryRun":true}`); r.body["tool"] != "local_echo" {
		t.Errorf("colliding tool = %s", r.raw)
	}
	if r := invoke(alice, "echo", `{"message":"over http"}`); r.status != 200 || !strings.Contains(r.body["output"].(string), "Echo: over http") {
		t.Errorf("echo = %d %s", r.status, r.raw)
	}
	if r := invoke(bob, "echo", `{"message":"x"}`); r.status != 404 {
		t.Errorf("bob on alice's agent = %d", r.status)
	}

	// The agent calls an MCP tool in a chat.
	if content := e.chat(alice, "a1", `/tool get-sum {"a":2,"b":40}`); !strings.Contains(content, "42") {
		t.Errorf("chat = %q", content)
	}

	// Kill the stdio server during a call: a clean error, then a reconnect.
	done := make(chan gwResp, 1)
	go func() { done <- invoke(alice, "trigger-long-running-operation", `{"duration":10,"steps":10}`) }()
	dir := filepath.Join(ws, "mcp-"+stdio["id"].(string))
	deadline := time.Now().Add(5 * time.Second)
	for killIn(t, dir) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case r := <-done:
		if r.status != 422 || !strings.Contains(r.errMsg(), "connection lost") {
			t.Errorf("call to a killed server = %d %s", r.status, r.raw)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call to a killed server did not end")
	}
	var ok bool
	for i := 0; i < 40 && !ok; i++ {
		r := invoke(alice, "local_echo", `{"message":"back"}`)
		ok = r.status == 200 && strings.Contains(r.raw, "Echo: back")
		if !ok {
			time.Sleep(250 * time.Millisecond)
		}
	}
	if !ok {
		t.Error("no reconnect after the server was killed")
	}

	// Access requests: bob asks, the admin approves (the grant comes with
	// the review), a second review is refused; a denial grants nothing.
	q := e.must(201, "POST", "/v1/mcp/requests", bob, `{"server_id":"ev-http","agent_id":"b1","reason":"need echo"}`).body
	if q["status"] != "pending" || q["user_id"] != "bob" {
		t.Fatalf("request = %v", q)
	}
	e.must(404, "POST", "/v1/mcp/requests", bob, `{"server_id":"ev-http","agent_id":"a1"}`) // not bob's agent
	if l := e.must(200, "GET", "/v1/mcp/requests", gwToken, "").body["data"].([]any); len(l) != 1 {
		t.Errorf("pending = %v", l)
	}
	e.must(403, "POST", "/v1/mcp/requests/"+q["id"].(string)+"/review", bob, `{"approved":true}`)
	rv := e.must(200, "POST", "/v1/mcp/requests/"+q["id"].(string)+"/review", gwToken, `{"approved":true,"note":"ok"}`).body
	if rv["status"] != "approved" || rv["grant_id"] == nil {
		t.Errorf("review = %v", rv)
	}
	e.must(412, "POST", "/v1/mcp/requests/"+q["id"].(string)+"/review", gwToken, `{"approved":false}`)
	if r := e.do("POST", "/v1/tools/invoke", bob, `{"tool":"echo","args":{"message":"b"},"agentId":"b1"}`); r.status != 200 {
		t.Errorf("bob's agent after approval = %d %s", r.status, r.raw)
	}
	if l := e.must(200, "GET", "/v1/mcp/requests?status=all", bob, "").body["data"].([]any); len(l) != 1 || l[0].(map[string]any)["status"] != "approved" {
		t.Errorf("bob's requests = %v", l)
	}
	q2 := e.must(201, "POST", "/v1/mcp/requests", bob, `{"server_id":"ev-stdio"}`).body
	e.must(200, "POST", "/v1/mcp/requests/"+q2["id"].(string)+"/review", gwToken, `{"approved":false,"note":"no"}`)

	e.must(204, "DELETE", "/v1/mcp/servers/ev-stdio/grants/agent/a1", gwToken, "")
	if r := invoke(alice, "echo", `{"message":"x"}`); r.status != 200 || !strings.Contains(r.raw, "Echo: x") {
		// echo now comes from the HTTP server (alice's user grant), unprefixed.
		t.Errorf("echo after revoking the stdio grant = %d %s", r.status, r.raw)
	}
	e.must(204, "DELETE", "/v1/mcp/servers/ev-http", gwToken, "")
	if r := invoke(alice, "echo", `{"message":"x"}`); r.status != 404 {
		t.Errorf("after deleting the server = %d", r.status)
	}
}
