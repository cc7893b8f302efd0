package agentrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/actors/gateway"
)

// staticTools is a Toolbox with fixed tools.
type staticTools []Tool

func (s staticTools) Tools(context.Context, gateway.Agent, gateway.RunTools) ([]Tool, error) {
	return s, nil
}

func addTool(calls *[]string, mu *sync.Mutex) Tool {
	return Tool{
		Name: "add", Description: "adds a and b", Kind: gateway.SpanTool, Secrets: []string{"tool-secret-value"},
		Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}}}`),
		Call: func(_ context.Context, args json.RawMessage) (string, error) {
			var in struct{ A, B float64 }
			if err := json.Unmarshal(args, &in); err != nil {
				return "", err
			}
			mu.Lock()
			*calls = append(*calls, string(args))
			mu.Unlock()
			if in.A == 0 {
				return "leaked tool-secret-value", nil
			}
			return fmt.Sprint(in.A + in.B), nil
		},
	}
}

// toolStub is an OpenAI-compatible upstream that asks for the add tool
// until it sees a tool result, then answers with the result, streamed
// or not as asked. It records the requests.
type toolStub struct {
	mu       sync.Mutex
	requests []map[string]any
	rounds   int // tool-call answers before the text (default 1)
}

func (s *toolStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req map[string]any
	b, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(b, &req)
	s.mu.Lock()
	s.requests = append(s.requests, req)
	n := len(s.requests)
	rounds := max(s.rounds, 1)
	s.mu.Unlock()
	msgs := req["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)
	stream, _ := req["stream"].(bool)
	if last["role"] != "tool" || n <= rounds {
		args := `{"a":2,"b":40}`
		if !stream {
			fmt.Fprintf(w, `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_%d","type":"function","function":{"name":"add","arguments":%q}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5}}`, n, args)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_%d\",\"type\":\"function\",\"function\":{\"name\":\"add\",\"arguments\":\"\"}}]}}]}\n\n", n)
		fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":%q}}]}}]}\n\n", args[:6])
		fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":%q}}]},\"finish_reason\":\"tool_calls\"}]}\n\n", args[6:])
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5}}\n\ndata: [DONE]\n\n")
		return
	}
	answer := "the sum is " + last["content"].(string)
	if !stream {
		fmt.Fprintf(w, `{"choices":[{"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":4}}`, answer)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, word := range strings.SplitAfter(answer, " ") {
		fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":%q}}]}\n\n", word)
	}
	fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":4}}\n\ndata: [DONE]\n\n")
}

