package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/actors/gateway/agentrun/llm"
	"gatehouse/actors/gateway/agentrun/llm/llmtest"
)

const anthropicKey = "sk-ant-test-key"

// anthropicClient is a client of stub a (type alias "anthropic").
func anthropicClient(t *testing.T, a *llmtest.Anthropic, settings string, maxAnswer int) llm.Client {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	var raw json.RawMessage
	if settings != "" {
		raw = json.RawMessage(settings)
	}
	c, err := llm.New(llm.Config{Type: "anthropic", APIBase: a.URL, Key: anthropicKey, Settings: raw, MaxAnswer: maxAnswer, HTTP: hc})
	if err != nil {
		t.Fatalf("llm.New: %v", err)
	}
	return c
}

// collect is an onDelta that keeps the deltas.
func collect(into *[]string) llm.OnDelta {
	return func(s string) error { *into = append(*into, s); return nil }
}

func anthropicCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var anthropicTools = []llm.ToolSpec{
	{Type: "function", Function: llm.ToolSpecFunc{Name: "get_weather", Description: "Weather of a city",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
	{Type: "function", Function: llm.ToolSpecFunc{Name: "now", Parameters: nil}},
}

// TestAnthropicAnswer: a whole and a streamed answer, their usage in
// OpenAI's convention, and what the request carried.
func TestAnthropicAnswer(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "stream"}[stream], func(t *testing.T) {
			a := llmtest.NewAnthropic(t)
			a.Push(llmtest.Reply{Text: "Hello there, friend", Usage: llmtest.Usage{Prompt: 100, Completion: 4, CacheRead: 60, CacheWrite: 30}})
			c := anthropicClient(t, a, "", 0)
			var deltas []string
			var onDelta llm.OnDelta
			if stream {
				onDelta = collect(&deltas)
			}
			res, err := c.Complete(anthropicCtx(t), llm.Request{Model: "claude-sonnet-4-5", Tools: anthropicTools, Messages: []llm.Message{
				{Role: "system", Content: "You are terse."},
				{Role: "system", Content: "Answer in English."},
				{Role: "user", Content: "hi"},
			}}, onDelta)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			want := llm.Result{Content: "Hello there, friend", PromptTokens: 100, CompletionTokens: 4, CacheReadTokens: 60, CacheWriteTokens: 30, FinishReason: "stop"}
			if diff := cmp.Diff(want, res); diff != "" {
				t.Errorf("Complete() result (-want +got):\n%s", diff)
			}
			if stream {
				if diff := cmp.Diff([]string{"Hello", " there,", " friend"}, deltas); diff != "" {
					t.Errorf("deltas (-want +got):\n%s", diff)
				}
			}
			recs := a.Requests()
			if len(recs) != 1 || recs[0].Key != anthropicKey || recs[0].Header.Get("Authorization") != "" {
				t.Fatalf("requests = %d, key %q, Authorization %q; want 1 with x-api-key only", len(recs), recs[0].Key, recs[0].Header.Get("Authorization"))
			}
			got := a.Last()
			if got.KeyHeader != "x-api-key" || got.Version != "2023-06-01" || got.MaxTokens != llm.DefaultMaxTokens || got.Stream != stream {
				t.Errorf("request key header %q, version %q, max_tokens %d, stream %v", got.KeyHeader, got.Version, got.MaxTokens, got.Stream)
			}
			if len(got.System) != 1 || got.System[0].Text != "You are terse.\n\nAnswer in English." {
				t.Errorf("system = %+v, want the two system messages joined by a blank line", got.System)
			}
			if diff := cmp.Diff([]string{"system[0]", "tools[1]"}, got.CacheBreakpoints); diff != "" {
				t.Errorf("cache_control breakpoints (-want +got):\n%s", diff)
			}
			if s := string(got.Tools[1].InputSchema); s != `{"properties":{},"type":"object"}` {
				t.Errorf("tool without parameters: input_schema %s", s)
			}
		})
	}
}

