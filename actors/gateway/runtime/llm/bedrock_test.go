package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	smithyes "github.com/aws/smithy-go/eventstream"
	"github.com/google/go-cmp/cmp"

	"gatehouse/actors/gateway/runtime/llm/llmtest"
)

// bedrockARN is an inference profile ARN: its "/" and ":" must be
// escaped in the path, and signed as escaped.
const bedrockARN = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-sonnet-20240620-v1:0"

func newBedrockClient(t *testing.T, stub *llmtest.Bedrock, mod func(*Config)) Client {
	t.Helper()
	cfg := Config{Type: "bedrock", APIBase: stub.URL, Key: stub.Key(),
		Settings: json.RawMessage(`{"region":"us-east-1","max_tokens":512}`), HTTP: &http.Client{}}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New(bedrock) = %v", err)
	}
	return c
}

// complete runs req streamed or not, collecting the deltas.
func bedrockComplete(ctx context.Context, c Client, req Request, stream bool) (Result, []string, error) {
	var deltas []string
	var on OnDelta
	if stream {
		on = func(s string) error { deltas = append(deltas, s); return nil }
	}
	r, err := c.Complete(ctx, req, on)
	return r, deltas, err
}

func bedrockBody(t *testing.T, rec llmtest.Recorded) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(rec.Body, &m); err != nil {
		t.Fatalf("recorded body: %v", err)
	}
	return m
}

