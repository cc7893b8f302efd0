package llm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptrace"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"gatehouse/actors/gateway/agentrun/llm/llmtest"
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
