package llm

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// oaTestTools are tools as a run sends them: one with a schema and a
// description holding characters JSON escapes, one without a schema.
func oaTestTools() []ToolSpec {
	return []ToolSpec{
		{Type: "function", Function: ToolSpecFunc{Name: "add", Description: "adds <a> & \"b\"",
			Parameters: json.RawMessage(`{ "type": "object",
			  "properties": {"a": {"type": "number"}, "b": {"type": "number"}} }`)}},
		{Function: ToolSpecFunc{Name: "now"}},
	}
}

// TestOpenAIBodyToolsJSON: a body built with Request.ToolsJSON is the
// same JSON value as the one that encodes Tools, whole and streamed,
// with and without max_tokens and a model; without tools ToolsJSON is
// not sent.
func TestOpenAIBodyToolsJSON(t *testing.T) {
	c := &oaClient{streamUsage: true, maxTokens: 64}
	enc, err := EncodeTools(oaTestTools())
	if err != nil {
		t.Fatal(err)
	}
	decode := func(b []byte) any {
		t.Helper()
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("body %s: %v", b, err)
		}
		return v
	}
	for _, stream := range []bool{false, true} {
		for _, model := range []string{"", "gpt-4o-mini"} {
			for _, maxTokens := range []int{0, 100} {
				name := fmt.Sprintf("stream=%v model=%q max_tokens=%d", stream, model, maxTokens)
				req := Request{Messages: []Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi </script>"}},
					Tools: oaTestTools(), MaxTokens: maxTokens}
				want, err := c.body(req, model, stream)
				if err != nil {
					t.Fatal(err)
				}
				req.ToolsJSON = enc
				got, err := c.body(req, model, stream)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(decode(got), decode(want)) {
					t.Errorf("%s: body with ToolsJSON\n%s\nwant the value of\n%s", name, got, want)
				}
				if tools := decode(got).(map[string]any)["tools"].([]any); len(tools) != 2 {
					t.Errorf("%s: %d tools sent, want 2", name, len(tools))
				}
			}
		}
	}
	got, err := c.body(Request{Messages: []Message{{Role: "user", Content: "hi"}}, ToolsJSON: enc}, "m", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := decode(got).(map[string]any)["tools"]; ok {
		t.Errorf("body without Tools sends ToolsJSON: %s", got)
	}
	if b, err := EncodeTools(nil); b != nil || err != nil {
		t.Errorf("EncodeTools(nil) = %s, %v; want nil, nil", b, err)
	}
}

// BenchmarkOpenAIBodyTools encodes a request body with 12 tools of
// about 700 bytes each: the tools encoded for the call, and passed
// already encoded (Request.ToolsJSON), side by side.
func BenchmarkOpenAIBodyTools(b *testing.B) {
	specs := make([]ToolSpec, 12)
	for i := range specs {
		specs[i] = ToolSpec{Type: "function", Function: ToolSpecFunc{Name: fmt.Sprintf("tool_%02d", i),
			Description: "Search the team's issue tracker for issues matching a query, newest first, with their labels, assignees and state.",
			Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "description": "words to look for in the title and body"},
    "state": {"type": "string", "enum": ["open", "closed", "all"], "description": "which issues to list"},
    "labels": {"type": "array", "items": {"type": "string"}, "description": "only issues with every one of these labels"},
    "assignee": {"type": "string", "description": "login of the person the issue is assigned to"},
    "since": {"type": "string", "format": "date-time", "description": "only issues updated after this time"},
    "per_page": {"type": "integer", "minimum": 1, "maximum": 100, "default": 30, "description": "results per page"},
    "page": {"type": "integer", "minimum": 1, "default": 1, "description": "page number"}
  },
  "required": ["query"],
  "additionalProperties": false
}`)}}
	}
	c := &oaClient{streamUsage: true}
	req := Request{Messages: []Message{{Role: "system", Content: "You are the release assistant."}, {Role: "user", Content: "what is next on the release checklist?"}}, Tools: specs}
	enc, err := EncodeTools(specs)
	if err != nil {
		b.Fatal(err)
	}
	for _, pre := range []bool{false, true} {
		b.Run(map[bool]string{false: "encoded-each-call", true: "ToolsJSON"}[pre], func(b *testing.B) {
			r := req
			if pre {
				r.ToolsJSON = enc
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.body(r, "m", true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