func TestBedrockPlainAnswer(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "converse", true: "converse-stream"}[stream], func(t *testing.T) {
			stub := llmtest.NewBedrock(t)
			stub.Push(llmtest.Reply{Text: "hello there world", Usage: llmtest.Usage{Prompt: 30, Completion: 3, CacheRead: 10, CacheWrite: 5}})
			c := newBedrockClient(t, stub, nil)
			req := Request{Model: bedrockARN, Messages: []Message{
				{Role: "system", Content: "be brief"}, {Role: "system", Content: "be kind"},
				{Role: "user", Content: "hi"}, {Role: "user", Content: "there"},
			}}
			got, deltas, err := bedrockComplete(context.Background(), c, req, stream)
			if err != nil {
				t.Fatalf("Complete = %v", err)
			}
			want := Result{Content: "hello there world", FinishReason: "stop", PromptTokens: 30, CompletionTokens: 3, CacheReadTokens: 10, CacheWriteTokens: 5}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Complete result (-want +got):\n%s", diff)
			}
			if stream {
				if diff := cmp.Diff([]string{"hello", " there", " world"}, deltas); diff != "" {
					t.Errorf("deltas (-want +got):\n%s", diff)
				}
			}
			recs := stub.Requests()
			if len(recs) != 1 {
				t.Fatalf("stub got %d requests, want 1", len(recs))
			}
			op := "converse"
			if stream {
				op = "converse-stream"
			}
			if want := "/model/" + bedrockARN + "/" + op; recs[0].Path != want {
				t.Errorf("path = %q, want %q", recs[0].Path, want)
			}
			if recs[0].Key != llmtest.BedrockAccessKey {
				t.Errorf("Recorded.Key = %q, want the access key id", recs[0].Key)
			}
			body := bedrockBody(t, recs[0])
			wantBody := map[string]any{
				"system":          []any{map[string]any{"text": "be brief\n\nbe kind"}},
				"messages":        []any{map[string]any{"role": "user", "content": []any{map[string]any{"text": "hi"}, map[string]any{"text": "there"}}}},
				"inferenceConfig": map[string]any{"maxTokens": float64(512)},
			}
			if diff := cmp.Diff(wantBody, body); diff != "" {
				t.Errorf("request body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBedrockToolLoop(t *testing.T) {
	tools := []ToolSpec{{Type: "function", Function: ToolSpecFunc{Name: "get_weather", Description: "weather of a city",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}}}
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "converse", true: "converse-stream"}[stream], func(t *testing.T) {
			stub := llmtest.NewBedrock(t)
			stub.Push(
				llmtest.Reply{Thinking: "the user wants weather", Text: "Let me check.", ToolCalls: []llmtest.Call{
					{Name: "get_weather", Args: `{"city":"Paris"}`}, {ID: "tooluse_fixed", Name: "get_weather", Args: `{"city":"Zürich"}`}}},
				llmtest.Reply{Text: "Sunny in both."},
			)
			c := newBedrockClient(t, stub, nil)
			msgs := []Message{{Role: "system", Content: "tools ok"}, {Role: "user", Content: "weather?"}}
			r1, _, err := bedrockComplete(context.Background(), c, Request{Model: "anthropic.claude-3-7-sonnet", Messages: msgs, Tools: tools}, stream)
			if err != nil {
				t.Fatalf("Complete 1 = %v", err)
			}
			if r1.FinishReason != "tool_calls" || len(r1.ToolCalls) != 2 {
				t.Fatalf("Complete 1 = %+v, want two tool calls", r1)
			}
			if r1.ToolCalls[1].ID != "tooluse_fixed" || r1.ToolCalls[1].Function.Arguments != `{"city":"Zürich"}` || r1.ToolCalls[0].Function.Name != "get_weather" {
				t.Errorf("tool calls = %+v", r1.ToolCalls)
			}
			var args map[string]string
			if err := json.Unmarshal([]byte(r1.ToolCalls[0].Function.Arguments), &args); err != nil || args["city"] != "Paris" {
				t.Errorf("tool call 0 arguments = %q, want city Paris", r1.ToolCalls[0].Function.Arguments)
			}
			if len(r1.Thinking) != 1 || r1.Thinking[0].Text != "the user wants weather" || !strings.HasPrefix(r1.Thinking[0].Signature, "sig-") {
				t.Errorf("thinking = %+v, want the reasoning block with its signature", r1.Thinking)
			}
			msgs = append(msgs,
				Message{Role: "assistant", Content: r1.Content, ToolCalls: r1.ToolCalls, Thinking: r1.Thinking},
				Message{Role: "tool", ToolCallID: r1.ToolCalls[0].ID, Content: "18C"},
				Message{Role: "tool", ToolCallID: r1.ToolCalls[1].ID, Content: "12C"},
			)
			r2, _, err := bedrockComplete(context.Background(), c, Request{Model: "anthropic.claude-3-7-sonnet", Messages: msgs, Tools: tools}, stream)
			if err != nil {
				t.Fatalf("Complete 2 = %v", err)
			}
			if r2.Content != "Sunny in both." || r2.FinishReason != "stop" {
				t.Errorf("Complete 2 = %+v", r2)
			}
			recs := stub.Requests()
			if len(recs) != 2 {
				t.Fatalf("stub got %d requests, want 2", len(recs))
			}
			var second struct {
				Messages []struct {
					Role    string           `json:"role"`
					Content []map[string]any `json:"content"`
				} `json:"messages"`
				ToolConfig struct {
					Tools []map[string]any `json:"tools"`
				} `json:"toolConfig"`
			}
			if err := json.Unmarshal(recs[1].Body, &second); err != nil {
				t.Fatal(err)
			}
			if len(second.Messages) != 3 || second.Messages[2].Role != "user" || len(second.Messages[2].Content) != 2 {
				t.Fatalf("second request messages = %+v, want user, assistant, user(2 toolResults)", second.Messages)
			}
			tr := second.Messages[2].Content[0]["toolResult"].(map[string]any)
			if tr["toolUseId"] != r1.ToolCalls[0].ID {
				t.Errorf("toolResult.toolUseId = %v, want %s", tr["toolUseId"], r1.ToolCalls[0].ID)
			}
			if _, ok := second.Messages[1].Content[0]["reasoningContent"]; !ok {
				t.Errorf("assistant turn = %v, want its reasoningContent first", second.Messages[1].Content)
			}
			if len(second.ToolConfig.Tools) != 1 {
				t.Errorf("toolConfig.tools = %v", second.ToolConfig.Tools)
			}
		})
	}
}

