package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"gatehouse/actors/gateway/agentrun/llm"
	"gatehouse/actors/gateway/agentrun/llm/llmtest"
)

func ollamaHello() llm.Request {
	return llm.Request{Model: "llama3.2", Messages: []llm.Message{
		{Role: "system", Content: "Be brief."}, {Role: "system", Content: "No emoji."}, {Role: "user", Content: "say hello"},
	}}
}

// TestOllamaAnswer: whole and streamed answers: "stream" always sent,
// usage from prompt_eval_count/eval_count, the system messages joined,
// no Authorization without a key and Bearer with one.
func TestOllamaAnswer(t *testing.T) {
	for _, key := range []string{"", "proxy-key"} {
		for _, stream := range []bool{false, true} {
			t.Run(key+map[bool]string{false: "/whole", true: "/stream"}[stream], func(t *testing.T) {
				stub := llmtest.NewOllama(t)
				stub.Push(llmtest.Reply{Text: "hello from llama", Usage: llmtest.Usage{Prompt: 26, Completion: 3}})
				c := oaNew(t, "ollama", stub.URL, key, "", 0)
				res, deltas, err := oaCall(t, c, ollamaHello(), stream)
				if err != nil {
					t.Fatal(err)
				}
				if res.Content != "hello from llama" || res.PromptTokens != 26 || res.CompletionTokens != 3 || res.FinishReason != "stop" {
					t.Errorf("Complete = %+v", res)
				}
				if stream && strings.Join(deltas, "|") != "hello| from| llama" {
					t.Errorf("deltas = %q", deltas)
				}
				r := stub.Requests()[0]
				if r.Key != key || (key == "" && r.Header.Get("Authorization") != "") {
					t.Errorf("key = %q (Authorization %q), want %q", r.Key, r.Header.Get("Authorization"), key)
				}
				b := oaBody(t, r)
				if b["stream"] != stream || b["model"] != "llama3.2" {
					t.Errorf("body stream %v model %v", b["stream"], b["model"])
				}
				if m := b["messages"].([]any)[0].(map[string]any); m["role"] != "system" || m["content"] != "Be brief.\n\nNo emoji." {
					t.Errorf("first message = %v", m)
				}
				if _, ok := b["options"]; ok {
					t.Errorf("options sent without settings: %v", b["options"])
				}
			})
		}
	}
}

// TestOllamaDefaultBase: ollama's api_base defaults to the local server.
func TestOllamaDefaultBase(t *testing.T) {
	ti, ok := llm.Lookup("ollama")
	if !ok || ti.DefaultBase != "http://127.0.0.1:11434" || ti.NeedsKey {
		t.Fatalf("ollama = %+v", ti)
	}
}

// TestOllamaOptions: settings.max_tokens (or the request's) becomes
// options.num_predict; settings.num_ctx options.num_ctx.
func TestOllamaOptions(t *testing.T) {
	stub := llmtest.NewOllama(t)
	c := oaNew(t, "ollama", stub.URL, "", `{"max_tokens": 300, "num_ctx": 16384}`, 0)
	req := ollamaHello()
	if _, _, err := oaCall(t, c, req, false); err != nil {
		t.Fatal(err)
	}
	req.MaxTokens = 9
	if _, _, err := oaCall(t, c, req, true); err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{300, 9} {
		o, _ := oaBody(t, stub.Requests()[i])["options"].(map[string]any)
		if o["num_predict"] != want || o["num_ctx"] != 16384.0 {
			t.Errorf("request %d options = %v, want num_predict %v", i, o, want)
		}
	}
}

