package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/actors/gateway/agentrun/llm"
	"gatehouse/actors/gateway/agentrun/llm/llmtest"
)

const gemKey = "AIza-test-key"

// gemClient builds a gemini client (through the alias) against stub,
// its base given with the API version as some users write it.
func gemClient(t *testing.T, stub *llmtest.Gemini, settings string, maxAnswer int) llm.Client {
	t.Helper()
	cfg := llm.Config{Type: "gemini", APIBase: stub.URL + "/v1beta/", Key: gemKey, MaxAnswer: maxAnswer, HTTP: stub.Client()}
	if settings != "" {
		cfg.Settings = json.RawMessage(settings)
	}
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatalf("llm.New(gemini) = %v", err)
	}
	return c
}

// gemBody decodes a recorded request body.
func gemBody(t *testing.T, r llmtest.Recorded) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("request body: %v", err)
	}
	return m
}

func gemJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

var gemCallIDRE = regexp.MustCompile(`^call_[0-9a-f]{24}$`)

func TestGeminiAnswer(t *testing.T) {
	msgs := []llm.Message{
		{Role: "system", Content: "Be brief."},
		{Role: "developer", Content: "Answer in English."},
		{Role: "user", Content: "Hi"},
		{Role: "user", Content: "How are you?"},
	}
	tests := []struct {
		name      string
		stream    bool
		settings  string
		maxTokens int
		reply     llmtest.Reply
		wantGen   string
		want      llm.Result
	}{
		{
			name:  "whole",
			reply: llmtest.Reply{Text: "Fine, thanks."},
			want:  llm.Result{Content: "Fine, thanks.", PromptTokens: 10, CompletionTokens: 2, FinishReason: "stop"},
		},
		{
			name:      "streamed with usage parts",
			stream:    true,
			maxTokens: 100,
			settings:  `{"max_tokens": 50, "thinking_budget_tokens": 1024}`,
			reply:     llmtest.Reply{Text: "Fine, thanks, and you?", Usage: llmtest.Usage{Prompt: 120, Completion: 40, CacheRead: 100, Reasoning: 30}},
			wantGen:   `{"maxOutputTokens":100,"thinkingConfig":{"thinkingBudget":1024}}`,
			want:      llm.Result{Content: "Fine, thanks, and you?", PromptTokens: 120, CompletionTokens: 40, CacheReadTokens: 100, ReasoningTokens: 30, FinishReason: "stop"},
		},
		{
			name:     "settings max_tokens",
			settings: `{"max_tokens": 50}`,
			reply:    llmtest.Reply{Text: "ok"},
			wantGen:  `{"maxOutputTokens":50}`,
			want:     llm.Result{Content: "ok", PromptTokens: 10, CompletionTokens: 1, FinishReason: "stop"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub := llmtest.NewGemini(t)
			stub.Push(tt.reply)
			c := gemClient(t, stub, tt.settings, 0)
			var deltas []string
			var onDelta llm.OnDelta
			if tt.stream {
				onDelta = func(s string) error { deltas = append(deltas, s); return nil }
			}
			got, err := c.Complete(context.Background(), llm.Request{Model: "gemini-2.5-flash", Messages: msgs, MaxTokens: tt.maxTokens}, onDelta)
			if err != nil {
				t.Fatalf("Complete = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Complete result (-want +got):\n%s", diff)
			}
			if tt.stream {
				if diff := cmp.Diff(llmtest.Words(tt.reply.Text), deltas); diff != "" {
					t.Errorf("deltas (-want +got):\n%s", diff)
				}
			}
			reqs := stub.Requests()
			if len(reqs) != 1 {
				t.Fatalf("stub got %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			wantPath := "/v1beta/models/gemini-2.5-flash:generateContent"
			if tt.stream {
				wantPath = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
				if r.Query != "alt=sse" {
					t.Errorf("query = %q, want alt=sse", r.Query)
				}
			}
			if r.Path != wantPath || r.Key != gemKey || r.Header.Get("x-goog-api-key") != gemKey {
				t.Errorf("request %s key %q, want %s with x-goog-api-key", r.Path, r.Key, wantPath)
			}
			body := gemBody(t, r)
			if got, want := gemJSON(body["systemInstruction"]), `{"parts":[{"text":"Be brief.\n\nAnswer in English."}]}`; got != want {
				t.Errorf("systemInstruction = %s, want %s", got, want)
			}
			if got, want := gemJSON(body["contents"]), `[{"parts":[{"text":"Hi"},{"text":"How are you?"}],"role":"user"}]`; got != want {
				t.Errorf("contents = %s, want %s", got, want)
			}
			if got := body["generationConfig"]; (tt.wantGen == "") != (got == nil) || (got != nil && gemJSON(got) != tt.wantGen) {
				t.Errorf("generationConfig = %s, want %s", gemJSON(got), tt.wantGen)
			}
		})
	}
}

var gemTools = []llm.ToolSpec{{Type: "function", Function: llm.ToolSpecFunc{
	Name:        "get_weather",
	Description: "Weather of a city",
	Parameters: json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
		"properties":{"city":{"type":"string","format":"uri"},"unit":{"type":["string","null"],"enum":["C","F"]},
		"when":{"$ref":"#/$defs/day"},"tags":{"type":"array","items":{"type":"string"},"uniqueItems":true}},
		"required":["city","ghost"],"additionalProperties":false,"$defs":{"day":{"type":"string","const":"today"}}}`),
}}, {Type: "function", Function: llm.ToolSpecFunc{Name: "now", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}}

// TestGeminiToolLoop runs two tool iterations then an answer; the stub
// checks each later request's functionCall/functionResponse placement,
// names and thought signatures.
func TestGeminiToolLoop(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "streamed"}[stream], func(t *testing.T) {
			stub := llmtest.NewGemini(t)
			stub.Push(
				llmtest.Reply{Text: "Let me check.", ToolCalls: []llmtest.Call{{Name: "get_weather", Args: `{"city":"Paris"}`}, {Name: "now"}}},
				llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "get_weather", Args: `{"city":"Rome"}`}}},
				llmtest.Reply{Text: "Sunny in both."},
			)
			c := gemClient(t, stub, "", 0)
			var onDelta llm.OnDelta
			if stream {
				onDelta = func(string) error { return nil }
			}
			msgs := []llm.Message{{Role: "user", Content: "Weather in Paris and Rome?"}}
			var res llm.Result
			for i := range 3 {
				var err error
				res, err = c.Complete(context.Background(), llm.Request{Model: "gemini-2.5-pro", Messages: msgs, Tools: gemTools}, onDelta)
				if err != nil {
					t.Fatalf("iteration %d: Complete = %v", i, err)
				}
				if i == 2 {
					break
				}
				if res.FinishReason != "tool_calls" || len(res.ToolCalls) == 0 {
					t.Fatalf("iteration %d: result %+v, want tool calls", i, res)
				}
				msgs = append(msgs, llm.Message{Role: "assistant", Content: res.Content, ToolCalls: res.ToolCalls, Thinking: res.Thinking})
				for _, call := range res.ToolCalls {
					if !gemCallIDRE.MatchString(call.ID) || call.Type != "function" {
						t.Errorf("tool call id %q type %q, want call_ + 24 hex, function", call.ID, call.Type)
					}
					msgs = append(msgs, llm.Message{Role: "tool", ToolCallID: call.ID, Content: "result of " + call.Function.Name})
				}
			}
			if res.Content != "Sunny in both." || res.FinishReason != "stop" {
				t.Errorf("final result %+v", res)
			}
			reqs := stub.Requests()
			if len(reqs) != 3 {
				t.Fatalf("stub got %d requests, want 3", len(reqs))
			}
			first := gemBody(t, reqs[0])
			wantTools := `[{"functionDeclarations":[{"description":"Weather of a city","name":"get_weather","parameters":{"properties":{"city":{"type":"STRING"},"tags":{"items":{"type":"STRING"},"type":"ARRAY"},"unit":{"enum":["C","F"],"nullable":true,"type":"STRING"},"when":{"enum":["today"],"type":"STRING"}},"required":["city"],"type":"OBJECT"}},{"name":"now"}]}]`
			if got := gemJSON(first["tools"]); got != wantTools {
				t.Errorf("tools = %s\nwant    %s", got, wantTools)
			}
			last := gemBody(t, reqs[2])
			contents := last["contents"].([]any)
			roles := make([]string, len(contents))
			for i, c := range contents {
				roles[i] = c.(map[string]any)["role"].(string)
			}
			if diff := cmp.Diff([]string{"user", "model", "user", "model", "user"}, roles); diff != "" {
				t.Errorf("roles (-want +got):\n%s", diff)
			}
			wantResp := `[{"functionResponse":{"name":"get_weather","response":{"content":"result of get_weather"}}},{"functionResponse":{"name":"now","response":{"content":"result of now"}}}]`
			if got := gemJSON(contents[2].(map[string]any)["parts"]); got != wantResp {
				t.Errorf("first tool results = %s\nwant %s", got, wantResp)
			}
			model := gemJSON(contents[1].(map[string]any)["parts"])
			if !strings.Contains(model, `{"text":"Let me check."}`) || !strings.Contains(model, `"args":{"city":"Paris"}`) || !strings.Contains(model, `"thoughtSignature":`) {
				t.Errorf("first model turn = %s, want text, call args and its signature", model)
			}
		})
	}
}

// TestGeminiForeignHistory sends a tool loop Gemini did not produce (no
// signatures: a client's own history, another provider's calls): the
// first call carries the documented dummy signature.
func TestGeminiForeignHistory(t *testing.T) {
	stub := llmtest.NewGemini(t)
	c := gemClient(t, stub, "", 0)
	msgs := []llm.Message{
		{Role: "assistant", Content: "Hello, how can I help?"},
		{Role: "user", Content: "Weather?"},
		{Role: "assistant", Thinking: []llm.Thinking{{Text: "Anthropic's thought", Signature: "EqQBCkYIBxgCKkBanthropic"}, {Redacted: "opaque"}, {Signature: "not-gemini"}}, ToolCalls: []llm.ToolCall{{ID: "toolu_1", Type: "function", Function: llm.ToolFunction{Name: "get_weather", Arguments: `{"city":"Oslo"}`}}, {ID: "toolu_2", Type: "function", Function: llm.ToolFunction{Name: "now", Arguments: "not json"}}}},
		{Role: "tool", ToolCallID: "toolu_2", Content: "noon"},
		{Role: "tool", ToolCallID: "toolu_1", Content: "rain"},
		{Role: "user", Content: "And so?"},
	}
	res, err := c.Complete(context.Background(), llm.Request{Model: "gemini-2.5-flash", Messages: msgs, Tools: gemTools}, nil)
	if err != nil {
		t.Fatalf("Complete = %v", err)
	}
	if res.Content != "stub: And so?" {
		t.Errorf("Content = %q", res.Content)
	}
	body := gemBody(t, stub.Requests()[0])
	want := `[{"parts":[{"text":"(conversation start)"}],"role":"user"},{"parts":[{"text":"Hello, how can I help?"}],"role":"model"},{"parts":[{"text":"Weather?"}],"role":"user"},` +
		`{"parts":[{"functionCall":{"args":{"city":"Oslo"},"name":"get_weather"},"thoughtSignature":"skip_thought_signature_validator"},{"functionCall":{"args":{},"name":"now"}}],"role":"model"},` +
		`{"parts":[{"functionResponse":{"name":"now","response":{"content":"noon"}}},{"functionResponse":{"name":"get_weather","response":{"content":"rain"}}},{"text":"And so?"}],"role":"user"}]`
	if got := gemJSON(body["contents"]); got != want {
		t.Errorf("contents = %s\nwant       %s", got, want)
	}

	// Ending on the tool results, the foreign calls are in the current
	// turn, where Gemini 3 checks signatures (the stub too).
	if _, err := c.Complete(context.Background(), llm.Request{Model: "gemini-2.5-flash", Messages: msgs[:5], Tools: gemTools}, nil); err != nil {
		t.Fatalf("Complete ending on tool results = %v", err)
	}

	_, err = c.Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "x"}, {Role: "tool", ToolCallID: "nope", Content: "?"}}}, nil)
	var e *llm.Error
	if !errors.As(err, &e) || e.Status != 400 || e.Retryable() || len(stub.Requests()) != 2 {
		t.Errorf("tool result without its call: err %v (sent %d requests), want a 400 *llm.Error before any request", err, len(stub.Requests()))
	}
}

func TestGeminiErrors(t *testing.T) {
	retryInfo := `{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"}]}}`
	tests := []struct {
		name             string
		reply            llmtest.Reply
		status           int
		typ              string
		retryAfter       time.Duration
		retryable, keyNo bool
	}{
		{name: "401", reply: llmtest.Reply{Status: 401, ErrorMessage: "API keys are not supported by this API."}, status: 401, typ: "UNAUTHENTICATED", keyNo: true},
		{name: "bad key is 400 on the wire", reply: llmtest.Reply{Status: 400, ErrorType: "API_KEY_INVALID", ErrorMessage: "API key not valid. Please pass a valid API key."}, status: 401, typ: "INVALID_ARGUMENT", keyNo: true},
		{name: "429 Retry-After", reply: llmtest.Reply{Status: 429, Headers: map[string]string{"Retry-After": "3"}}, status: 429, typ: "RESOURCE_EXHAUSTED", retryAfter: 3 * time.Second, retryable: true},
		{name: "429 RetryInfo only", reply: llmtest.Reply{Status: 429, Raw: retryInfo}, status: 429, typ: "RESOURCE_EXHAUSTED", retryAfter: 7 * time.Second, retryable: true},
		{name: "500", reply: llmtest.Reply{Status: 500}, status: 500, typ: "INTERNAL", retryable: true},
		{name: "503 overloaded", reply: llmtest.Reply{Status: 503, ErrorMessage: "The model is overloaded. Please try again later."}, status: 503, typ: "UNAVAILABLE", retryable: true},
		{name: "400", reply: llmtest.Reply{Status: 400, ErrorMessage: "Invalid argument"}, status: 400, typ: "INVALID_ARGUMENT"},
		{name: "404 plain text", reply: llmtest.Reply{Status: 404, Raw: "not here"}, status: 404},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(tt.name+map[bool]string{false: "", true: " streamed"}[stream], func(t *testing.T) {
				stub := llmtest.NewGemini(t)
				stub.Push(tt.reply)
				c := gemClient(t, stub, "", 0)
				var onDelta llm.OnDelta
				if stream {
					onDelta = func(string) error { return nil }
				}
				_, err := c.Complete(context.Background(), llm.Request{Model: "gemini-2.5-flash", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, onDelta)
				var e *llm.Error
				if !errors.As(err, &e) {
					t.Fatalf("Complete = %v, want *llm.Error", err)
				}
				if e.Kind != llm.KindStatus || e.Status != tt.status || e.Type != tt.typ || e.RetryAfter != tt.retryAfter ||
					e.Retryable() != tt.retryable || e.KeyRejected() != tt.keyNo {
					t.Errorf("error %+v (retryable %v, key rejected %v), want status %d type %q retry after %v retryable %v key rejected %v",
						e, e.Retryable(), e.KeyRejected(), tt.status, tt.typ, tt.retryAfter, tt.retryable, tt.keyNo)
				}
				if strings.Contains(e.Error(), gemKey) {
					t.Errorf("error %q holds the key", e)
				}
			})
		}
	}
}

func TestGeminiStreamFailures(t *testing.T) {
	errStop := errors.New("client went away")
	tests := []struct {
		name      string
		reply     llmtest.Reply
		maxAnswer int
		onDelta   func(string) error
		check     func(t *testing.T, err error)
	}{
		{
			name:  "mid-stream error",
			reply: llmtest.Reply{Text: "one two three four", StreamErrorAfter: 2, ErrorType: "UNAVAILABLE", ErrorMessage: "overloaded"},
			check: func(t *testing.T, err error) {
				var e *llm.Error
				if !errors.As(err, &e) || e.Kind != llm.KindStream || e.Type != "UNAVAILABLE" || !e.Retryable() {
					t.Errorf("err = %#v, want a retryable KindStream UNAVAILABLE *llm.Error", err)
				}
			},
		},
		{
			name:  "mid-stream quota error with RetryInfo",
			reply: llmtest.Reply{Raw: `data: {"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"}}]}` + "\r\n\r\n" + `data: {"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2.5s"}]}}` + "\r\n\r\n"},
			check: func(t *testing.T, err error) {
				var e *llm.Error
				if !errors.As(err, &e) || e.Kind != llm.KindStream || !e.RateLimited() || e.RetryAfter != 2500*time.Millisecond {
					t.Errorf("err = %#v, want a rate-limited KindStream error asking for 2.5s", err)
				}
			},
		},
		{
			name:    "onDelta's error unchanged",
			reply:   llmtest.Reply{Text: "one two three"},
			onDelta: func(s string) error { return errStop },
			check: func(t *testing.T, err error) {
				if !errors.Is(err, errStop) {
					t.Errorf("err = %v, want onDelta's error", err)
				}
			},
		},
		{
			name:      "over MaxAnswer",
			reply:     llmtest.Reply{Text: strings.Repeat("word ", 100)},
			maxAnswer: 64,
			check:     gemWantMalformed,
		},
		{name: "not JSON", reply: llmtest.Reply{Raw: "data: {\"candidates\": [\r\n\r\n"}, check: gemWantMalformed},
		{name: "ends before finishReason", reply: llmtest.Reply{Raw: `data: {"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"}}]}` + "\r\n\r\n"}, check: gemWantMalformed},
		{name: "one huge event", reply: llmtest.Reply{Raw: "data: \"" + strings.Repeat("x", 200<<10)}, maxAnswer: 1024, check: gemWantMalformed},
		{
			name: "bare JSON error after the first chunk",
			reply: llmtest.Reply{Raw: `data: {"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"}}]}` + "\r\n\r\n" +
				"{\n  \"error\": {\n    \"code\": 503,\n    \"message\": \"The model is overloaded.\",\n    \"status\": \"UNAVAILABLE\"\n  }\n}\n"},
			check: func(t *testing.T, err error) {
				var e *llm.Error
				if !errors.As(err, &e) || e.Kind != llm.KindStream || e.Type != "UNAVAILABLE" || e.Message != "The model is overloaded." {
					t.Errorf("err = %#v, want KindStream UNAVAILABLE with the API's message", err)
				}
			},
		},
		{
			name:  "prompt blocked",
			reply: llmtest.Reply{Raw: `data: {"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":8}}` + "\r\n\r\n"},
			check: gemWantBlocked,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub := llmtest.NewGemini(t)
			stub.Push(tt.reply)
			c := gemClient(t, stub, "", tt.maxAnswer)
			var deltas []string
			onDelta := tt.onDelta
			if onDelta == nil {
				onDelta = func(s string) error { deltas = append(deltas, s); return nil }
			}
			res, err := c.Complete(context.Background(), llm.Request{Model: "gemini-2.5-flash", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, onDelta)
			if err == nil {
				t.Fatalf("Complete = %+v, nil; want an error", res)
			}
			tt.check(t, err)
		})
	}
}

func gemWantMalformed(t *testing.T, err error) {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) || e.Kind != llm.KindMalformed || e.Retryable() {
		t.Errorf("err = %v, want a KindMalformed *llm.Error", err)
	}
}

func gemWantBlocked(t *testing.T, err error) {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) || e.Status != 400 || e.Type != "PROMPT_BLOCKED" || !strings.Contains(e.Message, "SAFETY") || e.Retryable() {
		t.Errorf("err = %v, want a 400 PROMPT_BLOCKED *llm.Error naming SAFETY", err)
	}
}

func TestGeminiWholeFailures(t *testing.T) {
	tests := []struct {
		name      string
		reply     llmtest.Reply
		maxAnswer int
		check     func(t *testing.T, err error)
	}{
		{name: "not JSON", reply: llmtest.Reply{Raw: "<html>oops</html>"}, check: gemWantMalformed},
		{name: "no candidates", reply: llmtest.Reply{Raw: `{"usageMetadata":{"promptTokenCount":3}}`}, check: gemWantMalformed},
		{name: "over MaxAnswer", reply: llmtest.Reply{Text: strings.Repeat("a", 300)}, maxAnswer: 100, check: gemWantMalformed},
		{name: "body over the bound", reply: llmtest.Reply{Raw: `{"candidates":[],"x":"` + strings.Repeat("y", 400<<10) + `"}`}, maxAnswer: 100, check: gemWantMalformed},
		{name: "prompt blocked", reply: llmtest.Reply{Raw: `{"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[]}}`}, check: gemWantBlocked},
		{name: "malformed function call", reply: llmtest.Reply{Raw: `{"candidates":[{"content":{},"finishReason":"MALFORMED_FUNCTION_CALL"}]}`}, check: gemWantMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub := llmtest.NewGemini(t)
			stub.Push(tt.reply)
			c := gemClient(t, stub, "", tt.maxAnswer)
			res, err := c.Complete(context.Background(), llm.Request{Model: "gemini-2.5-flash", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, nil)
			if err == nil {
				t.Fatalf("Complete = %+v, nil; want an error", res)
			}
			tt.check(t, err)
		})
	}
}

func TestGeminiFinishReasons(t *testing.T) {
	tests := []struct{ raw, want string }{
		{`{"candidates":[{"content":{"parts":[{"text":"cut"}],"role":"model"},"finishReason":"MAX_TOKENS"}]}`, "length"},
		{`{"candidates":[{"content":{"parts":[],"role":"model"},"finishReason":"SAFETY"}]}`, "content_filter"},
		{`{"candidates":[{"content":{"parts":[{"text":"x"}],"role":"model"},"finishReason":"RECITATION"}]}`, "content_filter"},
		{`{"candidates":[{"content":{"parts":[{"text":"x"}],"role":"model"},"finishReason":"STOP"}]}`, "stop"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			stub := llmtest.NewGemini(t)
			stub.Push(llmtest.Reply{Raw: tt.raw})
			res, err := gemClient(t, stub, "", 0).Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, nil)
			if err != nil || res.FinishReason != tt.want {
				t.Errorf("Complete = %+v, %v; want finish %q", res, err, tt.want)
			}
		})
	}
}