// TestBedrockToolHistoryWithoutTools: Bedrock refuses toolUse blocks
// without a toolConfig, so one is made from the history's names.
func TestBedrockToolHistoryWithoutTools(t *testing.T) {
	stub := llmtest.NewBedrock(t)
	c := newBedrockClient(t, stub, nil)
	msgs := []Message{
		{Role: "user", Content: "q"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "call.1/x", Type: "function", Function: ToolFunction{Name: "lookup", Arguments: ""}}}},
		{Role: "tool", ToolCallID: "call.1/x", Content: ""},
	}
	r, err := c.Complete(context.Background(), Request{Model: "m", Messages: msgs}, nil)
	if err != nil {
		t.Fatalf("Complete = %v", err)
	}
	if r.Content != "stub: " {
		t.Errorf("Content = %q", r.Content)
	}
}

// TestBedrockRawAnswers: a tool call without an id gets "call_" and 24
// hex digits; a redacted reasoning block comes back as base64 and is
// sent back as the bytes it was.
func TestBedrockRawAnswers(t *testing.T) {
	stub := llmtest.NewBedrock(t)
	stub.Push(llmtest.Reply{Raw: `{"output":{"message":{"role":"assistant","content":[` +
		`{"reasoningContent":{"redactedContent":"AQID"}},` +
		`{"toolUse":{"name":"lookup","input":{"q":1}}}]}},"stopReason":"tool_use",` +
		`"usage":{"inputTokens":3,"outputTokens":4,"totalTokens":7},"metrics":{"latencyMs":1}}`})
	c := newBedrockClient(t, stub, nil)
	tools := []ToolSpec{{Type: "function", Function: ToolSpecFunc{Name: "lookup", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	msgs := []Message{{Role: "user", Content: "x"}}
	r, err := c.Complete(context.Background(), Request{Model: "m", Messages: msgs, Tools: tools}, nil)
	if err != nil {
		t.Fatalf("Complete = %v", err)
	}
	if len(r.ToolCalls) != 1 || !regexp.MustCompile(`^call_[0-9a-f]{24}$`).MatchString(r.ToolCalls[0].ID) || r.ToolCalls[0].Function.Arguments != `{"q":1}` {
		t.Errorf("tool calls = %+v, want one with a generated id", r.ToolCalls)
	}
	if diff := cmp.Diff([]Thinking{{Redacted: "AQID"}}, r.Thinking); diff != "" {
		t.Errorf("thinking (-want +got):\n%s", diff)
	}
	if r.PromptTokens != 3 || r.CompletionTokens != 4 || r.FinishReason != "tool_calls" {
		t.Errorf("result = %+v", r)
	}
	msgs = append(msgs, Message{Role: "assistant", ToolCalls: r.ToolCalls, Thinking: r.Thinking},
		Message{Role: "tool", ToolCallID: r.ToolCalls[0].ID, Content: "found"})
	if _, err := c.Complete(context.Background(), Request{Model: "m", Messages: msgs, Tools: tools}, nil); err != nil {
		t.Fatalf("Complete 2 = %v", err)
	}
	if body := string(stub.Requests()[1].Body); !strings.Contains(body, `{"reasoningContent":{"redactedContent":"AQID"}}`) {
		t.Errorf("second request %s lacks the redacted reasoning block", body)
	}
}

// TestBedrockSDKSnapshots: payloads shaped like the SDK's own
// response snapshots (service/bedrockruntime/response_snapshot): a
// Converse answer with the fields this client ignores (trace,
// performanceConfig, serviceTier, cacheDetails, a document), and an
// error whose type is only in the body's __type.
func TestBedrockSDKSnapshots(t *testing.T) {
	stub := llmtest.NewBedrock(t)
	stub.Push(
		llmtest.Reply{Raw: `{"additionalModelResponseFields":{"k":"__Document__"},"metrics":{"latencyMs":1},` +
			`"output":{"message":{"content":[{"text":"__ContentBlockMemberText__"},{"text":"__ContentBlockMemberText__"}],"role":"assistant"}},` +
			`"performanceConfig":{"latency":"standard"},"serviceTier":{"type":"priority"},"stopReason":"end_turn",` +
			`"trace":{"promptRouter":{"invokedModelId":"__InvokedModelId__"}},` +
			`"usage":{"cacheDetails":[{"inputTokens":1,"ttl":"5m"},{"inputTokens":1,"ttl":"5m"}],"cacheReadInputTokens":1,"cacheWriteInputTokens":1,"inputTokens":1,"outputTokens":1,"totalTokens":1}}`},
		llmtest.Reply{Status: 429, Raw: `{"__type":"ThrottlingException","message":"__Message__"}`},
	)
	c := newBedrockClient(t, stub, nil)
	req := Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}
	r, err := c.Complete(context.Background(), req, nil)
	want := Result{Content: "__ContentBlockMemberText____ContentBlockMemberText__", FinishReason: "stop", PromptTokens: 3, CompletionTokens: 1, CacheReadTokens: 1, CacheWriteTokens: 1}
	if err != nil || !cmp.Equal(want, r) {
		t.Errorf("Complete = %+v, %v; want %+v", r, err, want)
	}
	_, err = c.Complete(context.Background(), req, nil)
	var e *Error
	if !errors.As(err, &e) || e.Status != 429 || e.Type != "ThrottlingException" || e.Message != "__Message__" {
		t.Errorf("Complete = %v, want 429 ThrottlingException from __type", err)
	}
}

// TestBedrockThinkingSetting: settings.thinking_budget_tokens asks for
// extended thinking, with maxTokens raised above the budget.
func TestBedrockThinkingSetting(t *testing.T) {
	stub := llmtest.NewBedrock(t)
	c := newBedrockClient(t, stub, func(cfg *Config) {
		cfg.Settings = json.RawMessage(`{"region":"us-east-1","max_tokens":1000,"thinking_budget_tokens":2048}`)
	})
	if _, err := c.Complete(context.Background(), Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}, nil); err != nil {
		t.Fatalf("Complete = %v", err)
	}
	body := bedrockBody(t, stub.Requests()[0])
	want := map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": float64(2048)}}
	if diff := cmp.Diff(want, body["additionalModelRequestFields"]); diff != "" {
		t.Errorf("additionalModelRequestFields (-want +got):\n%s", diff)
	}
	if got := body["inferenceConfig"].(map[string]any)["maxTokens"]; got != float64(2048+DefaultMaxTokens) {
		t.Errorf("maxTokens = %v, want %d", got, 2048+DefaultMaxTokens)
	}
}

// TestBedrockStreamReusesConnection: a finished stream is read to its
// end, so the next call reuses the connection.
func TestBedrockStreamReusesConnection(t *testing.T) {
	stub := llmtest.NewBedrock(t)
	c := newBedrockClient(t, stub, func(cfg *Config) { cfg.HTTP = &http.Client{Transport: &http.Transport{}} })
	var reused []bool
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) },
	})
	for range 3 {
		if _, _, err := bedrockComplete(ctx, c, Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}, true); err != nil {
			t.Fatalf("Complete = %v", err)
		}
	}
	if diff := cmp.Diff([]bool{false, true, true}, reused); diff != "" {
		t.Errorf("connections reused (-want +got):\n%s", diff)
	}
}

