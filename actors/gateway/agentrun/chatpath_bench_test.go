package agentrun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"gatehouse/actors/gateway"
)

// benchTools are n tools with schemas the size of an MCP server's
// (about 700 bytes each: a few typed, described properties).
func benchTools(n int) staticTools {
	out := make(staticTools, n)
	for i := range out {
		out[i] = Tool{
			Name: fmt.Sprintf("tool_%02d", i), Kind: gateway.SpanTool,
			Description: "Search the team's issue tracker for issues matching a query, newest first, with their labels, assignees and state.",
			Parameters: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "description": "words to look for in the title and body (tool %d)"},
    "state": {"type": "string", "enum": ["open", "closed", "all"], "description": "which issues to list"},
    "labels": {"type": "array", "items": {"type": "string"}, "description": "only issues with every one of these labels"},
    "assignee": {"type": "string", "description": "login of the person the issue is assigned to"},
    "since": {"type": "string", "format": "date-time", "description": "only issues updated after this time"},
    "per_page": {"type": "integer", "minimum": 1, "maximum": 100, "default": 30, "description": "results per page"},
    "page": {"type": "integer", "minimum": 1, "default": 1, "description": "page number"}
  },
  "required": ["query"],
  "additionalProperties": false
}`, i)),
			Call: func(context.Context, json.RawMessage) (string, error) { return "", nil },
		}
	}
	return out
}

// BenchmarkChatPathTools is one run of an agent with 12 tools on an
// openai_compat provider that answers at once (httptest, keep-alive),
// whole and streamed: the runtime's share of a chat call (prepare, the
// request's encoding, the call, the answer's decoding, previews, the
// trace handed to the recorder). Measured against main before issue 35's
// chat-path work by copying this file into that tree.
func BenchmarkChatPathTools(b *testing.B) {
	for _, stream := range []bool{false, true} {
		b.Run(map[bool]string{false: "whole", true: "stream"}[stream], func(b *testing.B) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				if stream {
					w.Header().Set("Content-Type", "text/event-stream")
					io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi there\"},\"finish_reason\":null}]}\n\n"+
						"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"+
						"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":900,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n")
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"choices":[{"message":{"content":"hi there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":900,"completion_tokens":2}}`)
			}))
			defer srv.Close()
			f := newFake()
			f.add("a", "openai_compat", srv.URL, `{}`, nil)
			rt := newRuntime(b, f, withToolbox(benchTools(12)))
			var onDelta func(string) error
			if stream {
				onDelta = func(string) error { return nil }
			}
			run := func() {
				rn, err := rt.prepareRef(context.Background(), Request{Agent: "a", User: "alice", Endpoint: "chat",
					Messages: []Message{{Role: "user", Content: "what is next on the release checklist?"}}})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := rt.execute(context.Background(), rn, onDelta); err != nil {
					b.Fatal(err)
				}
			}
			for range 20 {
				run()
			}
			f.traces = nil
			b.ReportAllocs()
			for b.Loop() {
				run()
				if len(f.traces) > 1000 {
					f.traces = f.traces[:0]
				}
			}
		})
	}
}