func TestGeminiThoughts(t *testing.T) {
	stub := llmtest.NewGemini(t)
	stub.Push(llmtest.Reply{Thinking: "Let me think.", Text: "Done.", Usage: llmtest.Usage{Prompt: 5, Completion: 9, Reasoning: 7}})
	c := gemClient(t, stub, `{"include_thoughts": true, "thinking_budget_tokens": -1}`, 0)
	var deltas []string
	res, err := c.Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, func(s string) error { deltas = append(deltas, s); return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Result{Content: "Done.", Thinking: []llm.Thinking{{Text: "Let me think."}}, PromptTokens: 5, CompletionTokens: 9, ReasoningTokens: 7, FinishReason: "stop"}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Done."}, deltas); diff != "" {
		t.Errorf("deltas, thoughts must not be among them (-want +got):\n%s", diff)
	}

	// An answer without calls signs its last part: the signature goes
	// back on the text, the thought summary is not sent back.
	stub.Push(llmtest.Reply{Raw: `{"candidates":[{"content":{"parts":[{"text":"Hm.","thought":true},{"text":"Hi"},{"text":"!","thoughtSignature":"dGV4dA=="}],"role":"model"},"finishReason":"STOP"}]}`})
	msgs := []llm.Message{{Role: "user", Content: "hi"}}
	res, err = c.Complete(context.Background(), llm.Request{Model: "m", Messages: msgs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]llm.Thinking{{Text: "Hm."}, {Signature: "gemini:dGV4dA=="}}, res.Thinking); diff != "" {
		t.Errorf("Thinking (-want +got):\n%s", diff)
	}
	msgs = append(msgs, llm.Message{Role: "assistant", Content: res.Content, Thinking: res.Thinking}, llm.Message{Role: "user", Content: "again"})
	if _, err := c.Complete(context.Background(), llm.Request{Model: "m", Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	reqs := stub.Requests()
	model := gemJSON(gemBody(t, reqs[len(reqs)-1])["contents"].([]any)[1])
	if want := `{"parts":[{"text":"Hi!","thoughtSignature":"dGV4dA=="}],"role":"model"}`; model != want {
		t.Errorf("model turn sent back = %s, want %s", model, want)
	}
}

func TestGeminiCancelMidStream(t *testing.T) {
	stub := llmtest.NewGemini(t)
	stub.Push(llmtest.Reply{Text: "first second", Hang: true})
	c := gemClient(t, stub, "", 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		_, err := c.Complete(ctx, llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, func(s string) error { got <- s; return nil })
		done <- err
	}()
	select {
	case s := <-got:
		if s != "first" {
			t.Errorf("first delta %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no first delta")
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Complete = %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Complete returned %v after cancel", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Complete did not return after cancel")
	}

	// A whole answer that never comes is left at once too.
	stub.Push(llmtest.Reply{Hang: true})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	if _, err := c.Complete(ctx2, llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hanging whole answer: Complete = %v, want context.DeadlineExceeded", err)
	}
}

func TestGeminiModelsVerify(t *testing.T) {
	stub := llmtest.NewGemini(t)
	stub.MaxPageSize = 2
	c := gemClient(t, stub, "", 0)
	models, err := c.Models(context.Background())
	if err != nil {
		t.Fatalf("Models = %v", err)
	}
	want := []llm.Model{{ID: "gemini-2.5-flash", DisplayName: "Gemini 2.5 Flash"}, {ID: "gemini-2.5-pro", DisplayName: "Gemini 2.5 Pro"}}
	if diff := cmp.Diff(want, models); diff != "" {
		t.Errorf("Models (-want +got):\n%s", diff)
	}
	if n := len(stub.Requests()); n != 2 {
		t.Errorf("Models made %d requests, want 2 (two pages)", n)
	}
	if err := c.Verify(context.Background()); err != nil {
		t.Errorf("Verify = %v", err)
	}
	last := stub.Requests()[2]
	if last.Method != http.MethodGet || last.Path != "/v1beta/models" || last.Key != gemKey {
		t.Errorf("Verify sent %s %s key %q", last.Method, last.Path, last.Key)
	}
	stub.OnKey(gemKey, llmtest.Reply{Status: 400, ErrorType: "API_KEY_INVALID", ErrorMessage: "API key not valid."})
	var e *llm.Error
	if err := c.Verify(context.Background()); !errors.As(err, &e) || !e.KeyRejected() {
		t.Errorf("Verify with a bad key = %v, want a key-rejected *llm.Error", err)
	}
	if _, err := c.Models(context.Background()); !errors.As(err, &e) || !e.KeyRejected() {
		t.Errorf("Models with a bad key = %v, want a key-rejected *llm.Error", err)
	}
}

func TestGeminiValidate(t *testing.T) {
	info, ok := llm.Lookup("gemini")
	if !ok || info.Name != "gemini_native" || info.DefaultBase != "https://generativelanguage.googleapis.com" || !info.NeedsKey {
		t.Fatalf("Lookup(gemini) = %+v, %v", info, ok)
	}
	tests := []struct {
		base, settings, wantErr string
	}{
		{"", `{}`, ""},
		{"", `{"max_tokens": 100, "thinking_budget_tokens": 0, "include_thoughts": false, "max_retries": 3}`, ""},
		{"https://proxy.example/gemini", ``, ""},
		{"", `{"max_tokens": "100"}`, "settings.max_tokens"},
		{"", `{"max_tokens": 0}`, "settings.max_tokens"},
		{"", `{"thinking_budget_tokens": -2}`, "settings.thinking_budget_tokens"},
		{"", `{"include_thoughts": "yes"}`, "settings.include_thoughts"},
		{"", `[1]`, "settings"},
		{"ftp://x", `{}`, "api_base"},
	}
	for _, tt := range tests {
		err := info.Validate(tt.base, json.RawMessage(tt.settings))
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.HasPrefix(err.Error(), tt.wantErr)) {
			t.Errorf("Validate(%q, %s) = %v, want error naming %q", tt.base, tt.settings, err, tt.wantErr)
		}
	}
}

// gemTB records the stub's failures instead of failing the test.
type gemTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *gemTB) Helper() {}