func TestBedrockErrorStatuses(t *testing.T) {
	tests := []struct {
		name                          string
		reply                         llmtest.Reply
		status                        int
		typ                           string
		retryable, keyRejected, rated bool
		retryAfter                    time.Duration
	}{
		{"throttled", llmtest.Reply{Status: 429, ErrorMessage: "Too many requests", Headers: map[string]string{"Retry-After": "7"}}, 429, "ThrottlingException", true, false, true, 7 * time.Second},
		{"model not ready", llmtest.Reply{Status: 429, ErrorType: "ModelNotReadyException"}, 429, "ModelNotReadyException", true, false, true, 0},
		{"internal", llmtest.Reply{Status: 500}, 500, "InternalServerException", true, false, false, 0},
		{"unavailable", llmtest.Reply{Status: 503, ErrorMessage: "overloaded"}, 503, "ServiceUnavailableException", true, false, false, 0},
		{"validation", llmtest.Reply{Status: 400, ErrorMessage: "bad model"}, 400, "ValidationException", false, false, false, 0},
		{"access denied", llmtest.Reply{Status: 403}, 403, "AccessDeniedException", false, true, false, 0},
		{"unauthorized", llmtest.Reply{Status: 401, ErrorType: "UnrecognizedClientException"}, 401, "UnrecognizedClientException", false, true, false, 0},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(tt.name+map[bool]string{false: "", true: "/stream"}[stream], func(t *testing.T) {
				stub := llmtest.NewBedrock(t)
				stub.Push(tt.reply)
				c := newBedrockClient(t, stub, nil)
				_, _, err := bedrockComplete(context.Background(), c, Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}, stream)
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("Complete error = %v, want *Error", err)
				}
				if e.Kind != KindStatus || e.Status != tt.status || e.Type != tt.typ || e.RetryAfter != tt.retryAfter {
					t.Errorf("error = %+v, want status %d type %s retry-after %v", e, tt.status, tt.typ, tt.retryAfter)
				}
				if e.Retryable() != tt.retryable || e.KeyRejected() != tt.keyRejected || e.RateLimited() != tt.rated {
					t.Errorf("Retryable, KeyRejected, RateLimited = %v %v %v, want %v %v %v", e.Retryable(), e.KeyRejected(), e.RateLimited(), tt.retryable, tt.keyRejected, tt.rated)
				}
				if tt.reply.ErrorMessage != "" && e.Message != tt.reply.ErrorMessage {
					t.Errorf("Message = %q, want %q", e.Message, tt.reply.ErrorMessage)
				}
			})
		}
	}
}

