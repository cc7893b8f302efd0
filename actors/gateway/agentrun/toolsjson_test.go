package agentrun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"gatehouse/actors/gateway/agentrun/llm"
)

// TestToolsCache: the same tools give the same encoded bytes, encoded
// once; a changed schema or description (even one changed in place in
// the slice the registry handed over), an added tool, or another user
// gets its own encoding, equal to llm.EncodeTools's.
func TestToolsCache(t *testing.T) {
	var c toolsCache
	agent := uuid.New()
	specs := func(desc, schema string) []llm.ToolSpec {
		return []llm.ToolSpec{{Type: "function", Function: llm.ToolSpecFunc{Name: "add", Description: desc, Parameters: json.RawMessage(schema)}}}
	}
	check := func(name string, got []byte, s []llm.ToolSpec) {
		t.Helper()
		want, err := llm.EncodeTools(s)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: encoded %s, want %s", name, got, want)
		}
	}
	s1 := specs("adds", `{"type":"object"}`)
	first := c.encoded(agent, "alice", s1)
	check("first", first, s1)
	again := c.encoded(agent, "alice", specs("adds", `{"type":"object"}`))
	if &again[0] != &first[0] {
		t.Error("the same tools were encoded again")
	}
	s1[0].Function.Parameters[2] = 'T' // {"Type":"object"}: changed where it lies
	check("schema changed in place", c.encoded(agent, "alice", s1), s1)
	s2 := specs("adds two numbers", `{"type":"object"}`)
	check("description changed", c.encoded(agent, "alice", s2), s2)
	s3 := append(specs("adds two numbers", `{"type":"object"}`), llm.ToolSpec{Function: llm.ToolSpecFunc{Name: "now"}})
	check("tool added", c.encoded(agent, "alice", s3), s3)
	check("another user", c.encoded(agent, "bob", s1), s1)
	if b := c.encoded(agent, "alice", nil); b != nil {
		t.Errorf("no tools encoded as %s", b)
	}
	if b := c.encoded(agent, "alice", specs("bad", `{"type":`)); b != nil {
		t.Errorf("a schema that is not JSON encoded as %s; want nil (the client reports it)", b)
	}
}

// TestRunToolsChange: an agent's tools changed between two runs reach
// the provider changed (the encoded tools are not reused), and the
// same tools are sent again unchanged.
func TestRunToolsChange(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	f := newFake()
	f.add("a", "openai_compat", srv.URL, `{}`, nil)
	tools := benchTools(2)
	rt := newRuntime(t, f, withToolbox(tools))
	run := func() map[string]any {
		t.Helper()
		rn, err := rt.prepareRef(context.Background(), Request{Agent: "a", User: "alice", Messages: []Message{{Role: "user", Content: "hi"}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.execute(context.Background(), rn, nil); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		var v map[string]any
		if err := json.Unmarshal([]byte(bodies[len(bodies)-1]), &v); err != nil {
			t.Fatalf("body %s: %v", bodies[len(bodies)-1], err)
		}
		return v
	}
	desc := func(v map[string]any, i int) string {
		return v["tools"].([]any)[i].(map[string]any)["function"].(map[string]any)["description"].(string)
	}
	if v := run(); desc(v, 1) != tools[1].Description {
		t.Fatalf("first run sent %v", v["tools"])
	}
	tools[1].Description = "Changed: lists the open issues."
	tools[1].Parameters = json.RawMessage(strings.Replace(string(tools[1].Parameters), `"page"`, `"page_no"`, 1))
	v := run()
	if desc(v, 1) != "Changed: lists the open issues." {
		t.Errorf("after the change the provider was told %q", desc(v, 1))
	}
	props := v["tools"].([]any)[1].(map[string]any)["function"].(map[string]any)["parameters"].(map[string]any)["properties"].(map[string]any)
	if _, ok := props["page_no"]; !ok {
		t.Errorf("after the change the schema sent was %v", props)
	}
	if w := run(); desc(w, 1) != "Changed: lists the open issues." || len(w["tools"].([]any)) != 2 {
		t.Errorf("the same tools again sent %v", w["tools"])
	}
}

// TestToolsCacheBounded: however many agent and user pairs run, the
// cache holds at most toolsCacheBytes.
func TestToolsCacheBounded(t *testing.T) {
	var c toolsCache
	schema := `{"type":"object","description":"` + strings.Repeat("x", 64<<10) + `"}`
	specs := []llm.ToolSpec{{Type: "function", Function: llm.ToolSpecFunc{Name: "big", Parameters: json.RawMessage(schema)}}}
	agent := uuid.New()
	for i := range 300 { // ~128 KiB an entry: ~38 MiB in all
		c.encoded(agent, fmt.Sprint("user", i), specs)
		if c.size > toolsCacheBytes {
			t.Fatalf("after %d users the cache holds %d bytes, over %d", i+1, c.size, toolsCacheBytes)
		}
	}
	if len(c.m) == 0 || len(c.m) >= 300 {
		t.Errorf("cache holds %d entries after 300 users", len(c.m))
	}
}
