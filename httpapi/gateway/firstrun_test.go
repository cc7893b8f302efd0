package gateway

import (
	"bytes"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gatehouse/actors/gateway"
)

// TestDocsHint: /docs without a usable token is a page saying how to open
// the docs (with the error's status), never a bare JSON error; the JSON
// routes keep answering JSON.
func TestDocsHint(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	tests := []struct {
		name, path, token string
		status            int
		want              string
	}{
		{"no token", "/docs", "", 401, "No token was given."},
		{"wrong query token", "/docs?token=nope", "", 401, "The token was refused"},
		{"wrong bearer", "/docs", "nope", 401, "The token was refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("GET", tt.path, tt.token, "")
			if r.status != tt.status || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
				t.Fatalf("= %d %s, want %d text/html", r.status, r.header.Get("Content-Type"), tt.status)
			}
			for _, want := range []string{tt.want, `action="/docs"`, `name="token"`, "operator.read", "/docs?token=&lt;token&gt;"} {
				if !strings.Contains(r.raw, want) {
					t.Errorf("hint lacks %q:\n%s", want, r.raw)
				}
			}
			if r.header.Get("Content-Security-Policy") != docsCSP || strings.Contains(r.raw, "<script") {
				t.Errorf("hint: CSP %q, or a script", r.header.Get("Content-Security-Policy"))
			}
		})
	}
	if r := e.do("GET", "/docs/openapi.json", "", ""); r.status != 401 || r.body["error"] == nil {
		t.Errorf("spec without a token = %d %s, want the JSON 401", r.status, r.raw)
	}
}