func TestBedrockCredentials(t *testing.T) {
	stub := llmtest.NewBedrock(t)
	stub.AddKey("ASIATEMPORARY", "tempsecret/+x", "session-token-1")
	tests := []struct {
		name, key string
		typ       string // "" : success
	}{
		{"static key", llmtest.BedrockKey(llmtest.BedrockAccessKey, llmtest.BedrockSecret, ""), ""},
		{"session token", llmtest.BedrockKey("ASIATEMPORARY", "tempsecret/+x", "session-token-1"), ""},
		{"wrong secret", llmtest.BedrockKey(llmtest.BedrockAccessKey, "not-the-secret", ""), "InvalidSignatureException"},
		{"missing session token", llmtest.BedrockKey("ASIATEMPORARY", "tempsecret/+x", ""), "UnrecognizedClientException"},
		{"unknown key", llmtest.BedrockKey("AKIDUNKNOWN", "x", ""), "UnrecognizedClientException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newBedrockClient(t, stub, func(cfg *Config) { cfg.Key = tt.key })
			for _, stream := range []bool{false, true} {
				_, _, err := bedrockComplete(context.Background(), c, Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}, stream)
				verr := c.Verify(context.Background())
				if tt.typ == "" {
					if err != nil || verr != nil {
						t.Fatalf("Complete, Verify = %v, %v, want success", err, verr)
					}
					continue
				}
				for _, err := range []error{err, verr} {
					var e *Error
					if !errors.As(err, &e) || e.Status != 403 || e.Type != tt.typ || !e.KeyRejected() {
						t.Errorf("error = %v, want 403 %s", err, tt.typ)
					}
					if strings.Contains(err.Error(), "not-the-secret") || strings.Contains(err.Error(), "tempsecret") {
						t.Errorf("error %q holds the secret", err)
					}
				}
			}
		})
	}
}

func TestBedrockStreamError(t *testing.T) {
	for _, typ := range []string{"ThrottlingException", "ModelStreamErrorException", "ValidationException"} {
		t.Run(typ, func(t *testing.T) {
			stub := llmtest.NewBedrock(t)
			stub.Push(llmtest.Reply{Text: "one two three four", StreamErrorAfter: 2, ErrorType: typ, ErrorMessage: "boom"})
			c := newBedrockClient(t, stub, nil)
			r, deltas, err := bedrockComplete(context.Background(), c, Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}, true)
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindStream || e.Type != typ || e.Message != "boom" {
				t.Fatalf("Complete = %+v, %v; want a %s stream error", r, err, typ)
			}
			if want := typ != "ValidationException"; e.Retryable() != want {
				t.Errorf("Retryable() = %v, want %v", e.Retryable(), want)
			}
			if len(deltas) != 2 {
				t.Errorf("deltas = %q, want the two before the error", deltas)
			}
		})
	}
}

