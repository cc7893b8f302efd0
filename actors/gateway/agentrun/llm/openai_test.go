package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/actors/gateway/agentrun/llm"
	"gatehouse/actors/gateway/agentrun/llm/llmtest"
)

// oaHTTP is a pooled client like the runtime's, closed with the test.
func oaHTTP(t *testing.T) *http.Client {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(hc.CloseIdleConnections)
	return hc
}

// oaNew builds a client of typ on base.
func oaNew(t *testing.T, typ, base, key, settings string, maxAnswer int) llm.Client {
	t.Helper()
	c, err := llm.New(llm.Config{Type: typ, APIBase: base, Key: key, Settings: json.RawMessage(settings), MaxAnswer: maxAnswer, HTTP: oaHTTP(t)})
	if err != nil {
		t.Fatalf("llm.New(%s) = %v", typ, err)
	}
	return c
}

// oaCall runs one completion, streamed or not, and returns its deltas.
func oaCall(t *testing.T, c llm.Client, req llm.Request, stream bool) (llm.Result, []string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var deltas []string
	var on llm.OnDelta
	if stream {
		on = func(s string) error { deltas = append(deltas, s); return nil }
	}
	res, err := c.Complete(ctx, req, on)
	return res, deltas, err
}

// oaBody decodes a recorded request's JSON body.
func oaBody(t *testing.T, r llmtest.Recorded) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("request body %s: %v", r.Body, err)
	}
	return m
}

// oaErr is err as an *llm.Error, failing t when it is not one.
func oaErr(t *testing.T, err error) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want *llm.Error", err, err)
	}
	return e
}

var oaCallIDRE = regexp.MustCompile(`^call_[0-9a-f]{24}$`)

func oaHello() llm.Request {
	return llm.Request{Model: "gpt-4o-mini", Messages: []llm.Message{
		{Role: "system", Content: "Be brief."},
		{Role: "system", Content: "Answer in English."},
		{Role: "user", Content: "say hello"},
	}}
}

// TestOpenAIAnswer: a whole and a streamed answer, through openai_compat
// and through a preset whose api_base is overridden: text, deltas in
// order, usage with its cached and reasoning parts, the request's shape.
func TestOpenAIAnswer(t *testing.T) {
	for _, typ := range []string{"openai_compat", "groq"} {
		for _, stream := range []bool{false, true} {
			t.Run(typ+map[bool]string{false: "/whole", true: "/stream"}[stream], func(t *testing.T) {
				stub := llmtest.NewOpenAI(t)
				stub.Push(llmtest.Reply{Text: "hello there, friend", Usage: llmtest.Usage{Prompt: 30, Completion: 12, CacheRead: 20, Reasoning: 8}})
				c := oaNew(t, typ, stub.Base(), "sk-test-1", "", 0)
				res, deltas, err := oaCall(t, c, oaHello(), stream)
				if err != nil {
					t.Fatal(err)
				}
				want := llm.Result{Content: "hello there, friend", PromptTokens: 30, CompletionTokens: 12, CacheReadTokens: 20, ReasoningTokens: 8, FinishReason: "stop"}
				if res.Content != want.Content || res.PromptTokens != 30 || res.CompletionTokens != 12 || res.CacheReadTokens != 20 || res.ReasoningTokens != 8 || res.FinishReason != "stop" {
					t.Errorf("Complete = %+v, want %+v", res, want)
				}
				if stream && strings.Join(deltas, "|") != "hello| there,| friend" {
					t.Errorf("deltas = %q", deltas)
				}
				reqs := stub.Requests()
				if len(reqs) != 1 || reqs[0].Key != "sk-test-1" {
					t.Fatalf("requests = %+v, want one with the key", reqs)
				}
				b := oaBody(t, reqs[0])
				msgs := b["messages"].([]any)
				if len(msgs) != 3 || msgs[0].(map[string]any)["content"] != "Be brief." || msgs[1].(map[string]any)["content"] != "Answer in English." {
					t.Errorf("messages = %v, want each system message in its place", msgs)
				}
				if _, ok := b["max_tokens"]; ok {
					t.Errorf("max_tokens sent though neither the request nor settings set it: %v", b)
				}
				if got, _ := b["stream"].(bool); got != stream {
					t.Errorf("stream = %v, want %v", b["stream"], stream)
				}
				if so, _ := b["stream_options"].(map[string]any); stream && so["include_usage"] != true {
					t.Errorf("stream_options = %v, want include_usage", b["stream_options"])
				}
			})
		}
	}
}