// TestAnthropicMessages: the OpenAI-shaped history as the API wants it.
func TestAnthropicMessages(t *testing.T) {
	type block struct{ Type, Text, ID, Input string }
	call := func(id, name, args string) llm.ToolCall {
		return llm.ToolCall{ID: id, Type: "function", Function: llm.ToolFunction{Name: name, Arguments: args}}
	}
	tests := []struct {
		name string
		msgs []llm.Message
		want [][]block // each message's blocks; roles alternate from user
	}{{
		name: "consecutive users merged",
		msgs: []llm.Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}},
		want: [][]block{{{Type: "text", Text: "a"}, {Type: "text", Text: "b"}}},
	}, {
		name: "first assistant gets a user turn before it",
		msgs: []llm.Message{{Role: "assistant", Content: "Hi, how can I help?"}, {Role: "user", Content: "x"}},
		want: [][]block{{{Type: "text", Text: "."}}, {{Type: "text", Text: "Hi, how can I help?"}}, {{Type: "text", Text: "x"}}},
	}, {
		name: "tool results first in one user turn, bad arguments read as {}",
		msgs: []llm.Message{
			{Role: "user", Content: "go"},
			{Role: "assistant", Content: "Let me check.", ToolCalls: []llm.ToolCall{call("t1", "get_weather", `{"city":"Oslo"}`), call("t2", "now", ""), call("t3", "now", "not json")}},
			{Role: "tool", ToolCallID: "t1", Content: "rain"},
			{Role: "tool", ToolCallID: "t2", Content: "noon"},
			{Role: "tool", ToolCallID: "t3", Content: ""},
			{Role: "user", Content: "and?"},
		},
		want: [][]block{
			{{Type: "text", Text: "go"}},
			{{Type: "text", Text: "Let me check."}, {Type: "tool_use", ID: "t1", Input: `{"city":"Oslo"}`}, {Type: "tool_use", ID: "t2", Input: `{}`}, {Type: "tool_use", ID: "t3", Input: `{}`}},
			{{Type: "tool_result", ID: "t1", Text: "rain"}, {Type: "tool_result", ID: "t2", Text: "noon"}, {Type: "tool_result", ID: "t3"}, {Type: "text", Text: "and?"}},
		},
	}, {
		name: "unanswered tool_use answered as an error, orphan result kept as text",
		msgs: []llm.Message{
			{Role: "user", Content: "go"},
			{Role: "assistant", ToolCalls: []llm.ToolCall{call("t1", "now", "{}")}},
			{Role: "tool", ToolCallID: "zz", Content: "stray"},
		},
		want: [][]block{
			{{Type: "text", Text: "go"}},
			{{Type: "tool_use", ID: "t1", Input: `{}`}},
			{{Type: "tool_result", ID: "t1", Text: "no result: the tool call was not completed"}, {Type: "text", Text: "tool result zz: stray"}},
		},
	}, {
		name: "thinking dropped without thinking on, a final assistant (prefill) kept",
		msgs: []llm.Message{
			{Role: "user", Content: "a"},
			{Role: "assistant", Content: "The answer is", Thinking: []llm.Thinking{{Text: "hmm", Signature: "sig-x"}, {Redacted: "r"}}},
		},
		want: [][]block{{{Type: "text", Text: "a"}}, {{Type: "text", Text: "The answer is"}}},
	}, {
		name: "unsigned thinking dropped, empty assistant skipped",
		msgs: []llm.Message{
			{Role: "user", Content: "a"},
			{Role: "assistant", Content: " ", Thinking: []llm.Thinking{{Text: "hmm"}}},
			{Role: "user", Content: "b"},
		},
		want: [][]block{{{Type: "text", Text: "a"}, {Type: "text", Text: "b"}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := llmtest.NewAnthropic(t)
			c := anthropicClient(t, a, "", 0)
			if _, err := c.Complete(anthropicCtx(t), llm.Request{Model: "m", Messages: tt.msgs}, nil); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			var got [][]block
			for _, m := range a.Last().Messages {
				var bs []block
				for _, b := range m.Content {
					x := block{Type: b.Type, Text: b.Text, ID: b.ID, Input: string(b.Input)}
					if b.Type == "tool_result" {
						x.ID, x.Text = b.ToolUseID, b.ResultText()
					}
					bs = append(bs, x)
				}
				got = append(got, bs)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("messages sent (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAnthropicToolLoop: call → result → call → result → answer, with
// thinking on: the stub checks each tool_result's place and id and that
// the thinking blocks come back first with their signatures unchanged.
func TestAnthropicToolLoop(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "stream"}[stream], func(t *testing.T) {
			a := llmtest.NewAnthropic(t)
			a.Push(
				llmtest.Reply{Thinking: "I need the weather first", ToolCalls: []llmtest.Call{{ID: "toolu_1", Name: "get_weather", Args: `{"city":"Oslo"}`}}},
				llmtest.Reply{Thinking: "and the time", Text: "One more.", ToolCalls: []llmtest.Call{{ID: "toolu_2", Name: "now"}}},
				llmtest.Reply{Text: "Rainy at noon."},
			)
			c := anthropicClient(t, a, `{"thinking_budget_tokens": 2048, "max_tokens": 1000}`, 0)
			msgs := []llm.Message{{Role: "user", Content: "weather in Oslo?"}}
			var onDelta llm.OnDelta
			var deltas []string
			if stream {
				onDelta = collect(&deltas)
			}
			var res llm.Result
			var sigs []string
			for i, result := range []string{"rain", "noon", ""} {
				var err error
				res, err = c.Complete(anthropicCtx(t), llm.Request{Model: "claude-sonnet-4-5", Messages: msgs, Tools: anthropicTools}, onDelta)
				if err != nil {
					t.Fatalf("Complete #%d: %v", i+1, err)
				}
				if result == "" {
					break
				}
				if res.FinishReason != "tool_calls" || len(res.ToolCalls) != 1 || len(res.Thinking) != 1 || res.Thinking[0].Signature == "" {
					t.Fatalf("Complete #%d = %+v, want one tool call with a signed thinking block", i+1, res)
				}
				sigs = append(sigs, res.Thinking[0].Signature)
				msgs = append(msgs,
					llm.Message{Role: "assistant", Content: res.Content, ToolCalls: res.ToolCalls, Thinking: res.Thinking},
					llm.Message{Role: "tool", ToolCallID: res.ToolCalls[0].ID, Content: result})
			}
			if res.Content != "Rainy at noon." || res.FinishReason != "stop" {
				t.Errorf("final answer = %+v", res)
			}
			if stream && strings.Join(deltas, "") != "One more.Rainy at noon." {
				t.Errorf("deltas = %q: only text goes to onDelta", deltas)
			}
			reqs := a.Decoded()
			if len(reqs) != 3 {
				t.Fatalf("requests = %d, want 3", len(reqs))
			}
			second := reqs[1]
			if second.Thinking == nil || second.Thinking.BudgetTokens != 2048 || second.MaxTokens != 2048+llm.DefaultMaxTokens {
				t.Errorf("thinking %+v, max_tokens %d: want budget 2048 and max_tokens above it", second.Thinking, second.MaxTokens)
			}
			last := second.Messages[len(second.Messages)-1]
			if last.Role != "user" || last.Content[0].Type != "tool_result" || last.Content[0].ToolUseID != "toolu_1" {
				t.Errorf("second request's last message = %+v, want the tool_result of toolu_1 first", last)
			}
			prev := second.Messages[len(second.Messages)-2]
			if prev.Content[0].Type != "thinking" || prev.Content[0].Signature != sigs[0] || prev.Content[0].Thinking != "I need the weather first" {
				t.Errorf("assistant turn = %+v, want its thinking block first", prev)
			}
		})
	}
}

// TestAnthropicThinkingOffMidLoop: with thinking set, a tool loop whose
// assistant turn has no thinking block of Anthropic's (a history from
// another provider) is sent without thinking, which the API would refuse.
func TestAnthropicThinkingOffMidLoop(t *testing.T) {
	a := llmtest.NewAnthropic(t)
	c := anthropicClient(t, a, `{"thinking_budget_tokens": 1024}`, 0)
	msgs := []llm.Message{
		{Role: "user", Content: "time?"},
		{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "call_1", Type: "function", Function: llm.ToolFunction{Name: "now"}}},
			Thinking: []llm.Thinking{{Signature: llm.GeminiSignaturePrefix + "c2ln"}}}, // Gemini's, after a fallback
		{Role: "tool", ToolCallID: "call_1", Content: "noon"},
	}
	ctx := anthropicCtx(t)
	if _, err := c.Complete(ctx, llm.Request{Model: "m", Messages: msgs, Tools: anthropicTools}, nil); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if th := a.Last().Thinking; th != nil {
		t.Errorf("thinking = %+v, want none mid tool loop without a thinking block", th)
	}
	msgs = append(msgs, llm.Message{Role: "assistant", Content: "It is noon."}, llm.Message{Role: "user", Content: "thanks"})
	if _, err := c.Complete(ctx, llm.Request{Model: "m", Messages: msgs, Tools: anthropicTools}, nil); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if th := a.Last().Thinking; th == nil || th.BudgetTokens != 1024 {
		t.Errorf("thinking = %+v, want budget 1024 on a new user turn", th)
	}
}