func TestBedrockCancel(t *testing.T) {
	stub := llmtest.NewBedrock(t)
	c := newBedrockClient(t, stub, nil)
	req := Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}

	stub.Push(llmtest.Reply{Text: "first second", Hang: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	_, err := c.Complete(ctx, req, func(string) error { time.AfterFunc(20*time.Millisecond, cancel); return nil })
	if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Errorf("streamed Complete after cancel = %v in %v, want context.Canceled at once", err, time.Since(start))
	}

	stub.Push(llmtest.Reply{Hang: true})
	ctx3, cancel3 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel3()
	if _, err := c.Complete(ctx3, req, func(string) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("streamed Complete of a silent stream past its deadline = %v, want context.DeadlineExceeded", err)
	}

	stub.Push(llmtest.Reply{Hang: true})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	if _, err := c.Complete(ctx2, req, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Complete past its deadline = %v, want context.DeadlineExceeded", err)
	}
}

func TestBedrockOnDeltaError(t *testing.T) {
	stub := llmtest.NewBedrock(t)
	stub.Push(llmtest.Reply{Text: "a b c"})
	c := newBedrockClient(t, stub, nil)
	stop := errors.New("client left")
	_, err := c.Complete(context.Background(), Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}, func(string) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("Complete = %v, want onDelta's error", err)
	}
}

