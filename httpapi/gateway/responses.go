package gateway

import (
	"context"
	"encoding/json"
	"time"

	"gatehouse/actors/gateway/agentrun"
)

// respInput is a responses request's input: a string (one user message) or
// an array of {role, content} messages.
type respInput []chatMsg

// UnmarshalJSON accepts a string or an array of messages.
func (in *respInput) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*in = respInput{{Role: "user", Content: msgContent(s)}}
		return nil
	}
	var msgs []chatMsg
	if err := json.Unmarshal(b, &msgs); err != nil {
		return invalidContent("input must be a string or an array of {role, content} messages")
	}
	*in = msgs
	return nil
}

func (respInput) jsonSchema() map[string]any {
	return map[string]any{"oneOf": []any{
		map[string]any{"type": "string"},
		map[string]any{"type": "array", "items": map[string]any{"$ref": "#/components/schemas/chatMsg"}},
	}}
}

type respReq struct {
	// Model selects the agent as in chat completions.
	Model string    `json:"model"`
	Input respInput `json:"input"`
	// Messages is the chat-style alternative to input (what GoClaw's
	// clients send); when both are given, the messages come first.
	Messages     []chatMsg `json:"messages,omitempty"`
	Instructions string    `json:"instructions,omitempty"`
	Stream       bool      `json:"stream,omitempty"`
	User         string    `json:"user,omitempty"`
}

type respContent struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type respItem struct {
	Type    string        `json:"type"`
	ID      string        `json:"id"`
	Role    string        `json:"role"`
	Status  string        `json:"status"`
	Content []respContent `json:"content"`
}

type respUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
	// OpenAI's Responses shape of the parts the provider reported.
	InputDetails  *respInputDetails  `json:"input_tokens_details,omitempty"`
	OutputDetails *respOutputDetails `json:"output_tokens_details,omitempty"`
}

type respInputDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

type respOutputDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// respUsageOf is res's usage in the Responses shape.
func respUsageOf(res agentrun.Result) *respUsage {
	u := &respUsage{InputTokens: res.PromptTokens, OutputTokens: res.CompletionTokens, TotalTokens: res.PromptTokens + res.CompletionTokens}
	if res.CacheReadTokens > 0 {
		u.InputDetails = &respInputDetails{CachedTokens: res.CacheReadTokens}
	}
	if res.ReasoningTokens > 0 {
		u.OutputDetails = &respOutputDetails{ReasoningTokens: res.ReasoningTokens}
	}
	return u
}

type respError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// respObject is a response; status is in_progress, completed or failed.
type respObject struct {
	ID        string     `json:"id"`
	Object    string     `json:"object"`
	CreatedAt int64      `json:"created_at"`
	Model     string     `json:"model"`
	Status    string     `json:"status"`
	Output    []respItem `json:"output"`
	Usage     *respUsage `json:"usage"`
	Error     *respError `json:"error"`
}

// respEvent is one streamed event: response.started and response.done
// carry the response, response.delta a piece of text.
type respEvent struct {
	Type         string      `json:"type"`
	Response     *respObject `json:"response,omitempty"`
	ItemID       string      `json:"item_id,omitempty"`
	OutputIndex  *int        `json:"output_index,omitempty"`
	ContentIndex *int        `json:"content_index,omitempty"`
	Delta        string      `json:"delta,omitempty"`
}

func (s *Server) responses(ctx context.Context, c Caller, req respReq) (Streaming[respObject], error) {
	var none Streaming[respObject]
	if len(req.Input) == 0 && len(req.Messages) == 0 {
		return none, errInvalid("input (or messages) must not be empty")
	}
	var msgs []agentrun.Message
	if req.Instructions != "" {
		msgs = append(msgs, agentrun.Message{Role: "system", Content: req.Instructions})
	}
	msgs, err := appendMessages(msgs, "messages", req.Messages)
	if err != nil {
		return none, err
	}
	if msgs, err = appendMessages(msgs, "input", req.Input); err != nil {
		return none, err
	}
	t, model, err := s.begin(ctx, c, req.Model, req.User, "responses", msgs)
	if err != nil {
		return none, err
	}
	obj := respObject{ID: "resp_" + t.ID, Object: "response", CreatedAt: time.Now().Unix(), Model: model, Status: "in_progress", Output: []respItem{}}
	itemID := "msg_" + t.ID
	done := func(res agentrun.Result) respObject {
		o := obj
		o.Status = "completed"
		o.Output = []respItem{{Type: "message", ID: itemID, Role: "assistant", Status: "completed",
			Content: []respContent{{Type: "output_text", Text: res.Content, Annotations: []any{}}}}}
		o.Usage = respUsageOf(res)
		return o
	}
	if !req.Stream {
		res, err := s.d.Runner.RunTurn(runContext(ctx), t, nil)
		if err != nil {
			return none, err
		}
		return Streaming[respObject]{Value: done(res.Result)}, nil
	}
	zero := 0
	return Streaming[respObject]{Events: func(ctx context.Context, st Stream) {
		if st.Send("response.started", respEvent{Type: "response.started", Response: &obj}) != nil {
			return
		}
		res, err := s.pump(ctx, st, t, func(d string) error {
			return st.Send("response.delta", respEvent{Type: "response.delta", ItemID: itemID, OutputIndex: &zero, ContentIndex: &zero, Delta: d})
		})
		if err != nil {
			if ctx.Err() == nil { // the client is still there: the failure ends the response
				d := st.Error(err)
				failed := obj
				failed.Status = "failed"
				failed.Error = &respError{Code: d.Code, Message: d.Message}
				_ = st.Send("response.done", respEvent{Type: "response.done", Response: &failed})
			}
			return
		}
		o := done(res)
		_ = st.Send("response.done", respEvent{Type: "response.done", Response: &o})
	}}, nil
}