// TestAnthropicErrors: error statuses, whole and streamed, as *llm.Error
// with the provider's type and the wait it asks for.
func TestAnthropicErrors(t *testing.T) {
	tests := []struct {
		name              string
		reply             llmtest.Reply
		status            int
		typ               string
		retry             time.Duration
		retryable, keyRej bool
	}{
		{"401", llmtest.Reply{Status: 401, ErrorMessage: "invalid x-api-key"}, 401, "authentication_error", 0, false, true},
		{"400", llmtest.Reply{Status: 400, ErrorMessage: "bad"}, 400, "invalid_request_error", 0, false, false},
		{"429 retry-after", llmtest.Reply{Status: 429, Headers: map[string]string{"retry-after": "7"}}, 429, "rate_limit_error", 7 * time.Second, true, false},
		{"500", llmtest.Reply{Status: 500}, 500, "api_error", 0, true, false},
		{"529 overloaded", llmtest.Reply{Status: 529, ErrorMessage: "Overloaded"}, 529, "overloaded_error", 0, true, false},
		{"502 html", llmtest.Reply{Status: 502, Raw: "<html>bad gateway</html>"}, 502, "", 0, true, false},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(tt.name+map[bool]string{false: "/whole", true: "/stream"}[stream], func(t *testing.T) {
				a := llmtest.NewAnthropic(t)
				a.Push(tt.reply)
				c := anthropicClient(t, a, "", 0)
				var onDelta llm.OnDelta
				if stream {
					onDelta = func(string) error { return nil }
				}
				_, err := c.Complete(anthropicCtx(t), llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, onDelta)
				var e *llm.Error
				if !errors.As(err, &e) {
					t.Fatalf("Complete error = %v (%T), want *llm.Error", err, err)
				}
				if e.Kind != llm.KindStatus || e.Status != tt.status || e.Type != tt.typ || e.RetryAfter != tt.retry ||
					e.Retryable() != tt.retryable || e.KeyRejected() != tt.keyRej {
					t.Errorf("Complete error = %+v (retryable %v), want status %d type %q retry %v retryable %v", e, e.Retryable(), tt.status, tt.typ, tt.retry, tt.retryable)
				}
				if strings.Contains(e.Error(), anthropicKey) {
					t.Errorf("error %q holds the key", e)
				}
			})
		}
	}
}