// bedrockFrame is one event-stream frame, for malformed-stream cases.
func bedrockFrame(t testing.TB, msgType, eventType string, payload string) []byte {
	t.Helper()
	h := eventstream.Headers{{Name: ":message-type", Value: eventstream.StringValue(msgType)}}
	if eventType != "" {
		h = append(h, eventstream.Header{Name: ":event-type", Value: eventstream.StringValue(eventType)})
	}
	h = append(h, eventstream.Header{Name: ":content-type", Value: eventstream.StringValue("application/json")})
	var buf bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&buf, eventstream.Message{Headers: h, Payload: []byte(payload)}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestBedrockMalformed(t *testing.T) {
	start := bedrockFrame(t, "event", "messageStart", `{"role":"assistant"}`)
	delta := bedrockFrame(t, "event", "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"hi"}}`)
	badCRC := append([]byte(nil), delta...)
	badCRC[len(badCRC)-1] ^= 0xff
	huge := []byte{0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	tests := []struct {
		name   string
		stream bool
		raw    string
	}{
		{"not json", false, "<html>oops</html>"},
		{"no output", false, `{"stopReason":"end_turn"}`},
		{"truncated json", false, `{"output":{"message":{"role":"assistant","content":[{"text":"hi"`},
		{"bad crc", true, string(start) + string(badCRC)},
		{"truncated frame", true, string(start) + string(delta[:len(delta)-5])},
		{"no messageStop", true, string(start) + string(delta)},
		{"garbage", true, "this is not an event stream at all, not even close"},
		{"unknown message type", true, string(start) + string(bedrockFrame(t, "weird", "", `{}`))},
		{"bad event json", true, string(start) + string(bedrockFrame(t, "event", "contentBlockDelta", `{"delta":`))},
		{"tool delta without start", true, string(start) + string(bedrockFrame(t, "event", "contentBlockDelta", `{"contentBlockIndex":3,"delta":{"toolUse":{"input":"{}"}}}`))},
		{"huge frame", true, string(start) + string(huge)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub := llmtest.NewBedrock(t)
			stub.Push(llmtest.Reply{Raw: tt.raw})
			c := newBedrockClient(t, stub, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _, err := bedrockComplete(ctx, c, Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}, tt.stream)
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindMalformed {
				t.Errorf("Complete = %v, want a malformed *Error", err)
			}
		})
	}
}

func TestBedrockTooLarge(t *testing.T) {
	for _, stream := range []bool{false, true} {
		stub := llmtest.NewBedrock(t)
		stub.Push(llmtest.Reply{Text: strings.Repeat("word ", 40)})
		c := newBedrockClient(t, stub, func(cfg *Config) { cfg.MaxAnswer = 50 })
		var n int
		var on OnDelta
		if stream {
			on = func(s string) error { n += len(s); return nil }
		}
		_, err := c.Complete(context.Background(), Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}, on)
		var e *Error
		if !errors.As(err, &e) || e.Kind != KindMalformed || !strings.Contains(e.Message, "larger than 50") {
			t.Errorf("stream=%v: Complete = %v, want TooLarge", stream, err)
		}
		if n > 50 {
			t.Errorf("stream=%v: %d bytes passed on, want at most 50", stream, n)
		}
	}
}

func TestBedrockModelsVerify(t *testing.T) {
	stub := llmtest.NewBedrock(t)
	c := newBedrockClient(t, stub, nil)
	models, err := c.Models(context.Background())
	if err != nil {
		t.Fatalf("Models = %v", err)
	}
	var ids []string
	for _, m := range models {
		ids = append(ids, m.ID)
	}
	if diff := cmp.Diff(llmtest.BedrockModels, ids); diff != "" {
		t.Errorf("Models ids (-want +got):\n%s", diff)
	}
	if models[0].DisplayName == "" {
		t.Errorf("Models[0].DisplayName is empty")
	}
	if err := c.Verify(context.Background()); err != nil {
		t.Errorf("Verify = %v", err)
	}
	stub.ModelsReply = &llmtest.Reply{Status: 403, ErrorMessage: "not authorized to perform bedrock:ListFoundationModels"}
	err = c.Verify(context.Background())
	var e *Error
	if !errors.As(err, &e) || e.Status != 403 || e.Type != "AccessDeniedException" || !e.KeyRejected() {
		t.Errorf("Verify = %v, want 403 AccessDeniedException", err)
	}
	// models_endpoint overrides api_base for the control plane.
	other := llmtest.NewBedrock(t)
	c2 := newBedrockClient(t, stub, func(cfg *Config) {
		cfg.Settings = json.RawMessage(`{"region":"us-east-1","models_endpoint":"` + other.URL + `"}`)
	})
	if _, err := c2.Models(context.Background()); err != nil {
		t.Errorf("Models via models_endpoint = %v", err)
	}
}

func TestBedrockUnreachable(t *testing.T) {
	stub := llmtest.NewBedrock(t)
	c := newBedrockClient(t, stub, nil)
	stub.Close()
	_, err := c.Complete(context.Background(), Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}, nil)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindUnreachable || !e.Retryable() {
		t.Errorf("Complete = %v, want unreachable", err)
	}
}

func TestBedrockValidate(t *testing.T) {
	ti, ok := Lookup("bedrock")
	if !ok {
		t.Fatal("bedrock is not registered")
	}
	tests := []struct {
		base, settings, wantErr string
	}{
		{"", `{"region":"us-east-1"}`, ""},
		{"", `{"region":"us-gov-west-1","max_tokens":100}`, ""},
		{"http://127.0.0.1:9", `{}`, ""},
		{"", `{}`, "settings.region"},
		{"", `{"region":"Mars"}`, "settings.region"},
		{"", `{"region":7}`, "settings"},
		{"", `{"region":"eu-west-1","max_tokens":-1}`, "settings.max_tokens"},
		{"ftp://x", `{"region":"eu-west-1"}`, "api_base"},
		{"", `{"region":"eu-west-1","models_endpoint":"nope"}`, "settings.models_endpoint"},
	}
	for _, tt := range tests {
		err := ti.Validate(tt.base, json.RawMessage(tt.settings))
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("Validate(%q, %s) = %v, want error naming %q", tt.base, tt.settings, err, tt.wantErr)
		}
	}
	for _, key := range []string{"", "onlyid", "id:", ":secret", "id:secret:"} {
		_, err := New(Config{Type: "bedrock", Key: key, Settings: json.RawMessage(`{"region":"us-east-1"}`)})
		if err == nil || !strings.Contains(err.Error(), "ACCESS_KEY_ID:SECRET_ACCESS_KEY") {
			t.Errorf("New(key %q) = %v, want the key format error", key, err)
		}
		if key != "" && err != nil && strings.Contains(err.Error(), key) {
			t.Errorf("New error %q holds the key", err)
		}
	}
}