// TestOllamaToolLoop: two iterations: Ollama's calls (arguments as
// objects, no ids) become string arguments with made-up ids; the results
// go back as tool messages naming their tool, the assistant's calls with
// object arguments (the stub checks both).
func TestOllamaToolLoop(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "stream"}[stream], func(t *testing.T) {
			stub := llmtest.NewOllama(t)
			stub.Push(
				llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "get_weather", Args: `{"city":"Paris","unit":"celsius"}`}, {Name: "get_time"}}},
				llmtest.Reply{Text: "Sunny, 21 degrees at noon"},
			)
			c := oaNew(t, "ollama", stub.URL, "", "", 0)
			req := ollamaHello()
			req.Tools = []llm.ToolSpec{
				{Type: "function", Function: llm.ToolSpecFunc{Name: "get_weather", Description: "weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
				{Type: "function", Function: llm.ToolSpecFunc{Name: "get_time"}},
			}
			res, _, err := oaCall(t, c, req, stream)
			if err != nil || len(res.ToolCalls) != 2 || res.FinishReason != "tool_calls" {
				t.Fatalf("first = %+v, %v", res, err)
			}
			w, tm := res.ToolCalls[0], res.ToolCalls[1]
			if !oaCallIDRE.MatchString(w.ID) || w.ID == tm.ID || w.Function.Name != "get_weather" || w.Type != "function" {
				t.Errorf("call 0 = %+v", w)
			}
			var args map[string]string
			if json.Unmarshal([]byte(w.Function.Arguments), &args) != nil || args["city"] != "Paris" || tm.Function.Arguments != "{}" {
				t.Errorf("arguments = %q, %q", w.Function.Arguments, tm.Function.Arguments)
			}
			req.Messages = append(req.Messages,
				llm.Message{Role: "assistant", ToolCalls: res.ToolCalls},
				llm.Message{Role: "tool", ToolCallID: w.ID, Content: "sunny, 21C"},
				llm.Message{Role: "tool", ToolCallID: tm.ID, Content: "12:00"},
			)
			res, _, err = oaCall(t, c, req, stream)
			if err != nil || res.Content != "Sunny, 21 degrees at noon" {
				t.Fatalf("second = %+v, %v", res, err)
			}
			msgs := oaBody(t, stub.Requests()[1])["messages"].([]any)
			if m := msgs[len(msgs)-1].(map[string]any); m["role"] != "tool" || m["tool_name"] != "get_time" || m["content"] != "12:00" {
				t.Errorf("last message = %v", m)
			}
			a := msgs[len(msgs)-3].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
			if got, _ := a["arguments"].(map[string]any); got["city"] != "Paris" {
				t.Errorf("assistant call sent back = %v, want arguments as an object", a)
			}
		})
	}
}

// TestOllamaThinking: a reasoning model's thinking is kept apart from
// the text.
func TestOllamaThinking(t *testing.T) {
	for _, stream := range []bool{false, true} {
		stub := llmtest.NewOllama(t)
		stub.Push(llmtest.Reply{Thinking: "user wants a greeting", Text: "hi"})
		c := oaNew(t, "ollama", stub.URL, "", "", 0)
		res, deltas, err := oaCall(t, c, ollamaHello(), stream)
		if err != nil || res.Content != "hi" || len(res.Thinking) != 1 || !strings.Contains(res.Thinking[0].Text, "greeting") {
			t.Errorf("stream=%v: Complete = %+v, %v", stream, res, err)
		}
		if stream && strings.Join(deltas, "") != "hi" {
			t.Errorf("deltas = %q, want only the text", deltas)
		}
	}
}

// TestOllamaErrors: error statuses ({"error": "…"}), a mid-stream error
// line, and answers that cannot be read.
func TestOllamaErrors(t *testing.T) {
	tests := []struct {
		name   string
		stream bool
		reply  llmtest.Reply
		kind   string
		status int
		retry  bool
	}{
		{"404 model", false, llmtest.Reply{Status: 404, ErrorMessage: `model "nope" not found, try pulling it first`}, llm.KindStatus, 404, false},
		{"500", true, llmtest.Reply{Status: 500, ErrorMessage: "llama runner process has terminated"}, llm.KindStatus, 500, true},
		{"503 busy", false, llmtest.Reply{Status: 503, ErrorMessage: "server busy, please try again.  maximum pending requests exceeded"}, llm.KindStatus, 503, true},
		{"429 proxy", true, llmtest.Reply{Status: 429, Headers: map[string]string{"Retry-After": "4"}}, llm.KindStatus, 429, true},
		{"mid-stream", true, llmtest.Reply{Text: "a b c d", StreamErrorAfter: 2, ErrorMessage: "an error was encountered while running the model"}, llm.KindStream, 0, false},
		{"ends early", true, llmtest.Reply{Raw: `{"model":"m","message":{"role":"assistant","content":"hi"},"done":false}` + "\n"}, llm.KindMalformed, 0, false},
		{"bad line", true, llmtest.Reply{Raw: `{"message":{"content":"hi"},"done":false}` + "\n{oops\n"}, llm.KindMalformed, 0, false},
		{"bad whole", false, llmtest.Reply{Raw: `{"message":`}, llm.KindMalformed, 0, false},
		{"whole not done", false, llmtest.Reply{Raw: `{"message":{"content":"hi"},"done":false}`}, llm.KindMalformed, 0, false},
		{"whole error", false, llmtest.Reply{Raw: `{"error":"out of memory"}`}, llm.KindStream, 0, false},
		{"NDJSON to a whole request", false, llmtest.Reply{Raw: `{"message":{"content":"a"},"done":false}` + "\n" + `{"done":true}` + "\n"}, llm.KindMalformed, 0, false},
		{"arguments not an object", false, llmtest.Reply{Raw: `{"message":{"tool_calls":[{"function":{"name":"f","arguments":[1]}}]},"done":true}`}, llm.KindMalformed, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub := llmtest.NewOllama(t)
			stub.Push(tt.reply)
			c := oaNew(t, "ollama", stub.URL, "", "", 0)
			res, _, err := oaCall(t, c, ollamaHello(), tt.stream)
			if err == nil {
				t.Fatalf("Complete = %+v, nil; want an error", res)
			}
			e := oaErr(t, err)
			if e.Kind != tt.kind || e.Status != tt.status || e.Retryable() != tt.retry {
				t.Errorf("error = %+v (retryable %v), want kind %s status %d retryable %v", e, e.Retryable(), tt.kind, tt.status, tt.retry)
			}
			if tt.reply.ErrorMessage != "" && e.Message != tt.reply.ErrorMessage {
				t.Errorf("Message = %q, want %q", e.Message, tt.reply.ErrorMessage)
			}
			if tt.reply.Headers["Retry-After"] == "4" && e.RetryAfter != 4*time.Second {
				t.Errorf("RetryAfter = %v", e.RetryAfter)
			}
		})
	}
}