// TestAnthropicStreamError: an error event mid-stream is a KindStream
// *llm.Error, never a partial success.
func TestAnthropicStreamError(t *testing.T) {
	a := llmtest.NewAnthropic(t)
	a.Push(llmtest.Reply{Text: "one two three four", StreamErrorAfter: 2, ErrorType: "overloaded_error", ErrorMessage: "Overloaded"})
	c := anthropicClient(t, a, "", 0)
	var deltas []string
	res, err := c.Complete(anthropicCtx(t), llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, collect(&deltas))
	var e *llm.Error
	if !errors.As(err, &e) || e.Kind != llm.KindStream || e.Type != "overloaded_error" || e.Message != "Overloaded" || !e.Retryable() {
		t.Fatalf("Complete = %+v, %v; want a retryable stream error overloaded_error", res, err)
	}
	if len(deltas) != 2 {
		t.Errorf("deltas = %q, want the 2 before the error", deltas)
	}
}

// TestAnthropicCancel: a cancelled call returns ctx's error at once,
// mid-stream or while waiting for a whole answer.
func TestAnthropicCancel(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "stream"}[stream], func(t *testing.T) {
			a := llmtest.NewAnthropic(t)
			a.Push(llmtest.Reply{Text: "never ending story", Hang: true})
			c := anthropicClient(t, a, "", 0)
			ctx, cancel := context.WithCancel(anthropicCtx(t))
			var onDelta llm.OnDelta
			if stream {
				onDelta = func(string) error { cancel(); return nil } // cancel on the first delta
			} else {
				time.AfterFunc(100*time.Millisecond, cancel)
			}
			start := time.Now()
			_, err := c.Complete(ctx, llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, onDelta)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Complete error = %v, want context.Canceled", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Complete returned after %v", d)
			}
		})
	}
}