// TestToolLoop: the model's tool calls run and their results go back
// until it answers, streamed or not; each call is a span under the LLM
// call that asked for it, secrets masked; max_tool_iterations ends a
// model that never stops.
func TestToolLoop(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			stub := &toolStub{}
			srv := httptest.NewServer(stub)
			defer srv.Close()
			f := newFake()
			f.add("calc", gateway.ProviderOpenAICompat, srv.URL+"/v1", `{}`, nil)
			var calls []string
			var mu sync.Mutex
			rt := newRuntime(t, f, withToolbox(staticTools{addTool(&calls, &mu)}))
			rn, err := rt.prepareRef(context.Background(), Request{Agent: "calc", User: "u", Endpoint: "test",
				Messages: []Message{{Role: "user", Content: "what is 2+40?"}}})
			if err != nil {
				t.Fatal(err)
			}
			var deltas []string
			var onDelta func(string) error
			if stream {
				onDelta = func(d string) error { deltas = append(deltas, d); return nil }
			}
			res, err := rt.execute(context.Background(), rn, onDelta)
			if err != nil || res.Content != "the sum is 42" || res.PromptTokens != 30 || res.CompletionTokens != 9 {
				t.Fatalf("Execute = %+v, %v", res, err)
			}
			if stream && strings.Join(deltas, "") != "the sum is 42" {
				t.Errorf("deltas = %q", deltas)
			}
			if len(calls) != 1 || calls[0] != `{"a":2,"b":40}` {
				t.Errorf("tool calls = %q", calls)
			}
			first := stub.requests[0]
			if tools := first["tools"].([]any); len(tools) != 1 || tools[0].(map[string]any)["function"].(map[string]any)["name"] != "add" {
				t.Errorf("tools sent = %v", first["tools"])
			}
			second := stub.requests[1]["messages"].([]any)
			if tm := second[len(second)-1].(map[string]any); tm["role"] != "tool" || tm["tool_call_id"] != "call_1" || tm["content"] != "42" {
				t.Errorf("tool result sent = %v", tm)
			}
			tr := f.lastTrace(t)
			if len(tr.Spans) != 3 || tr.Spans[0].Kind != gateway.SpanLLM || tr.Spans[1].Kind != gateway.SpanTool ||
				tr.Spans[1].ParentID != tr.Spans[0].ID || tr.Spans[2].Kind != gateway.SpanLLM || tr.Status != gateway.RunOK {
				t.Fatalf("spans = %+v", tr.Spans)
			}
			if strings.Contains(fmt.Sprint(tr), "tool-secret-value") || !strings.Contains(tr.Spans[1].OutputPreview, "42") {
				t.Errorf("trace = %+v", tr)
			}
		})
	}
	t.Run("secrets masked", func(t *testing.T) {
		var calls []string
		var mu sync.Mutex
		tool := addTool(&calls, &mu)
		out, sp := (&Runtime{now: time.Now}).runTool(context.Background(), &Run{redact: newRedactor("sk-provider-key-1")}, &tool,
			ToolCall{ID: "c", Function: ToolFunction{Name: "add", Arguments: `{"a":0,"note":"tool-secret-value sk-provider-key-1"}`}}, "p")
		if out != "leaked tool-secret-value" || strings.Contains(sp.InputPreview+sp.OutputPreview, "secret-value") || strings.Contains(sp.InputPreview, "sk-provider") {
			t.Errorf("span previews %q / %q", sp.InputPreview, sp.OutputPreview)
		}
	})
	t.Run("limit", func(t *testing.T) {
		stub := &toolStub{rounds: 100}
		srv := httptest.NewServer(stub)
		defer srv.Close()
		f := newFake()
		f.add("calc", gateway.ProviderOpenAICompat, srv.URL+"/v1", `{}`, func(a *gateway.Agent, _ *gateway.Provider) { a.MaxToolIterations = 3 })
		var calls []string
		var mu sync.Mutex
		rt := newRuntime(t, f, withToolbox(staticTools{addTool(&calls, &mu)}))
		rn, _ := rt.prepareRef(context.Background(), Request{Agent: "calc", Messages: []Message{{Role: "user", Content: "loop"}}})
		_, err := rt.execute(context.Background(), rn, nil)
		if !errors.Is(err, ErrToolLimit) || len(calls) != 3 || len(stub.requests) != 4 {
			t.Errorf("Execute = %v after %d tool calls, %d model calls; want ErrToolLimit after 3 and 4", err, len(calls), len(stub.requests))
		}
		if tr := f.lastTrace(t); tr.Status != gateway.RunFailed || !strings.Contains(tr.Error, "max_tool_iterations") {
			t.Errorf("trace = %s %q", tr.Status, tr.Error)
		}
	})
	t.Run("echo convention and a failing tool", func(t *testing.T) {
		f := newFake()
		f.add("e", gateway.ProviderEcho, "", `{"delay_ms":0}`, nil)
		rt := newRuntime(t, f, withToolbox(staticTools{{Name: "boom", Kind: gateway.SpanTool, Parameters: json.RawMessage(`{"type":"object"}`),
			Call: func(context.Context, json.RawMessage) (string, error) {
				return "partial output", errors.New("exit status 3")
			}}}))
		rn, _ := rt.prepareRef(context.Background(), Request{Agent: "e", Messages: []Message{{Role: "user", Content: `/tool boom {"x":1}`}}})
		res, err := rt.execute(context.Background(), rn, nil)
		if err != nil || res.Content != "echo: error: exit status 3 partial output" {
			t.Errorf("Execute = %q, %v", res.Content, err)
		}
		if tr := f.lastTrace(t); len(tr.Spans) != 3 || tr.Spans[1].Status != gateway.RunFailed || tr.Status != gateway.RunOK {
			t.Errorf("spans = %+v", tr.Spans)
		}
	})
}