func (r *gemTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// TestGeminiStubChecks: the stub refuses (400 and a test failure) what
// the API refuses, so the client tests above can fail.
func TestGeminiStubChecks(t *testing.T) {
	fc := func(name, sig string) string {
		s := `{"functionCall":{"name":"` + name + `","args":{}}`
		if sig != "" {
			s += `,"thoughtSignature":"` + sig + `"`
		}
		return s + `}`
	}
	fr := func(name string) string {
		return `{"functionResponse":{"name":"` + name + `","response":{"content":"x"}}}`
	}
	user := `{"role":"user","parts":[{"text":"hi"}]}`
	tests := []struct{ name, body, want string }{
		{"starts with model", `{"contents":[{"role":"model","parts":[{"text":"hi"}]}]}`, "starts with a user turn"},
		{"system role", `{"contents":[` + user + `,{"role":"system","parts":[{"text":"be nice"}]}]}`, "systemInstruction"},
		{"two user turns", `{"contents":[` + user + `,` + user + `]}`, "two user turns"},
		{"unknown field", `{"contents":[` + user + `],"messages":[]}`, "unknown field"},
		{"empty text", `{"contents":[{"role":"user","parts":[{"text":""}]}]}`, "empty text"},
		{"response names no call", `{"contents":[` + user + `,{"role":"model","parts":[` + fc("a", "skip_thought_signature_validator") + `]},{"role":"user","parts":[` + fr("b") + `]}]}`, "names no functionCall"},
		{"fewer responses than calls", `{"contents":[` + user + `,{"role":"model","parts":[` + fc("a", "skip_thought_signature_validator") + `,` + fc("b", "") + `]},{"role":"user","parts":[` + fr("a") + `]}]}`, "must be equal"},
		{"call without signature", `{"contents":[` + user + `,{"role":"model","parts":[` + fc("a", "") + `]},{"role":"user","parts":[` + fr("a") + `]}]}`, "missing a thought_signature"},
		{"forged signature", `{"contents":[` + user + `,{"role":"model","parts":[` + fc("a", "Zm9yZ2Vk") + `]},{"role":"user","parts":[` + fr("a") + `]}]}`, "was not issued"},
		{"json schema keyword", `{"contents":[` + user + `],"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"OBJECT","properties":{"a":{"type":"STRING"}},"additionalProperties":false}}]}]}`, "additionalProperties"},
		{"lower-case type", `{"contents":[` + user + `],"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}]}]}`, "OBJECT"},
		{"bad max tokens", `{"contents":[` + user + `],"generationConfig":{"maxOutputTokens":0}}`, "maxOutputTokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &gemTB{TB: t}
			stub := llmtest.NewGemini(rec)
			req, _ := http.NewRequest(http.MethodPost, stub.URL+"/v1beta/models/m:generateContent", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("x-goog-api-key", gemKey)
			resp, err := stub.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(b), `"INVALID_ARGUMENT"`) {
				t.Errorf("stub answered %d %s, want 400 INVALID_ARGUMENT", resp.StatusCode, b)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], tt.want) {
				t.Errorf("stub failures %q, want one naming %q", rec.errors, tt.want)
			}
		})
	}
}

