package llm

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestAnthSSE: the SSE framing as the standard reads it: named events,
// data lines joined, comments and other fields skipped, \r\n line
// endings, lines longer than the read buffer, a last event without its
// blank line dropped, each event and the stream bounded.
func TestAnthSSE(t *testing.T) {
	long := strings.Repeat("x", 40<<10)
	tests := []struct {
		name      string
		in        string
		maxAnswer int
		want      []string // name=data of each event
		tooLarge  bool
		events    int // when not 0: how many events came, not want
	}{
		{name: "named events", in: "event: a\ndata: {\"x\":1}\n\nevent: b\ndata: 2\n\n", want: []string{"a={\"x\":1}", "b=2"}},
		{name: "crlf, no space after the colon", in: "event:a\r\ndata:1\r\n\r\n", want: []string{"a=1"}},
		{name: "data lines joined", in: "event: a\ndata: {\"x\":\ndata: 1}\n\n", want: []string{"a={\"x\":\n1}"}},
		{name: "comments, id and retry skipped, blank lines between", in: "\n\n: keep-alive\nid: 7\nretry: 10\nevent: a\ndata: 1\n\n\n\n", want: []string{"a=1"}},
		{name: "data only", in: "data: 1\n\n", want: []string{"=1"}},
		{name: "last event without its blank line dropped", in: "event: a\ndata: 1\n\nevent: b\ndata: 2\n", want: []string{"a=1"}},
		{name: "line longer than the buffer", in: "event: a\ndata: " + long + "\n\n", want: []string{"a=" + long}},
		{name: "event past its bound", in: "event: a\ndata: 1\n\nevent: b\ndata: " + long + long + "\n\n", maxAnswer: 100, want: []string{"a=1"}, tooLarge: true},
		{name: "event of many lines past its bound", in: "event: a\n" + strings.Repeat("data: "+strings.Repeat("y", 1000)+"\n", 80) + "\n", maxAnswer: 100, tooLarge: true},
		{name: "stream past its bound", in: strings.Repeat("event: ping\ndata: "+strings.Repeat("z", 60<<10)+"\n\n", anthStreamEvents+8), maxAnswer: 1, tooLarge: true, events: 68},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			max := tt.maxAnswer
			if max == 0 {
				max = DefaultMaxAnswer
			}
			s := newAnthSSE(strings.NewReader(tt.in), max)
			var got []string
			var err error
			for {
				var name, data []byte
				if name, data, err = s.next(); err != nil {
					break
				}
				got = append(got, string(name)+"="+string(data))
			}
			if tt.tooLarge {
				var e *Error
				if !errors.As(err, &e) || e.Kind != KindMalformed || !strings.Contains(e.Message, "larger than") {
					t.Errorf("error = %v, want too large", err)
				}
			} else if !errors.Is(err, io.EOF) {
				t.Errorf("error = %v, want io.EOF", err)
			}
			if tt.events != 0 {
				if len(got) != tt.events {
					t.Errorf("%d events before the error, want %d", len(got), tt.events)
				}
			} else if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// cutReader reads its text, then fails as a connection cut short does.
type cutReader struct{ r io.Reader }

func (c cutReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

// TestAnthropicStreamCut: a body that fails mid-stream is the body's
// error (Complete maps it to unreachable), not a malformed answer; one
// that ends cleanly before message_stop is malformed.
func TestAnthropicStreamCut(t *testing.T) {
	half := anthSDKToolUse[:len(anthSDKToolUse)/2]
	if _, err := readAnthropicStream(cutReader{strings.NewReader(half)}, DefaultMaxAnswer, func(string) error { return nil }); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut stream: error %v, want the body's", err)
	}
	_, err := readAnthropicStream(strings.NewReader(half), DefaultMaxAnswer, func(string) error { return nil })
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindMalformed {
		t.Errorf("short stream: error %v, want malformed", err)
	}
	// Unnamed events are not the API's: skipped, as the SDK did.
	unnamed := strings.ReplaceAll(anthSDKToolUse, "event: content_block_delta\n", "")
	res, err := readAnthropicStream(strings.NewReader(unnamed), DefaultMaxAnswer, func(string) error { return nil })
	if err != nil || len(res.ToolCalls) != 1 || res.ToolCalls[0].Function.Arguments != "{}" {
		t.Errorf("unnamed deltas: %+v, %v; want the call without its arguments", res, err)
	}
}

// TestAnthropicRequestJSON: the exact body of a request holding every
// block kind: required fields always present (a thinking block's empty
// text, a tool_use's input), an empty tool result without content, the
// cache breakpoints, thinking and stream.
func TestAnthropicRequestJSON(t *testing.T) {
	cl, err := newAnthropic(Config{APIBase: "http://127.0.0.1:1", Settings: json.RawMessage(`{"thinking_budget_tokens":1024,"max_tokens":2000}`), MaxAnswer: DefaultMaxAnswer})
	if err != nil {
		t.Fatal(err)
	}
	c := cl.(*anthropicClient)
	req := Request{Model: "claude-x", Tools: []ToolSpec{{Type: "function", Function: ToolSpecFunc{Name: "now", Description: "the time"}}}, Messages: []Message{
		{Role: "system", Content: "be brief"},
		{Role: "user", Content: "time?"},
		{Role: "assistant", Thinking: []Thinking{{Signature: "sig-1"}, {Redacted: "opaque"}},
			ToolCalls: []ToolCall{{ID: "toolu_1", Type: "function", Function: ToolFunction{Name: "now", Arguments: `{"tz": "UTC"}`}}, {ID: "toolu_2", Type: "function", Function: ToolFunction{Name: "now"}}}},
		{Role: "tool", ToolCallID: "toolu_1", Content: "noon"},
		{Role: "tool", ToolCallID: "toolu_2", Content: ""},
	}}
	b, err := json.Marshal(c.request(req, true))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"claude-x","max_tokens":2000,` +
		`"system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}],` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"time?"}]},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"sig-1"},{"type":"redacted_thinking","data":"opaque"},` +
		`{"type":"tool_use","id":"toolu_1","name":"now","input":{"tz": "UTC"}},{"type":"tool_use","id":"toolu_2","name":"now","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"noon"}]},{"type":"tool_result","tool_use_id":"toolu_2"}]}],` +
		`"tools":[{"name":"now","description":"the time","input_schema":{"properties":{},"type":"object"},"cache_control":{"type":"ephemeral"}}],` +
		`"thinking":{"type":"enabled","budget_tokens":1024},"stream":true}`
	var gotV, wantV any
	if err := json.Unmarshal(b, &gotV); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, b)
	}
	_ = json.Unmarshal([]byte(want), &wantV)
	if diff := cmp.Diff(wantV, gotV); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	// A whole answer's body has no stream field; without caching, no
	// breakpoints.
	c.set.PromptCaching = new(false)
	b, _ = json.Marshal(c.request(req, false))
	if s := string(b); strings.Contains(s, `"stream"`) || strings.Contains(s, "cache_control") {
		t.Errorf("whole body without caching: %s", s)
	}
}
