package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"gatehouse/actors/gateway/agentrun/llm"
)

func echoClient(t *testing.T, settings string) llm.Client {
	t.Helper()
	c, err := llm.New(llm.Config{Type: "echo", Settings: json.RawMessage(settings)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEchoAnswer: "echo:" and the last user message, a word a delta;
// tokens are words (the gateway's tests depend on these exact values).
func TestEchoAnswer(t *testing.T) {
	c := echoClient(t, `{"delay_ms":0}`)
	req := llm.Request{Model: "any", Messages: []llm.Message{
		{Role: "system", Content: "be nice"}, {Role: "user", Content: "first"}, {Role: "assistant", Content: "echo: first"},
		{Role: "user", Content: "  hello   big world "},
	}}
	for _, stream := range []bool{false, true} {
		res, deltas, err := oaCall(t, c, req, stream)
		if err != nil {
			t.Fatal(err)
		}
		want := llm.Result{Content: "echo: hello big world", PromptTokens: 8, CompletionTokens: 4, FinishReason: "stop"}
		if res.Content != want.Content || res.PromptTokens != want.PromptTokens || res.CompletionTokens != want.CompletionTokens || res.FinishReason != "stop" || res.ToolCalls != nil {
			t.Errorf("stream=%v: Complete = %+v, want %+v", stream, res, want)
		}
		if stream && strings.Join(deltas, "|") != "echo:| hello| big| world" {
			t.Errorf("deltas = %q", deltas)
		}
	}
}

// TestEchoToolCall: "/tool <name> <args>" naming one of the request's
// tools is answered with that call; the tool's result is then echoed.
func TestEchoToolCall(t *testing.T) {
	c := echoClient(t, `{"delay_ms":0}`)
	tools := []llm.ToolSpec{{Type: "function", Function: llm.ToolSpecFunc{Name: "add"}}}
	tests := []struct {
		msg, name, args, content string
	}{
		{`/tool add {"a":2,"b":40}`, "add", `{"a":2,"b":40}`, ""},
		{`/tool add`, "add", `{}`, ""},
		{`/tool sub {"a":1}`, "", "", `echo: /tool sub {"a":1}`},
	}
	for _, tt := range tests {
		res, _, err := oaCall(t, c, llm.Request{Messages: []llm.Message{{Role: "user", Content: tt.msg}}, Tools: tools}, true)
		if err != nil {
			t.Fatal(err)
		}
		if tt.name == "" {
			if res.Content != tt.content || len(res.ToolCalls) != 0 {
				t.Errorf("%q: Complete = %+v, want %q", tt.msg, res, tt.content)
			}
			continue
		}
		if len(res.ToolCalls) != 1 || res.FinishReason != "tool_calls" || res.CompletionTokens != 1 {
			t.Fatalf("%q: Complete = %+v, want one call", tt.msg, res)
		}
		tc := res.ToolCalls[0]
		if tc.Function.Name != tt.name || tc.Function.Arguments != tt.args || tc.Type != "function" || !oaCallIDRE.MatchString(tc.ID) {
			t.Errorf("%q: call = %+v", tt.msg, tc)
		}
	}
	res, _, err := oaCall(t, c, llm.Request{Messages: []llm.Message{
		{Role: "user", Content: "/tool add {}"}, {Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "call_1"}}}, {Role: "tool", ToolCallID: "call_1", Content: "42"},
	}, Tools: tools}, false)
	if err != nil || res.Content != "echo: 42" {
		t.Errorf("after the tool: %+v, %v", res, err)
	}
}

// TestEchoDelay: settings.delay_ms paces the words (default 10 ms), and
// a cancelled call returns ctx's error.
func TestEchoDelay(t *testing.T) {
	req := llm.Request{Messages: []llm.Message{{Role: "user", Content: "a b c"}}}
	start := time.Now()
	if _, _, err := oaCall(t, echoClient(t, ""), req, false); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Errorf("4 words at the default 10 ms took %v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start = time.Now()
	_, err := echoClient(t, `{"delay_ms":60000}`).Complete(ctx, req, nil)
	if !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
		t.Errorf("Complete = %v after %v, want context.Canceled at once", err, time.Since(start))
	}
}

// TestEchoOnDeltaError: onDelta's error comes back unchanged.
func TestEchoOnDeltaError(t *testing.T) {
	stop := errors.New("client gone")
	_, err := echoClient(t, `{"delay_ms":0}`).Complete(context.Background(), llm.Request{}, func(string) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("Complete = %v, want %v", err, stop)
	}
}

// TestEchoModels: one model, and nothing to verify.
func TestEchoModels(t *testing.T) {
	c := echoClient(t, "")
	ms, err := c.Models(context.Background())
	if err != nil || len(ms) != 1 || ms[0].ID != "echo" {
		t.Errorf("Models = %v, %v", ms, err)
	}
	if err := c.Verify(context.Background()); err != nil {
		t.Errorf("Verify = %v", err)
	}
}

// TestEchoValidate: delay_ms is a whole number of milliseconds up to a
// minute; other settings are left alone.
func TestEchoValidate(t *testing.T) {
	ti, ok := llm.Lookup("echo")
	if !ok || ti.NeedsKey {
		t.Fatalf("echo = %+v, %v", ti, ok)
	}
	for settings, ok := range map[string]bool{
		``: true, `null`: true, `{"delay_ms":0}`: true, `{ "delay_ms" : 5, "note": "<b>&" }`: true, `{"delay_ms":60000}`: true,
		`{"delay_ms":-1}`: false, `{"delay_ms":"5"}`: false, `{"delay_ms":1.5}`: false, `[]`: false,
	} {
		if err := ti.Validate("", json.RawMessage(settings)); (err == nil) != ok {
			t.Errorf("Validate(%s) = %v, want ok %v", settings, err, ok)
		}
	}
}
