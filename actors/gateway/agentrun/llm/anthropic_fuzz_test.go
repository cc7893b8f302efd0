package llm

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Streams recorded by the official SDK's own tests
// (anthropic-sdk-go v2.15.0, lib/betafallback/testdata/fallbackstream,
// MIT licence): a refusal after a thinking block, and a tool call.
const (
	anthSDKRefusal = `event: message_start
data: {"type":"message_start","message":{"model":"primary-model","id":"msg_primary","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"stop_details":null,"usage":{"input_tokens":28,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":5,"service_tier":"standard","inference_geo":"global"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Simple educational question. Benign."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig-thinking-a"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"refusal","stop_sequence":null,"stop_details":{"type":"refusal","category":null,"explanation":null,"fallback_has_prefill_claim":true,"fallback_credit_token":"credit-token-a"}},"usage":{"input_tokens":28,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":106,"output_tokens_details":{"thinking_tokens":67},"iterations":[{"input_tokens":28,"output_tokens":106,"cache_read_input_tokens":0,"cache_creation_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"type":"message"}]}}

event: message_stop
data: {"type":"message_stop"}

`
	anthSDKToolUse = `event: message_start
data: {"type":"message_start","message":{"model":"fallback-model","id":"msg_tool","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"stop_details":null,"usage":{"input_tokens":31,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":null,"output_tokens":7,"service_tier":"standard","inference_geo":"global"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_echo_1","name":"echo","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"text\": \"hello\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null,"stop_details":null},"usage":{"input_tokens":31,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":40,"iterations":[{"input_tokens":31,"output_tokens":40,"cache_read_input_tokens":0,"cache_creation_input_tokens":0,"cache_creation":null,"type":"message"}]}}

event: message_stop
data: {"type":"message_stop"}

`
	// anthRedactedStream is a redacted_thinking block and cache usage, as the
	// extended thinking and prompt caching guides show them.
	anthRedactedStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"ok"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":9}}

event: message_stop
data: {"type":"message_stop"}

`
)

// TestAnthropicSDKStreams reads the SDK's recorded streams.
func TestAnthropicSDKStreams(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   Result
		deltas string
	}{
		{"refusal after thinking", anthSDKRefusal, Result{Content: "Hi", Thinking: []Thinking{{Text: "Simple educational question. Benign.", Signature: "sig-thinking-a"}},
			PromptTokens: 28, CompletionTokens: 106, ReasoningTokens: 67, FinishReason: "content_filter"}, "Hi"},
		{"tool use", anthSDKToolUse, Result{ToolCalls: []ToolCall{{ID: "toolu_echo_1", Type: "function", Function: ToolFunction{Name: "echo", Arguments: `{"text": "hello"}`}}},
			PromptTokens: 31, CompletionTokens: 40, FinishReason: "tool_calls"}, ""},
		{"redacted thinking, cache usage", anthRedactedStream, Result{Content: "ok", Thinking: []Thinking{{Redacted: "EmwKAhgBEgy3va3pzix"}},
			PromptTokens: 2105, CacheWriteTokens: 100, CacheReadTokens: 2000, CompletionTokens: 9, FinishReason: "length"}, "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var deltas strings.Builder
			res, err := readAnthropicStream(strings.NewReader(tt.stream), DefaultMaxAnswer, func(s string) error {
				deltas.WriteString(s)
				return nil
			})
			if err != nil {
				t.Fatalf("readAnthropicStream: %v", err)
			}
			if diff := cmp.Diff(tt.want, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if deltas.String() != tt.deltas {
				t.Errorf("deltas = %q, want %q (text only)", deltas.String(), tt.deltas)
			}
		})
	}
}

// FuzzAnthropicStream: no stream makes the reader (its SSE framing
// included) panic, fail with anything but an *Error, pass on more than
// MaxAnswer, or succeed with text other than what onDelta saw.
func FuzzAnthropicStream(f *testing.F) {
	f.Add([]byte(anthSDKRefusal))
	f.Add([]byte(anthSDKToolUse))
	f.Add([]byte(anthRedactedStream))
	f.Add([]byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"))
	f.Add([]byte("data: {\"type\":\"message_start\",\"message\":{}}\n\ndata: {\"type\":\"content_block_delta\",\"index\":-1}\n\n"))
	f.Add([]byte("event: ping\r\ndata: {}\r\n\r\n"))
	f.Add([]byte(": comment\nevent: message_start\ndata: {\"type\":\"message_start\",\ndata: \"message\":{}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}"))
	f.Add([]byte(anthHead() + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"" + strings.Repeat("x", 300) + "\"}}\n\n"))
	const maxAnswer = 256
	f.Fuzz(func(t *testing.T, b []byte) {
		var deltas strings.Builder
		res, err := readAnthropicStream(bytes.NewReader(b), maxAnswer, func(s string) error {
			deltas.WriteString(s)
			return nil
		})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v is not an *Error", err, err)
			}
			if deltas.Len() > maxAnswer {
				t.Fatalf("onDelta got %d bytes, bound %d", deltas.Len(), maxAnswer)
			}
			return
		}
		if AnswerSize(&res) > maxAnswer {
			t.Fatalf("answer of %d bytes, bound %d", AnswerSize(&res), maxAnswer)
		}
		if res.Content != deltas.String() {
			t.Fatalf("content %q, deltas %q", res.Content, deltas.String())
		}
	})
}

// anthHead is a stream's message_start event (the SDK's recording).
func anthHead() string {
	return anthSDKToolUse[:strings.Index(anthSDKToolUse, "event: content_block_start")]
}

// anthStreamN is a streamed answer of n text deltas.
func anthStreamN(n int) []byte {
	var b strings.Builder
	b.WriteString(anthHead())
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for range n {
		b.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" word\"}}\n\n")
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":1000}}\n\n")
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return []byte(b.String())
}

// BenchmarkAnthropicStream1K: reading a stream of 1000 text deltas (SSE
// framing and JSON decoding), per stream.
func BenchmarkAnthropicStream1K(b *testing.B) {
	body := anthStreamN(1000)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := readAnthropicStream(bytes.NewReader(body), DefaultMaxAnswer, func(string) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