// TestOllamaCancel: a cancelled stream or whole call returns ctx's
// error at once.
func TestOllamaCancel(t *testing.T) {
	for _, stream := range []bool{false, true} {
		stub := llmtest.NewOllama(t)
		stub.Push(llmtest.Reply{Text: "first then never", Hang: true})
		c := oaNew(t, "ollama", stub.URL, "", "", 0)
		ctx, cancel := context.WithCancel(context.Background())
		var on llm.OnDelta
		if stream {
			on = func(string) error { cancel(); return nil }
		} else {
			time.AfterFunc(50*time.Millisecond, cancel)
		}
		start := time.Now()
		_, err := c.Complete(ctx, ollamaHello(), on)
		if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
			t.Errorf("stream=%v: Complete = %v after %v, want context.Canceled at once", stream, err, time.Since(start))
		}
		cancel()
	}
}

// TestOllamaTooLarge: an answer over MaxAnswer fails, streamed or not.
func TestOllamaTooLarge(t *testing.T) {
	for _, stream := range []bool{false, true} {
		for _, rep := range []llmtest.Reply{
			{Text: strings.Repeat("word ", 40)},
			{ToolCalls: []llmtest.Call{{Name: "f", Args: `{"x":"` + strings.Repeat("y", 200) + `"}`}}},
		} {
			stub := llmtest.NewOllama(t)
			stub.Push(rep)
			c := oaNew(t, "ollama", stub.URL, "", "", 64)
			res, _, err := oaCall(t, c, ollamaHello(), stream)
			if e := oaErr(t, err); e.Kind != llm.KindMalformed || !strings.Contains(e.Message, "larger than 64") {
				t.Errorf("stream=%v: Complete = %+v, %+v; want too large", stream, res, e)
			}
		}
	}
}

// TestOllamaOnDeltaError: onDelta's error comes back unchanged.
func TestOllamaOnDeltaError(t *testing.T) {
	stub := llmtest.NewOllama(t)
	c := oaNew(t, "ollama", stub.URL, "", "", 0)
	stop := errors.New("client gone")
	if _, err := c.Complete(context.Background(), ollamaHello(), func(string) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("Complete = %v, want %v", err, stop)
	}
}

// TestOllamaModels: /api/tags lists the models; Verify uses it; a key
// refused by a proxy fails Verify.
func TestOllamaModels(t *testing.T) {
	stub := llmtest.NewOllama(t)
	stub.OnKey("bad", llmtest.Reply{Status: 401, ErrorMessage: "unauthorized"})
	c := oaNew(t, "ollama", stub.URL, "", "", 0)
	ms, err := c.Models(context.Background())
	if err != nil || len(ms) != 2 || ms[0].ID != "llama3.2:latest" {
		t.Fatalf("Models = %v, %v", ms, err)
	}
	if err := c.Verify(context.Background()); err != nil {
		t.Errorf("Verify = %v", err)
	}
	bad := oaNew(t, "ollama", stub.URL, "bad", "", 0)
	if e := oaErr(t, bad.Verify(context.Background())); !e.KeyRejected() || e.Message != "unauthorized" {
		t.Errorf("Verify(bad) = %+v", e)
	}
}

// TestOllamaValidate: api_base optional, settings checked.
func TestOllamaValidate(t *testing.T) {
	ti, _ := llm.Lookup("ollama")
	tests := []struct{ base, settings, want string }{
		{"", "", ""},
		{"http://gpu-box:11434", `{"max_tokens": 1000, "num_ctx": 32768}`, ""},
		{"gpu-box:11434", "", "api_base"},
		{"", `{"num_ctx": "big"}`, "settings.num_ctx"},
		{"", `{"max_tokens": 0}`, "settings.max_tokens"},
		{"", `"x"`, "settings must be a JSON object"},
	}
	for _, tt := range tests {
		err := ti.Validate(tt.base, json.RawMessage(tt.settings))
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Validate(%q, %s) = %v, want %q", tt.base, tt.settings, err, tt.want)
		}
	}
}