// TestAnthropicOnDeltaError: onDelta's error comes back unchanged.
func TestAnthropicOnDeltaError(t *testing.T) {
	a := llmtest.NewAnthropic(t)
	a.Push(llmtest.Reply{Text: "a b c"})
	c := anthropicClient(t, a, "", 0)
	stop := errors.New("client left")
	_, err := c.Complete(anthropicCtx(t), llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, func(string) error { return stop })
	if !errors.Is(err, stop) {
		t.Fatalf("Complete error = %v, want onDelta's", err)
	}
}

const anthropicSSEHead = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"

// TestAnthropicMalformed: answers the client cannot read are a clean
// *llm.Error, never a panic, a hang or a partial success.
func TestAnthropicMalformed(t *testing.T) {
	tests := []struct {
		name   string
		stream bool
		raw    string
		kind   string
	}{
		{"whole not json", false, "not json at all", llm.KindMalformed},
		{"whole truncated", false, `{"type":"message","content":[{"type":"text","text":"hi`, llm.KindMalformed},
		{"whole not a message", false, `{"hello":"world"}`, llm.KindMalformed},
		{"whole blank", false, " ", llm.KindMalformed},
		{"stream garbage", true, "garbage\n\nmore garbage\n\n", llm.KindMalformed},
		{"stream bad json", true, anthropicSSEHead + "event: content_block_start\ndata: {not json}\n\n", llm.KindMalformed},
		{"stream ends early", true, anthropicSSEHead + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n", llm.KindMalformed},
		{"stream delta before start", true, anthropicSSEHead + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n", llm.KindMalformed},
		{"stream no message_start", true, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", llm.KindMalformed},
		{"stream bad error event", true, anthropicSSEHead + "event: error\ndata: {oops\n\n", llm.KindStream},
		{"stream wrong delta type", true, anthropicSSEHead + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n", llm.KindMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := llmtest.NewAnthropic(t)
			a.Push(llmtest.Reply{Raw: tt.raw})
			c := anthropicClient(t, a, "", 0)
			var onDelta llm.OnDelta
			if tt.stream {
				onDelta = func(string) error { return nil }
			}
			res, err := c.Complete(anthropicCtx(t), llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, onDelta)
			var e *llm.Error
			if !errors.As(err, &e) || e.Kind != tt.kind {
				t.Fatalf("Complete = %+v, %v; want an *llm.Error of kind %s", res, err, tt.kind)
			}
		})
	}
}

// TestAnthropicTooLarge: an answer past MaxAnswer fails, whole or
// streamed, and so do one SSE event and a whole body past the body bound.
func TestAnthropicTooLarge(t *testing.T) {
	long := strings.Repeat("word ", 100)
	huge := anthropicSSEHead + "event: ping\ndata: {\"type\":\"ping\",\"pad\":\"" + strings.Repeat("x", 200<<10) + "\"}\n\n"
	tests := []struct {
		name   string
		reply  llmtest.Reply
		stream bool
	}{
		{"whole", llmtest.Reply{Text: long}, false},
		{"stream", llmtest.Reply{Text: long}, true},
		{"tool arguments", llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "f", Args: `{"a":"` + strings.Repeat("y", 300) + `"}`}}}, true},
		{"huge event", llmtest.Reply{Raw: huge}, true},
		{"whole body past its bound", llmtest.Reply{Raw: `{"type":"message","content":[],"pad":"` + strings.Repeat("x", 200<<10) + `"}`}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := llmtest.NewAnthropic(t)
			a.Push(tt.reply)
			c := anthropicClient(t, a, "", 100)
			var deltas []string
			var onDelta llm.OnDelta
			if tt.stream {
				onDelta = collect(&deltas)
			}
			_, err := c.Complete(anthropicCtx(t), llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, onDelta)
			var e *llm.Error
			if !errors.As(err, &e) || e.Kind != llm.KindMalformed || !strings.Contains(e.Message, "larger than 100") {
				t.Fatalf("Complete error = %v, want too large", err)
			}
			if n := len(strings.Join(deltas, "")); n > 100 {
				t.Errorf("onDelta got %d bytes past the bound", n)
			}
		})
	}
}

