package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const gwClientDir = "testdata/gwclient"

// needTool returns the path of a tool the test needs. Outside CI a missing
// tool skips the test; with CI=true it fails it.
func needTool(tb testing.TB, name, hint string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missing(tb, name+" not found: "+hint)
	}
	return p
}

func missing(tb testing.TB, msg string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// nodeScript runs a script of testdata/gwclient with node.
func nodeScript(tb testing.TB, stdin []byte, script string, args ...string) []byte {
	tb.Helper()
	node := needTool(tb, "node", "install Node.js 20+")
	if _, err := os.Stat(filepath.Join(gwClientDir, "node_modules")); err != nil {
		missing(tb, "run `make test-deps` (npm ci --prefix "+gwClientDir+")")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Dir = gwClientDir
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("node %s: %v\n%s", script, err, stderr.String())
	}
	return out
}

// streamingStub is an OpenAI-compatible upstream that streams its answer
// in three deltas.
func streamingStub(tb testing.TB) string {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Stream bool }
		_ = json.NewDecoder(r.Body).Decode(&body)
		if !body.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"Hello from stub"},"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":3,"total_tokens":7}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, tok := range []string{"Hello", " from", " stub"} {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", tok)
			w.(http.Flusher).Flush()
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n")
	}))
	tb.Cleanup(srv.Close)
	return srv.URL
}

// TestOpenAINodeClient runs the official openai npm client, unchanged,
// against both endpoints, streaming and not, with an API key.
func TestOpenAINodeClient(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"stub","provider_type":"openai_compat","api_base":"`+streamingStub(t)+`/v1"}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"default","provider":"stub","model":"m"}`, "X-Gateway-User-Id", "u")
	key := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"node","scopes":["operator.write"],"user_id":"u"}`).body["key"].(string)
	out := nodeScript(t, nil, "client.mjs", e.url+"/v1", key)
	var got struct {
		Chat struct {
			ID, Content string
			Total       int
		}
		ChatStream struct {
			Deltas []string
			Usage  int
			Finish string
		}
		Responses struct {
			ID, Status, Text string
			Total            int
		}
		ResponsesStream struct {
			Types        []string
			Text, Status string
		}
		Missing, BadKey struct {
			Status     int
			Code, Type string
		}
		Models []string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %s: %v", out, err)
	}
	if diff := cmp.Diff([]string{"gateway:default"}, got.Models); diff != "" {
		t.Errorf("models.list (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(got.Chat.ID, "chatcmpl-") || got.Chat.Content != "Hello from stub" || got.Chat.Total != 7 {
		t.Errorf("chat = %+v", got.Chat)
	}
	if diff := cmp.Diff([]string{"Hello", " from", " stub"}, got.ChatStream.Deltas); diff != "" || got.ChatStream.Usage != 7 || got.ChatStream.Finish != "stop" {
		t.Errorf("chat stream = %+v (-want +got %s)", got.ChatStream, diff)
	}
	if got.Responses.Status != "completed" || got.Responses.Text != "Hello from stub" || got.Responses.Total != 7 {
		t.Errorf("responses = %+v", got.Responses)
	}
	wantTypes := []string{"response.started", "response.delta", "response.delta", "response.delta", "response.done"}
	if diff := cmp.Diff(wantTypes, got.ResponsesStream.Types); diff != "" || got.ResponsesStream.Text != "Hello from stub" || got.ResponsesStream.Status != "completed" {
		t.Errorf("responses stream = %+v (-want +got %s)", got.ResponsesStream, diff)
	}
	if got.Missing.Status != 404 || got.Missing.Code != codeNotFound || got.Missing.Type != "not_found_error" {
		t.Errorf("missing agent = %+v", got.Missing)
	}
	if got.BadKey.Status != 401 || got.BadKey.Code != codeUnauthorized || got.BadKey.Type != "authentication_error" {
		t.Errorf("bad key = %+v", got.BadKey)
	}
}

// TestOpenAPIDocument validates /docs/openapi.json with a real OpenAPI 3.1
// validator and checks it covers every served route.
func TestOpenAPIDocument(t *testing.T) {
	// An upload (a raw body and a query field), as issue 9's will be, so
	// that its documentation is validated too.
	type uploadIn struct {
		Name string `query:"name" json:"-"`
		Data []byte `body:"application/zip" json:"-"`
	}
	upload := Route{Method: "POST", Path: "/v1/test/upload", RPC: "test.upload", Scope: "operator.write", Tag: "test", Summary: "test upload",
		Op: op(func(_ context.Context, _ Caller, in uploadIn) (wakeResp, error) {
			return wakeResp{Content: in.Name}, nil
		})}
	e := newGWEnv(t, gwOpts{token: gwToken, extra: []Route{upload}})
	r := e.must(200, "GET", "/docs/openapi.json", gwToken, "")
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal([]byte(r.raw), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q", doc.OpenAPI)
	}
	for _, rt := range e.srv.routes {
		op, ok := doc.Paths[specPath(rt.Path)][strings.ToLower(rt.Method)]
		if !ok {
			t.Errorf("%s %s is served but not in the document", rt.Method, rt.Path)
			continue
		}
		if !rt.Public && op["x-required-scope"] != string(rt.Scope) {
			t.Errorf("%s %s: x-required-scope = %v, want %s", rt.Method, rt.Path, op["x-required-scope"], rt.Scope)
		}
	}
	// The document and the router agree: every documented operation is
	// answered by a handler (not the router's 404 or 405), and there are
	// as many operations as served routes.
	n := 0
	routeMissing := msgRouteNotFound.text(langEN)
	for path, ops := range doc.Paths {
		for method := range ops {
			n++
			p := pathParam.ReplaceAllString(path, "x")
			got := e.do(strings.ToUpper(method), p, gwToken, "", "X-Gateway-User-Id", "probe")
			if got.status == 405 || got.errMsg() == routeMissing {
				t.Errorf("%s %s is documented but not served: %d %s", method, path, got.status, got.raw)
			}
		}
	}
	if n != len(e.srv.routes) {
		t.Errorf("document has %d operations, server declares %d", n, len(e.srv.routes))
	}
	out := nodeScript(t, []byte(r.raw), "validate.mjs")
	var res struct {
		Valid   bool
		Version string
		Errors  any
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("validator output %s: %v", out, err)
	}
	if !res.Valid || res.Version != "3.1" {
		t.Errorf("validator: valid %v version %q errors %v", res.Valid, res.Version, res.Errors)
	}
}
