// echo: the offline provider, for demos and tests. It answers "echo: "
// and the last user (or tool) message, one word per delta, after
// settings.delay_ms (default 10) each; tokens are words. A last user
// message "/tool <name> <JSON arguments>" naming one of the request's
// tools is answered with that call. No network, no SDK: nothing to
// follow but this behaviour, which the gateway's tests depend on.

package llm

import (
	"context"
	"encoding/json"
	"iter"
	"strings"
	"time"
)

func init() {
	Register(TypeInfo{Name: "echo", New: newEcho, Validate: validateEcho})
}

// echoDefaultDelay is the wait before each word without settings.delay_ms.
const echoDefaultDelay = 10 * time.Millisecond

// echoMaxDelayMs bounds settings.delay_ms (one minute a word).
const echoMaxDelayMs = 60_000

func validateEcho(_ string, settings json.RawMessage) error {
	f, err := oaFields(settings)
	if err != nil {
		return err
	}
	_, err = oaInt(f, "delay_ms", 0, echoMaxDelayMs)
	return err
}

func newEcho(cfg Config) (Client, error) {
	delay := echoDefaultDelay
	var st struct {
		DelayMs *int `json:"delay_ms"`
	}
	if json.Unmarshal(cfg.Settings, &st) == nil && st.DelayMs != nil && *st.DelayMs >= 0 {
		delay = time.Duration(*st.DelayMs) * time.Millisecond
	}
	return echo{delay: delay}, nil
}

// echo is the offline provider.
type echo struct {
	delay time.Duration
}

// Complete implements Client.
func (e echo) Complete(ctx context.Context, req Request, onDelta OnDelta) (Result, error) {
	last := ""
	var prompt int64
	for _, m := range req.Messages {
		prompt += countWords(m.Content) // no slice of every word: a large message costs no memory
		if m.Role == "user" || m.Role == "tool" {
			last = m.Content
		}
	}
	if tc, ok := echoToolCall(req); ok {
		return Result{ToolCalls: []ToolCall{tc}, PromptTokens: prompt, CompletionTokens: 1, FinishReason: "tool_calls"}, nil
	}
	out := strings.Builder{}
	t := time.NewTimer(e.delay)
	defer t.Stop()
	words := int64(0)
	for w := range echoWords(last) {
		t.Reset(e.delay)
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-t.C:
		}
		if words > 0 {
			w = " " + w
		}
		words++
		out.WriteString(w)
		if onDelta != nil {
			if err := onDelta(w); err != nil {
				return Result{}, err
			}
		}
	}
	return Result{Content: out.String(), PromptTokens: prompt, CompletionTokens: words, FinishReason: "stop"}, nil
}

// Models implements Client: the one model, "echo".
func (echo) Models(context.Context) ([]Model, error) {
	return []Model{{ID: "echo"}}, nil
}

// Verify implements Client: there is nothing to reach.
func (echo) Verify(context.Context) error { return nil }

// echoWords yields "echo:" and then the words of s.
func echoWords(s string) iter.Seq[string] {
	return func(yield func(string) bool) {
		if !yield("echo:") {
			return
		}
		for w := range strings.FieldsSeq(s) {
			if !yield(w) {
				return
			}
		}
	}
}

// countWords is len(strings.Fields(s)) without the slice.
func countWords(s string) int64 {
	var n int64
	for range strings.FieldsSeq(s) {
		n++
	}
	return n
}

// echoToolCall is the echo provider's tool convention, for offline demos
// and tests: a last user message "/tool <name> <JSON arguments>" naming
// one of the request's tools is answered with that call; the tool's
// result is then echoed like a user message.
func echoToolCall(req Request) (ToolCall, bool) {
	if len(req.Messages) == 0 {
		return ToolCall{}, false
	}
	m := req.Messages[len(req.Messages)-1]
	rest, ok := strings.CutPrefix(m.Content, "/tool ")
	if m.Role != "user" || !ok {
		return ToolCall{}, false
	}
	name, args, _ := strings.Cut(strings.TrimSpace(rest), " ")
	if args = strings.TrimSpace(args); args == "" {
		args = "{}"
	}
	for _, t := range req.Tools {
		if t.Function.Name == name {
			return ToolCall{ID: oaCallID(), Type: "function", Function: ToolFunction{Name: name, Arguments: args}}, true
		}
	}
	return ToolCall{}, false
}

var _ Client = echo{}