// TestAnthropicModels: the list, Verify, and a rejected key.
func TestAnthropicModels(t *testing.T) {
	a := llmtest.NewAnthropic(t)
	c := anthropicClient(t, a, "", 0)
	ctx := anthropicCtx(t)
	models, err := c.Models(ctx)
	if err != nil {
		t.Fatalf("Models: %v", err)
	}
	want := []llm.Model{{ID: "claude-sonnet-4-5-20250929", DisplayName: "Claude Sonnet 4.5"}, {ID: "claude-haiku-4-5-20251001", DisplayName: "Claude Haiku 4.5"}}
	if diff := cmp.Diff(want, models); diff != "" {
		t.Errorf("Models (-want +got):\n%s", diff)
	}
	if err := c.Verify(ctx); err != nil {
		t.Errorf("Verify: %v", err)
	}
	if r := a.Requests(); len(r) != 2 || r[1].Path != "/v1/models" || r[1].Query != "limit=1" || r[1].Key != anthropicKey {
		t.Errorf("Verify sent %+v, want GET /v1/models?limit=1 with the key", r[len(r)-1])
	}
	a.OnKey(anthropicKey, llmtest.Reply{Status: 401})
	err = c.Verify(ctx)
	var e *llm.Error
	if !errors.As(err, &e) || !e.KeyRejected() {
		t.Errorf("Verify with a revoked key = %v, want a rejected key", err)
	}
	if _, err := c.Models(ctx); !errors.As(err, &e) || e.Status != 401 {
		t.Errorf("Models with a revoked key = %v, want 401", err)
	}
}

// TestAnthropicModelsPages: a list longer than a page is followed.
func TestAnthropicModelsPages(t *testing.T) {
	a := llmtest.NewAnthropic(t)
	for i := range 1500 {
		a.Models = append(a.Models, llmtest.AnthropicModel{ID: "m" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + time.Duration(i).String()})
	}
	c := anthropicClient(t, a, "", 0)
	models, err := c.Models(anthropicCtx(t))
	if err != nil || len(models) != 1502 {
		t.Fatalf("Models = %d models, %v; want 1502", len(models), err)
	}
}

// TestAnthropicUnreachable: nothing listening is KindUnreachable.
func TestAnthropicUnreachable(t *testing.T) {
	a := llmtest.NewAnthropic(t)
	c := anthropicClient(t, a, "", 0)
	a.Close()
	_, err := c.Complete(anthropicCtx(t), llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, nil)
	var e *llm.Error
	if !errors.As(err, &e) || e.Kind != llm.KindUnreachable || !e.Retryable() {
		t.Fatalf("Complete error = %v, want unreachable", err)
	}
}

// TestAnthropicConnReuse: a finished stream leaves its connection to the
// pool.
func TestAnthropicConnReuse(t *testing.T) {
	a := llmtest.NewAnthropic(t)
	c := anthropicClient(t, a, "", 0)
	var reused []bool
	ctx := httptrace.WithClientTrace(anthropicCtx(t), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }})
	for range 3 {
		if _, err := c.Complete(ctx, llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, func(string) error { return nil }); err != nil {
			t.Fatalf("Complete: %v", err)
		}
	}
	if diff := cmp.Diff([]bool{false, true, true}, reused); diff != "" {
		t.Errorf("connections reused (-want +got):\n%s", diff)
	}
}