func BenchmarkGeminiWhole(b *testing.B)  { benchGemini(b, false) }
func BenchmarkGeminiStream(b *testing.B) { benchGemini(b, true) }

// benchGemini measures one completion against the stub (whose own work
// is part of the numbers).
func benchGemini(b *testing.B, stream bool) {
	stub := llmtest.NewGemini(b)
	stub.Default = &llmtest.Reply{Text: strings.Repeat("word ", 20)}
	c, err := llm.New(llm.Config{Type: "gemini", APIBase: stub.URL, Key: gemKey, HTTP: stub.Client()})
	if err != nil {
		b.Fatal(err)
	}
	var onDelta llm.OnDelta
	if stream {
		onDelta = func(string) error { return nil }
	}
	req := llm.Request{Model: "gemini-2.5-flash", Messages: []llm.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "hi"}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Complete(context.Background(), req, onDelta); err != nil {
			b.Fatal(err)
		}
	}
}

// TestGeminiReusesConnections: answers read to their end leave the
// connection to the next call, streamed or not, errors included.
func TestGeminiReusesConnections(t *testing.T) {
	stub := llmtest.NewGemini(t)
	var dials atomic.Int32
	tr := stub.Client().Transport.(*http.Transport).Clone()
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx, network, addr)
	}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := llm.New(llm.Config{Type: "gemini", APIBase: stub.URL, Key: gemKey, HTTP: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	stub.Push(llmtest.Reply{Status: 429, Headers: map[string]string{"Retry-After": "1"}})
	req := llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "one two three"}}}
	for i := range 6 {
		var onDelta llm.OnDelta
		if i%2 == 1 {
			onDelta = func(string) error { return nil }
		}
		_, err := c.Complete(context.Background(), req, onDelta)
		if (i == 0) != (err != nil) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if _, err := c.Models(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("7 sequential calls dialled %d connections, want 1", n)
	}
}