// TestRootAndHead: the root points at /docs with a relative Location;
// HEAD /health answers as GET does, without a body; JSON answers end with
// a newline.
func TestRootAndHead(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, m := range []string{"GET", "HEAD"} {
		req, _ := http.NewRequest(m, e.url+"/", nil)
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 302 || resp.Header.Get("Location") != "/docs" {
			t.Errorf("%s / = %d Location %q, want 302 /docs", m, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	get := e.must(200, "GET", "/health", "", "")
	head := e.must(200, "HEAD", "/health", "", "")
	if head.raw != "" || head.header.Get("Content-Type") != get.header.Get("Content-Type") ||
		head.header.Get("Content-Length") != get.header.Get("Content-Length") {
		t.Errorf("HEAD /health = %q %v, GET = %q %v", head.raw, head.header, get.raw, get.header)
	}
	for _, r := range []gwResp{get, e.do("GET", "/v1/nope", gwToken, ""), e.do("GET", "/v1/providers", gwToken, "")} {
		if !strings.HasSuffix(r.raw, "}\n") {
			t.Errorf("JSON answer %q does not end with a newline", r.raw)
		}
	}
}

// TestDocsCompressed: the viewer's bundle and the spec are sent as
// brotli or gzip when the request accepts them, decoding to the bytes
// sent without compression.
func TestDocsCompressed(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	bundle, err := os.ReadFile("docsui/swagger-ui-bundle.js")
	if err != nil {
		t.Fatal(err)
	}
	spec := []byte(e.must(200, "GET", "/docs/openapi.json", gwToken, "", "Accept-Encoding", "identity").raw)
	for _, tt := range []struct {
		path     string
		identity []byte
	}{{"/docs/assets/swagger-ui-bundle.js?token=" + gwToken, bundle}, {"/docs/openapi.json?token=" + gwToken, spec}} {
		for _, enc := range []string{"br", "gzip", ""} {
			accept := map[string]string{"br": "gzip, deflate, br", "gzip": "gzip", "": "identity"}[enc]
			r := e.must(200, "GET", tt.path, "", "", "Accept-Encoding", accept)
			if got := r.header.Get("Content-Encoding"); got != enc || r.header.Get("Vary") != "Accept-Encoding" {
				t.Fatalf("%s with %q: Content-Encoding %q, Vary %q", tt.path, accept, got, r.header.Get("Vary"))
			}
			body := []byte(r.raw)
			switch enc {
			case "br":
				body, err = fasthttp.AppendUnbrotliBytes(nil, body)
			case "gzip":
				body, err = fasthttp.AppendGunzipBytes(nil, body)
			}
			if err != nil || !bytes.Equal(body, tt.identity) {
				t.Errorf("%s as %q: %d bytes decode to %d (%v), want %d", tt.path, enc, len(r.raw), len(body), err, len(tt.identity))
			}
			if enc == "br" && len(r.raw)*3 > len(tt.identity) {
				t.Errorf("%s: brotli %d bytes of %d", tt.path, len(r.raw), len(tt.identity))
			}
		}
	}
}

// TestAgentsForNoUser: the gateway token without X-Gateway-User-Id lists
// and reads every user's agents, as /v1/models does; a user sees only
// theirs.
func TestAgentsForNoUser(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("helper", `{"delay_ms":0}`, "") // alice's
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"bobs","provider":"echo","model":"echo-1"}`, "X-Gateway-User-Id", "bob")
	keys := func(r gwResp) []string {
		var ks []string
		for _, a := range r.body["data"].([]any) {
			ks = append(ks, a.(map[string]any)["agent_key"].(string))
		}
		return ks
	}
	if got := keys(e.must(200, "GET", "/v1/agents", gwToken, "")); strings.Join(got, ",") != "bobs,helper" && strings.Join(got, ",") != "helper,bobs" {
		t.Errorf("token, no user: agents %v, want helper and bobs", got)
	}
	if got := keys(e.must(200, "GET", "/v1/agents", gwToken, "", "X-Gateway-User-Id", "bob")); strings.Join(got, ",") != "bobs" {
		t.Errorf("bob: agents %v, want bobs", got)
	}
	e.must(200, "GET", "/v1/agents/bobs", gwToken, "")
}

// TestMCPStarting: while a granted MCP server is still starting (a first
// npx download; here one that never answers), tools/invoke of its tool
// is a retryable 503 with Retry-After, not a 404 "no tool", and the
// server's status says starting, not connected.
func TestMCPStarting(t *testing.T) {
	ws := t.TempDir()
	e := newGWEnv(t, gwOpts{token: gwToken, gw: func(c *gateway.Config) { c.ToolsExecEnabled, c.WorkspaceDir = true, ws }})
	e.seedAgent("a1", `{"delay_ms":0}`, "")
	e.must(201, "POST", "/v1/mcp/servers", gwToken, `{"name":"slow","transport":"stdio","command":"sleep","args":["120"]}`)
	e.must(201, "POST", "/v1/mcp/servers/slow/grants/agent", gwToken, `{"agent_id":"a1"}`)
	r := e.do("POST", "/v1/tools/invoke", gwToken, `{"tool":"slow.echo","args":{},"agentId":"a1"}`, "X-Gateway-User-Id", "alice")
	d, _ := r.body["error"].(map[string]any)
	if r.status != 503 || r.header.Get("Retry-After") != "2" || d["retryable"] != true || !strings.Contains(r.errMsg(), "MCP server starting: slow") {
		t.Errorf("invoke during the start = %d Retry-After %q %s", r.status, r.header.Get("Retry-After"), r.raw)
	}
	st := e.must(200, "GET", "/v1/mcp/servers/slow", gwToken, "").body["status"].(map[string]any)
	if st["connected"] != false || st["starting"] != true {
		t.Errorf("status during the start = %v", st)
	}
	// The list shows each server's connection as it is, connecting none.
	list := e.must(200, "GET", "/v1/mcp/servers", gwToken, "").body["data"].([]any)
	if st := list[0].(map[string]any)["status"].(map[string]any); len(list) != 1 || st["connected"] != false || st["starting"] != true {
		t.Errorf("list during the start = %v", list)
	}
	if r := e.do("POST", "/v1/tools/invoke", gwToken, `{"tool":"nope","args":{},"agentId":"a1"}`, "X-Gateway-User-Id", "bob"); r.status != 404 {
		t.Errorf("invoke for a user without the agent = %d %s", r.status, r.raw)
	}
	e.must(204, "DELETE", "/v1/mcp/servers/slow", gwToken, "")
}