// TestBedrockDefaultEndpoint: with no api_base the SDK's endpoint is
// bedrock-runtime.{region}.amazonaws.com and the model list's is
// bedrock.{region}.amazonaws.com (seen through a transport that answers
// nothing).
func TestBedrockDefaultEndpoint(t *testing.T) {
	var hosts []string
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		hosts = append(hosts, r.URL.Host+r.URL.EscapedPath())
		return nil, errors.New("offline")
	})
	c, err := New(Config{Type: "bedrock", Key: "AKID:SECRET", Settings: json.RawMessage(`{"region":"eu-central-1"}`), HTTP: &http.Client{Transport: rt}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Complete(context.Background(), Request{Model: "a:b/c", Messages: []Message{{Role: "user", Content: "x"}}}, nil)
	_, _ = c.Models(context.Background())
	want := []string{"bedrock-runtime.eu-central-1.amazonaws.com/model/a%3Ab%2Fc/converse", "bedrock.eu-central-1.amazonaws.com/foundation-models"}
	if diff := cmp.Diff(want, hosts); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func BenchmarkBedrockConverse(b *testing.B)       { benchBedrock(b, false) }
func BenchmarkBedrockConverseStream(b *testing.B) { benchBedrock(b, true) }

// benchBedrock runs a 50-word answer through the stub (signature check
// and all), whole or streamed.
func benchBedrock(b *testing.B, stream bool) {
	stub := llmtest.NewBedrock(b)
	stub.Default = &llmtest.Reply{Text: strings.Repeat("word ", 50)}
	c, err := New(Config{Type: "bedrock", APIBase: stub.URL, Key: stub.Key(), Settings: json.RawMessage(`{"region":"us-east-1"}`)})
	if err != nil {
		b.Fatal(err)
	}
	req := Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}
	var on OnDelta
	if stream {
		on = func(string) error { return nil }
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Complete(context.Background(), req, on); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzBedrockFrames feeds arbitrary bytes through the frame watcher
// (bedrockFrameBody) into the event-stream decoder the SDK uses: never a
// panic, never a frame longer than the bound decoded. The client's
// whole path over such bodies is TestBedrockMalformed's (fuzzing it
// through HTTP and the SDK stalls under -fuzz's coverage build).
func FuzzBedrockFrames(f *testing.F) {
	start := bedrockFrame(f, "event", "messageStart", `{"role":"assistant"}`)
	delta := bedrockFrame(f, "event", "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"hi"}}`)
	exc := bedrockFrame(f, "exception", "", `{"message":"x"}`)
	f.Add(append(append([]byte{}, start...), delta...), 64)
	f.Add(append(append([]byte{}, start...), exc...), 40)
	f.Add([]byte{0, 0, 0, 16, 0, 0, 0, 0, 1, 2, 3, 4}, 1000)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, 100)
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, body []byte, limit int) {
		limit = max(min(limit, 1<<16), 16)
		fb := &bedrockFrameBody{ReadCloser: io.NopCloser(bytes.NewReader(body)), max: int64(limit), maxAnswer: limit}
		dec := smithyes.NewDecoder()
		for range 1000 {
			m, err := dec.Decode(fb, nil)
			if err != nil {
				var e *Error
				if errors.As(err, &e) && e.Kind != KindMalformed {
					t.Fatalf("frame bound error = %v", e)
				}
				return
			}
			if n := len(m.Payload); n > limit {
				t.Fatalf("decoded a %d-byte payload past the %d bound", n, limit)
			}
		}
	})
}