// TestAnthropicSettings: settings checks, max_tokens and caching.
func TestAnthropicSettings(t *testing.T) {
	info, ok := llm.Lookup("anthropic")
	if !ok || info.Name != "anthropic_native" || info.DefaultBase != "https://api.anthropic.com" || !info.NeedsKey {
		t.Fatalf("Lookup(anthropic) = %+v, %v", info, ok)
	}
	bad := map[string]string{
		`{"max_tokens": "many"}`:           "settings.max_tokens",
		`{"max_tokens": 0}`:                "settings.max_tokens",
		`{"prompt_caching": "yes"}`:        "settings.prompt_caching",
		`{"thinking_budget_tokens": 1000}`: "settings.thinking_budget_tokens",
		`{"thinking_budget_tokens": 1.5}`:  "settings.thinking_budget_tokens",
		`[1]`:                              "settings",
	}
	for s, field := range bad {
		if err := info.Validate("", json.RawMessage(s)); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate(%s) = %v, want an error naming %s", s, err, field)
		}
	}
	if err := info.Validate("ftp://x", nil); err == nil {
		t.Errorf("Validate(ftp base) = nil")
	}
	if err := info.Validate("", json.RawMessage(`{"max_tokens": 100, "prompt_caching": false, "thinking_budget_tokens": 1024, "api_keys": 3}`)); err != nil {
		t.Errorf("Validate(good) = %v", err)
	}

	tests := []struct {
		settings    string
		reqMax      int
		wantMax     int
		breakpoints []string
	}{
		{``, 0, llm.DefaultMaxTokens, []string{"system[0]", "tools[1]"}},
		{`{"max_tokens": 300}`, 0, 300, []string{"system[0]", "tools[1]"}},
		{`{"max_tokens": 300}`, 50, 50, []string{"system[0]", "tools[1]"}},
		{`{"prompt_caching": false}`, 0, llm.DefaultMaxTokens, nil},
		{`{"thinking_budget_tokens": 1024}`, 5000, 5000, []string{"system[0]", "tools[1]"}},
		{`{"thinking_budget_tokens": 8000}`, 5000, 8000 + llm.DefaultMaxTokens, []string{"system[0]", "tools[1]"}},
	}
	for _, tt := range tests {
		a := llmtest.NewAnthropic(t)
		c := anthropicClient(t, a, tt.settings, 0)
		_, err := c.Complete(anthropicCtx(t), llm.Request{Model: "m", MaxTokens: tt.reqMax, Tools: anthropicTools,
			Messages: []llm.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "hi"}}}, nil)
		if err != nil {
			t.Fatalf("Complete(%s): %v", tt.settings, err)
		}
		got := a.Last()
		if got.MaxTokens != tt.wantMax || !cmp.Equal(got.CacheBreakpoints, tt.breakpoints) {
			t.Errorf("settings %s, request max %d: max_tokens %d, breakpoints %q; want %d, %q", tt.settings, tt.reqMax, got.MaxTokens, got.CacheBreakpoints, tt.wantMax, tt.breakpoints)
		}
	}
}

// TestAnthropicIgnoresEnvironment: ANTHROPIC_* variables (which the
// official SDK reads) change nothing; the provider's own base and key are
// used.
func TestAnthropicIgnoresEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-from-env")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "tok-from-env")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Leak: yes")
	a := llmtest.NewAnthropic(t)
	c := anthropicClient(t, a, "", 0)
	if _, err := c.Complete(anthropicCtx(t), llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, nil); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	r := a.Requests()[0]
	if r.Key != anthropicKey || r.Header.Get("Authorization") != "" || r.Header.Get("X-Leak") != "" {
		t.Errorf("request key %q, Authorization %q, X-Leak %q: the environment leaked in", r.Key, r.Header.Get("Authorization"), r.Header.Get("X-Leak"))
	}
}

// TestAnthropicLargeMaxTokensWhole: a whole answer with a large
// max_tokens is asked for (the official SDK refuses one it expects to take
// over ten minutes, or past a model's non-streaming limit).
func TestAnthropicLargeMaxTokensWhole(t *testing.T) {
	a := llmtest.NewAnthropic(t)
	c := anthropicClient(t, a, "", 0)
	for _, model := range []string{"claude-sonnet-4-5", "claude-opus-4-0"} {
		_, err := c.Complete(anthropicCtx(t), llm.Request{Model: model, MaxTokens: 64000, Messages: []llm.Message{{Role: "user", Content: "hi"}}}, nil)
		if err != nil {
			t.Fatalf("Complete(%s, max_tokens 64000): %v", model, err)
		}
		if got := a.Last().MaxTokens; got != 64000 {
			t.Errorf("max_tokens = %d, want 64000", got)
		}
	}
}
