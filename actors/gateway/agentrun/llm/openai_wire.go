// Chat Completions wire types: the request body built from a Request,
// and a whole (non-streamed) answer read into a Result.

package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

type oaRequest struct {
	Model         string           `json:"model,omitempty"`
	Messages      []oaMessage      `json:"messages"`
	Tools         []ToolSpec       `json:"tools,omitempty"`
	MaxTokens     int              `json:"max_tokens,omitempty"`
	Stream        bool             `json:"stream,omitempty"`
	StreamOptions *oaStreamOptions `json:"stream_options,omitempty"`
}

type oaStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// oaMessage is a message as sent: content is null for an assistant
// message that only calls tools.
type oaMessage struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// oaMessages converts msgs, each in its place (Chat Completions takes
// several system messages, and a client's own system message mid-history
// keeps its meaning there); tool calls typed "function" with "{}" for
// empty arguments.
func oaMessages(msgs []Message) []oaMessage {
	out := make([]oaMessage, 0, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		om := oaMessage{Role: m.Role, ToolCallID: m.ToolCallID}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			om.Content = &m.Content
		}
		if len(m.ToolCalls) > 0 {
			om.ToolCalls = make([]ToolCall, len(m.ToolCalls))
			for j, tc := range m.ToolCalls {
				tc.Type = "function"
				if strings.TrimSpace(tc.Function.Arguments) == "" {
					tc.Function.Arguments = "{}"
				}
				om.ToolCalls[j] = tc
			}
		}
		out = append(out, om)
	}
	return out
}

// oaJoinSystem is every system message's content, a blank line between.
func oaJoinSystem(msgs []Message) string {
	var parts []string
	for _, m := range msgs {
		if m.Role == "system" && m.Content != "" {
			parts = append(parts, m.Content)
		}
	}
	return strings.Join(parts, "\n\n")
}

// oaTools types every tool "function" and gives a missing schema an
// empty object one.
func oaTools(specs []ToolSpec) []ToolSpec {
	if len(specs) == 0 {
		return nil
	}
	out := make([]ToolSpec, len(specs))
	for i, s := range specs {
		s.Type = "function"
		if len(s.Function.Parameters) == 0 {
			s.Function.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out[i] = s
	}
	return out
}

// EncodeTools is specs as the tools array of an OpenAI-shaped body, as
// the clients would encode it (Request.ToolsJSON); nil for no tools.
func EncodeTools(specs []ToolSpec) ([]byte, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(oaTools(specs))
	if err != nil {
		return nil, fmt.Errorf("encode tools: %w", err)
	}
	return b, nil
}

type oaUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	PromptDetails    *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	// CacheHit is DeepSeek's count of prompt tokens read from its cache.
	CacheHit int64 `json:"prompt_cache_hit_tokens"`
}

// apply sets r's token counts (OpenAI's convention is Result's).
func (u *oaUsage) apply(r *Result) {
	r.PromptTokens, r.CompletionTokens = u.PromptTokens, u.CompletionTokens
	r.CacheReadTokens, r.ReasoningTokens = u.CacheHit, 0
	if u.PromptDetails != nil && u.PromptDetails.CachedTokens > 0 {
		r.CacheReadTokens = u.PromptDetails.CachedTokens
	}
	if u.CompletionDetails != nil {
		r.ReasoningTokens = u.CompletionDetails.ReasoningTokens
	}
}

// oaWhole is a whole answer.
type oaWhole struct {
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Content   *string       `json:"content"`
			Refusal   *string       `json:"refusal"`
			ToolCalls []oaWholeCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *oaUsage        `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// oaWholeCall is a whole answer's tool call; arguments is a JSON string
// (some compatible servers send an object: taken as is).
type oaWholeCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// oaReadAnswer decodes a whole answer: a body of at most
// BodyLimit(maxAnswer) whose content and tool calls hold at most
// maxAnswer bytes.
func oaReadAnswer(ctx context.Context, body io.Reader, maxAnswer int) (Result, error) {
	limit := BodyLimit(maxAnswer)
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	switch {
	case err != nil:
		return Result{}, Unreachable(ctx, err)
	case int64(len(b)) > limit:
		return Result{}, TooLarge(maxAnswer)
	}
	return oaParseAnswer(b, maxAnswer)
}

// oaParseAnswer reads a whole answer's body.
func oaParseAnswer(b []byte, maxAnswer int) (Result, error) {
	var out oaWhole
	if err := json.Unmarshal(b, &out); err != nil {
		return Result{}, Malformed("malformed answer")
	}
	if oaHasJSON(out.Error) { // a 200 carrying an error (some proxies)
		typ, msg := ErrorBody(b)
		return Result{}, StreamError(typ, msg)
	}
	if len(out.Choices) == 0 {
		return Result{}, Malformed("answer without choices")
	}
	ch := out.Choices[0]
	var res Result
	switch {
	case ch.Message.Content != nil && *ch.Message.Content != "":
		res.Content = *ch.Message.Content
	case ch.Message.Refusal != nil: // the model declined: its reason is the answer
		res.Content = *ch.Message.Refusal
	}
	for _, tc := range ch.Message.ToolCalls {
		args, ok := oaArgs(tc.Function.Arguments)
		if !ok {
			return Result{}, Malformed("malformed tool call arguments")
		}
		id := tc.ID
		if id == "" {
			id = oaCallID()
		}
		res.ToolCalls = append(res.ToolCalls, ToolCall{ID: id, Type: "function", Function: ToolFunction{Name: tc.Function.Name, Arguments: args}})
	}
	if AnswerSize(&res) > maxAnswer {
		return Result{}, TooLarge(maxAnswer)
	}
	reason := ""
	if ch.FinishReason != nil {
		reason = *ch.FinishReason
	}
	if reason == "error" {
		return Result{}, StreamError("", "the provider ended the answer with an error")
	}
	res.FinishReason = oaFinish(reason, len(res.ToolCalls) > 0)
	if out.Usage != nil {
		out.Usage.apply(&res)
	}
	return res, nil
}

// oaArgs is a tool call's arguments as a JSON string: a JSON string's
// value, an object's text, "" for none.
func oaArgs(raw json.RawMessage) (string, bool) {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", true
	case raw[0] == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err == nil
	case raw[0] == '{':
		return string(raw), json.Valid(raw)
	}
	return "", false
}

// oaFinish maps a finish_reason to OpenAI's four; calls says the answer
// calls tools (some servers say "stop" then).
func oaFinish(reason string, calls bool) string {
	switch reason {
	case "length", "content_filter":
		return reason
	case "tool_calls", "function_call":
		return "tool_calls"
	}
	if calls {
		return "tool_calls"
	}
	return "stop"
}

// oaHasJSON reports whether raw holds a value other than null.
func oaHasJSON(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}