// TestOpenAIMaxTokens: max_tokens is the request's, else settings', else
// not sent.
func TestOpenAIMaxTokens(t *testing.T) {
	tests := []struct {
		name     string
		settings string
		req      int
		want     any
	}{
		{"none", "", 0, nil},
		{"settings", `{"max_tokens": 100}`, 0, 100.0},
		{"request", `{"max_tokens": 100}`, 7, 7.0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub := llmtest.NewOpenAI(t)
			c := oaNew(t, "openai_compat", stub.Base(), "k", tt.settings, 0)
			req := oaHello()
			req.MaxTokens = tt.req
			if _, _, err := oaCall(t, c, req, false); err != nil {
				t.Fatal(err)
			}
			if got := oaBody(t, stub.Requests()[0])["max_tokens"]; got != tt.want {
				t.Errorf("max_tokens = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestOpenAINoKey: openai_compat without a key sends no Authorization.
func TestOpenAINoKey(t *testing.T) {
	stub := llmtest.NewOpenAI(t)
	stub.AllowNoKey = true
	c := oaNew(t, "openai_compat", stub.Base(), "", "", 0)
	if _, _, err := oaCall(t, c, oaHello(), true); err != nil {
		t.Fatal(err)
	}
	if h := stub.Requests()[0].Header.Get("Authorization"); h != "" {
		t.Errorf("Authorization = %q, want none", h)
	}
}

// TestOpenAIToolLoop: two iterations: the model calls two tools (one
// without an id: one is made up), the results go back after the
// assistant's calls (the stub checks their placement and ids), the model
// answers.
func TestOpenAIToolLoop(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "stream"}[stream], func(t *testing.T) {
			stub := llmtest.NewOpenAI(t)
			stub.Push(
				llmtest.Reply{Text: "Let me add.", ToolCalls: []llmtest.Call{{ID: "call_a", Name: "add", Args: `{"a":2,"b":40}`}, {Name: "now"}}},
				llmtest.Reply{Text: "42, at noon"},
			)
			c := oaNew(t, "openai_compat", stub.Base(), "k", "", 0)
			req := oaHello()
			req.Tools = []llm.ToolSpec{
				{Type: "function", Function: llm.ToolSpecFunc{Name: "add", Description: "adds", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}}}`)}},
				{Function: llm.ToolSpecFunc{Name: "now"}},
			}
			res, _, err := oaCall(t, c, req, stream)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.ToolCalls) != 2 || res.FinishReason != "tool_calls" || res.Content != "Let me add." {
				t.Fatalf("first answer = %+v, want two tool calls", res)
			}
			add, now := res.ToolCalls[0], res.ToolCalls[1]
			if add.ID != "call_a" || add.Function.Name != "add" || add.Function.Arguments != `{"a":2,"b":40}` || add.Type != "function" {
				t.Errorf("call 0 = %+v", add)
			}
			if now.Function.Name != "now" || now.Function.Arguments != "{}" || now.ID == "" {
				t.Errorf("call 1 = %+v", now)
			}
			req.Messages = append(req.Messages,
				llm.Message{Role: "assistant", Content: res.Content, ToolCalls: res.ToolCalls},
				llm.Message{Role: "tool", ToolCallID: add.ID, Content: "42"},
				llm.Message{Role: "tool", ToolCallID: now.ID, Content: "noon"},
			)
			res, _, err = oaCall(t, c, req, stream)
			if err != nil || res.Content != "42, at noon" || res.FinishReason != "stop" {
				t.Fatalf("second answer = %+v, %v", res, err)
			}
			msgs := oaBody(t, stub.Requests()[1])["messages"].([]any)
			if m := msgs[len(msgs)-1].(map[string]any); m["role"] != "tool" || m["tool_call_id"] != now.ID || m["content"] != "noon" {
				t.Errorf("last message = %v", m)
			}
			if n := len(oaBody(t, stub.Requests()[1])["tools"].([]any)); n != 2 {
				t.Errorf("%d tools sent, want 2", n)
			}
		})
	}
}

// TestOpenAIErrorStatus: error statuses become *llm.Error with the
// provider's type and message and the wait it asks for.
func TestOpenAIErrorStatus(t *testing.T) {
	tests := []struct {
		name      string
		reply     llmtest.Reply
		typ       string
		retry     bool
		wait      time.Duration
		rejected  bool
		ratelimit bool
	}{
		{"401", llmtest.Reply{Status: 401, ErrorType: "invalid_request_error", ErrorMessage: "Incorrect API key provided"}, "invalid_request_error", false, 0, true, false},
		{"429", llmtest.Reply{Status: 429, ErrorType: "rate_limit_exceeded", ErrorMessage: "slow down", Headers: map[string]string{"Retry-After": "3"}}, "rate_limit_exceeded", true, 3 * time.Second, false, true},
		{"429 ms", llmtest.Reply{Status: 429, Headers: map[string]string{"retry-after-ms": "1500", "Retry-After": "2"}}, "rate_limit_exceeded", true, 1500 * time.Millisecond, false, true},
		{"500", llmtest.Reply{Status: 500, ErrorType: "server_error", ErrorMessage: "The server had an error"}, "server_error", true, 0, false, false},
		{"503 overloaded", llmtest.Reply{Status: 503, ErrorType: "overloaded", ErrorMessage: "The engine is currently overloaded"}, "overloaded", true, 0, false, false},
		{"400", llmtest.Reply{Status: 400, ErrorType: "invalid_request_error", ErrorMessage: "bad"}, "invalid_request_error", false, 0, false, false},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(tt.name+map[bool]string{false: "/whole", true: "/stream"}[stream], func(t *testing.T) {
				stub := llmtest.NewOpenAI(t)
				stub.Push(tt.reply)
				c := oaNew(t, "openai_compat", stub.Base(), "sk-secret-key", "", 0)
				_, _, err := oaCall(t, c, oaHello(), stream)
				e := oaErr(t, err)
				if e.Kind != llm.KindStatus || e.Status != tt.reply.Status || e.Type != tt.typ || e.RetryAfter != tt.wait {
					t.Errorf("error = %+v, want status %d type %q wait %v", e, tt.reply.Status, tt.typ, tt.wait)
				}
				if e.Retryable() != tt.retry || e.KeyRejected() != tt.rejected || e.RateLimited() != tt.ratelimit {
					t.Errorf("Retryable, KeyRejected, RateLimited = %v %v %v, want %v %v %v", e.Retryable(), e.KeyRejected(), e.RateLimited(), tt.retry, tt.rejected, tt.ratelimit)
				}
				if tt.reply.ErrorMessage != "" && e.Message != tt.reply.ErrorMessage {
					t.Errorf("Message = %q, want %q", e.Message, tt.reply.ErrorMessage)
				}
				if strings.Contains(err.Error(), "sk-secret-key") {
					t.Errorf("error %q holds the key", err)
				}
			})
		}
	}
}

// TestOpenAIStreamError: a `data: {"error": …}` chunk mid-stream fails
// the call (it was dropped, and the partial text returned as a success).
func TestOpenAIStreamError(t *testing.T) {
	stub := llmtest.NewOpenAI(t)
	stub.Push(llmtest.Reply{Text: "one two three four", StreamErrorAfter: 2, ErrorType: "server_error", ErrorMessage: "upstream model crashed"})
	c := oaNew(t, "openai_compat", stub.Base(), "k", "", 0)
	res, deltas, err := oaCall(t, c, oaHello(), true)
	if err == nil {
		t.Fatalf("Complete = %+v, nil; want the stream's error", res)
	}
	e := oaErr(t, err)
	if e.Kind != llm.KindStream || e.Type != "server_error" || e.Message != "upstream model crashed" || !e.Retryable() {
		t.Errorf("error = %+v, want a retryable stream error", e)
	}
	if strings.Join(deltas, "") != "one two" {
		t.Errorf("deltas = %q, want the two before the error", deltas)
	}
}

// TestOpenAIMalformed: answers that cannot be read fail cleanly; a
// stream with a finish_reason but no [DONE] is accepted, one with
// neither is not; chunks with empty choices are skipped.
func TestOpenAIMalformed(t *testing.T) {
	const fin = `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	tests := []struct {
		name   string
		stream bool
		raw    string
		status int
		kind   string // "" : success
		want   string
	}{
		{"not JSON", false, `{"choices":[`, 0, llm.KindMalformed, ""},
		{"no choices", false, `{"choices":[]}`, 0, llm.KindMalformed, ""},
		{"html", false, `<html>bad gateway</html>`, 0, llm.KindMalformed, ""},
		{"error in a 200", false, `{"error":{"message":"quota","type":"insufficient_quota"}}`, 0, llm.KindStream, ""},
		{"bad tool arguments", false, `{"choices":[{"message":{"tool_calls":[{"id":"x","function":{"name":"f","arguments":[1]}}]}}]}`, 0, llm.KindMalformed, ""},
		{"error status, no JSON", false, `Bad Gateway`, 502, llm.KindStatus, ""},
		{"bad chunk", true, "data: {\"choices\":[{\"delta\":\n\n", 0, llm.KindMalformed, ""},
		{"ends early", true, `data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}` + "\n\n", 0, llm.KindMalformed, ""},
		{"empty", true, "\n", 0, llm.KindMalformed, ""},
		{"finish, no DONE", true, `data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}` + "\n\n" + fin, 0, "", "hi"},
		{"empty choices skipped", true, `data: {"choices":[],"prompt_filter_results":[]}` + "\n\n" + `data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}` + "\n\n" + fin + "data: [DONE]\n\n", 0, "", "ok"},
		{"refusal", false, `{"choices":[{"message":{"content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`, 0, "", "I can't help with that."},
		{"streamed refusal", true, `data: {"choices":[{"index":0,"delta":{"content":null,"refusal":"No."}}]}` + "\n\n" + fin, 0, "", "No."},
		{"comments and CRLF", true, ": keep-alive\r\n\r\ndata:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\r\n\r\ndata: [DONE]\r\n\r\n", 0, "", "x"},
		{"tool index out of range", true, `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":100000,"id":"a"}]}}]}` + "\n\n", 0, llm.KindMalformed, ""},
		{"finish error", true, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"error"}]}` + "\n\n", 0, llm.KindStream, ""},
		{"line too long", true, "data: \"" + strings.Repeat("a", 1<<20+10) + "\"\n\n", 0, llm.KindMalformed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub := llmtest.NewOpenAI(t)
			stub.Push(llmtest.Reply{Raw: tt.raw, Status: tt.status})
			c := oaNew(t, "openai_compat", stub.Base(), "k", "", 0)
			res, _, err := oaCall(t, c, oaHello(), tt.stream)
			if tt.kind == "" {
				if err != nil || res.Content != tt.want {
					t.Fatalf("Complete = %+v, %v; want %q", res, err, tt.want)
				}
				return
			}
			if e := oaErr(t, err); e.Kind != tt.kind {
				t.Errorf("error = %+v, want kind %s", e, tt.kind)
			}
		})
	}
}

// TestOpenAIMadeUpIDs: tool calls without an id (some compatible
// servers) get "call_" and 24 hex digits; pieces without an index
// continue the call before unless they bring a new id.
func TestOpenAIMadeUpIDs(t *testing.T) {
	tests := []struct {
		name   string
		stream bool
		raw    string
	}{
		{"whole", false, `{"choices":[{"message":{"tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}},{"function":{"name":"g","arguments":{"x":1}}}]},"finish_reason":"stop"}]}`},
		{"stream", true, `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"f","arguments":"{"}}]}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"}"}}]}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"x","function":{"name":"g","arguments":"{\"x\":1}"}}]}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub := llmtest.NewOpenAI(t)
			stub.Push(llmtest.Reply{Raw: tt.raw})
			c := oaNew(t, "openai_compat", stub.Base(), "k", "", 0)
			res, _, err := oaCall(t, c, oaHello(), tt.stream)
			if err != nil || len(res.ToolCalls) != 2 || res.FinishReason != "tool_calls" {
				t.Fatalf("Complete = %+v, %v; want two calls", res, err)
			}
			f, g := res.ToolCalls[0], res.ToolCalls[1]
			if !oaCallIDRE.MatchString(f.ID) || f.Function.Name != "f" || f.Function.Arguments != "{}" {
				t.Errorf("call f = %+v", f)
			}
			if g.Function.Name != "g" || g.Function.Arguments != `{"x":1}` || (g.ID != "x" && !oaCallIDRE.MatchString(g.ID)) {
				t.Errorf("call g = %+v", g)
			}
		})
	}
}

// TestOpenAICancel: cancelling mid-stream (or while a whole answer is
// awaited) returns ctx's error at once.
func TestOpenAICancel(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "stream"}[stream], func(t *testing.T) {
			stub := llmtest.NewOpenAI(t)
			stub.Push(llmtest.Reply{Text: "first then never", Hang: true})
			c := oaNew(t, "openai_compat", stub.Base(), "k", "", 0)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var on llm.OnDelta
			if stream {
				on = func(string) error { cancel(); return nil }
			} else {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			start := time.Now()
			_, err := c.Complete(ctx, oaHello(), on)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Complete = %v, want context.Canceled", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("cancelled call took %v", d)
			}
		})
	}
}

// TestOpenAITooLarge: an answer over MaxAnswer fails, streamed or not.
func TestOpenAITooLarge(t *testing.T) {
	for _, stream := range []bool{false, true} {
		for _, rep := range []llmtest.Reply{
			{Text: strings.Repeat("word ", 40)},
			{ToolCalls: []llmtest.Call{{Name: "f", Args: `{"x":"` + strings.Repeat("y", 200) + `"}`}}},
		} {
			stub := llmtest.NewOpenAI(t)
			stub.Push(rep)
			c := oaNew(t, "openai_compat", stub.Base(), "k", "", 64)
			res, _, err := oaCall(t, c, oaHello(), stream)
			if e := oaErr(t, err); e.Kind != llm.KindMalformed || !strings.Contains(e.Message, "larger than 64") {
				t.Errorf("stream=%v: Complete = %+v, %v; want too large", stream, res, e)
			}
		}
	}
}

// TestOpenAIOnDeltaError: onDelta's error comes back unchanged.
func TestOpenAIOnDeltaError(t *testing.T) {
	stub := llmtest.NewOpenAI(t)
	c := oaNew(t, "openai_compat", stub.Base(), "k", "", 0)
	stop := errors.New("client gone")
	_, err := c.Complete(context.Background(), oaHello(), func(string) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("Complete = %v, want %v", err, stop)
	}
}

// TestOpenAIModels: Models lists the stub's models; Verify passes with
// a good key and fails with a revoked one.
func TestOpenAIModels(t *testing.T) {
	stub := llmtest.NewOpenAI(t)
	stub.OnKey("sk-revoked", llmtest.Reply{Status: 401, ErrorType: "invalid_request_error", ErrorMessage: "Incorrect API key provided"})
	c := oaNew(t, "openai", stub.Base(), "sk-good", "", 0)
	ms, err := c.Models(context.Background())
	if err != nil || len(ms) != 2 || ms[0].ID != "gpt-4o-mini" || ms[1].ID != "gpt-4o" {
		t.Fatalf("Models = %v, %v", ms, err)
	}
	if err := c.Verify(context.Background()); err != nil {
		t.Errorf("Verify = %v", err)
	}
	bad := oaNew(t, "openai", stub.Base(), "sk-revoked", "", 0)
	if e := oaErr(t, bad.Verify(context.Background())); !e.KeyRejected() {
		t.Errorf("Verify with a revoked key = %+v, want 401", e)
	}
}

// TestOpenAIValidate: api_base and settings checks at create time, and
// the presets' defaults.
func TestOpenAIValidate(t *testing.T) {
	tests := []struct {
		typ, base, settings string
		want                string // "" : accepted; else a part of the error
	}{
		{"openai_compat", "https://llm.example.com/v1", `{"max_tokens": 512}`, ""},
		{"openai_compat", "http://127.0.0.1:8000/v1", "", ""},
		{"openai_compat", "", "", "api_base must be an http:// or https:// URL"},
		{"openai_compat", "ftp://x.example.com", "", "api_base must be an http:// or https:// URL"},
		{"openai_compat", "https://user:pw@x.example.com/v1", "", "must not carry credentials"},
		{"openai_compat", "https://x.example.com/v1?key=1", "", "must not carry credentials"},
		{"openai_compat", "https://x.example.com/v1#f", "", "must not carry credentials"},
		{"openai_compat", "https://x.example.com/v1", `{"max_tokens": "many"}`, "settings.max_tokens"},
		{"openai_compat", "https://x.example.com/v1", `{"max_tokens": 0}`, "settings.max_tokens"},
		{"openai_compat", "https://x.example.com/v1", `[1]`, "settings must be a JSON object"},
		{"openai", "", "", ""},
		{"mistral", "https://proxy.example.com/v1", "null", ""},
		{"deepseek", "nope", "", "api_base"},
	}
	for _, tt := range tests {
		ti, ok := llm.Lookup(tt.typ)
		if !ok {
			t.Fatalf("type %s not registered", tt.typ)
		}
		err := ti.Validate(tt.base, json.RawMessage(tt.settings))
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Validate(%s, %q, %s) = %v, want %q", tt.typ, tt.base, tt.settings, err, tt.want)
		}
	}
	presets := map[string]string{
		"openai": "https://api.openai.com/v1", "openrouter": "https://openrouter.ai/api/v1", "groq": "https://api.groq.com/openai/v1",
		"deepseek": "https://api.deepseek.com/v1", "mistral": "https://api.mistral.ai/v1", "xai": "https://api.x.ai/v1",
	}
	for name, base := range presets {
		if ti, _ := llm.Lookup(name); ti.DefaultBase != base || !ti.NeedsKey || ti.New == nil {
			t.Errorf("preset %s = %+v, want base %s and a key", name, ti, base)
		}
	}
	if ti, _ := llm.Lookup("openai_compat"); ti.DefaultBase != "" || ti.NeedsKey {
		t.Errorf("openai_compat = %+v, want no default base and no key required", ti)
	}
}

// TestOpenRouterVerify: OpenRouter lists its models to anyone, so
// Verify asks for the key's own record (GET {base}/key) instead.
func TestOpenRouterVerify(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer sk-or-good" {
			w.WriteHeader(401)
			fmt.Fprint(w, `{"error":{"message":"No auth credentials found","code":401}}`)
			return
		}
		fmt.Fprint(w, `{"data":{"label":"sk-or-v1-abc...","usage":0,"limit":null,"is_free_tier":false}}`)
	}))
	defer srv.Close()
	good := oaNew(t, "openrouter", srv.URL+"/api/v1", "sk-or-good", "", 0)
	if err := good.Verify(context.Background()); err != nil {
		t.Errorf("Verify = %v", err)
	}
	bad := oaNew(t, "openrouter", srv.URL+"/api/v1", "sk-or-bad", "", 0)
	if e := oaErr(t, bad.Verify(context.Background())); e.Status != 401 || e.Message != "No auth credentials found" {
		t.Errorf("Verify(bad) = %+v", e)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(paths, ",") != "/api/v1/key,/api/v1/key" {
		t.Errorf("paths = %v", paths)
	}
}

// TestOpenAIStreamAnsweredWhole: a server that answers a streamed
// request with a whole JSON answer (some compatible servers do not
// stream) is read as one; a JSON error in a 200 fails the call.
func TestOpenAIStreamAnsweredWhole(t *testing.T) {
	serve := func(body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	c := oaNew(t, "openai_compat", serve(`{"choices":[{"message":{"role":"assistant","content":"all at once"},"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":3}}`), "", "", 0)
	res, deltas, err := oaCall(t, c, oaHello(), true)
	if err != nil || res.Content != "all at once" || res.CompletionTokens != 3 || strings.Join(deltas, "|") != "all at once" {
		t.Errorf("Complete = %+v, %q, %v", res, deltas, err)
	}
	c = oaNew(t, "openai_compat", serve(`{"error":{"message":"Provider returned error","code":502}}`), "", "", 0)
	_, _, err = oaCall(t, c, oaHello(), true)
	if e := oaErr(t, err); e.Kind != llm.KindStream || e.Message != "Provider returned error" {
		t.Errorf("error in a 200 = %+v", e)
	}
}
