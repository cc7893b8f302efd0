package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gatehouse/actors/gateway"
)

// toolCallingStub is an OpenAI-compatible upstream that asks for the add
// tool until it sees the tool's result, then answers with it, streamed
// or not as asked.
func toolCallingStub(tb testing.TB) string {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream   bool
			Messages []struct{ Role, Content string }
			Tools    []struct{ Function struct{ Name string } }
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &req)
		last := req.Messages[len(req.Messages)-1]
		if last.Role != "tool" {
			if len(req.Tools) == 0 {
				http.Error(w, "no tools offered", 400)
				return
			}
			if !req.Stream {
				fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"add","arguments":"{\"a\":2,\"b\":40}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":5}}`)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"add\",\"arguments\":\"{\\\"a\\\":2,\"}}]}}]}\n\n")
			fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"b\\\":40}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n")
			return
		}
		answer := "result: " + strings.TrimSpace(last.Content)
		if !req.Stream {
			fmt.Fprintf(w, `{"choices":[{"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3}}`, answer)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, word := range strings.SplitAfter(answer, " ") {
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":%q}}]}\n\n", word)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	tb.Cleanup(srv.Close)
	return srv.URL
}

// TestToolLoopNodeClient: an agent whose provider calls a custom tool; the
// official openai npm client sees the final answer, plain and streamed.
func TestToolLoopNodeClient(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken, gw: func(c *gateway.Config) { c.ToolsExecEnabled, c.WorkspaceDir = true, t.TempDir() }})
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"stub","provider_type":"openai_compat","api_base":"`+toolCallingStub(t)+`/v1"}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"calc","provider":"stub","model":"m"}`, "X-Gateway-User-Id", "u")
	e.must(201, "POST", "/v1/tools/custom", gwToken, `{"name":"add","description":"adds a and b","command":["cat"],"agent_id":"calc","parameters":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}}}}`)
	key := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"node","scopes":["operator.write"],"user_id":"u"}`).body["key"].(string)
	out := nodeScript(t, nil, "tools.mjs", e.url+"/v1", key, "gateway:calc")
	var got struct {
		Plain, Finish string
		Deltas        []string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %s: %v", out, err)
	}
	want := `result: {"a":2,"b":40}`
	if got.Plain != want || got.Finish != "stop" || strings.Join(got.Deltas, "") != want || len(got.Deltas) < 2 {
		t.Errorf("client saw %+v, want %q plain and streamed", got, want)
	}
	waitTraces(t, e, 2)
	trs, _ := e.gw.Traces(ctxT(t), gateway.TraceFilter{})
	for _, tr := range trs {
		if len(tr.Spans) != 3 || tr.Spans[1].Name != "tool add" {
			t.Errorf("trace spans = %+v", tr.Spans)
		}
	}
}
