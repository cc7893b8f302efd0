package httpapi

import (
	"context"
	"encoding/json"
	"time"

	"github.com/valyala/fasthttp"
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
	Model        string    `json:"model"`
	Input        respInput `json:"input"`
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

func (s *GatewayServer) responses(r *gwReq) error {
	var req respReq
	if err := decode(r, &req); err != nil {
		return err
	}
	if len(req.Input) == 0 {
		return errGWInvalid("input must not be empty")
	}
	var msgs []llmMessage
	if req.Instructions != "" {
		msgs = append(msgs, llmMessage{Role: "system", Content: req.Instructions})
	}
	for _, m := range req.Input {
		if !chatRoles[m.Role] {
			return errGWInvalid("input[].role must be system, developer, user, assistant or tool")
		}
		msgs = append(msgs, llmMessage{Role: m.Role, Content: string(m.Content)})
	}
	user := r.userID
	if user == "" {
		user = req.User
	}
	rn, err := s.prepare(r, agentRef(req.Model, r.agentID), user, "responses", msgs)
	if err != nil {
		return err
	}
	model := req.Model
	if model == "" {
		model = "gateway:" + rn.agent.AgentKey
	}
	obj := respObject{ID: "resp_" + rn.id, Object: "response", CreatedAt: time.Now().Unix(), Model: model, Status: "in_progress", Output: []respItem{}}
	itemID := "msg_" + rn.id
	done := func(res llmResult) respObject {
		o := obj
		o.Status = "completed"
		o.Output = []respItem{{Type: "message", ID: itemID, Role: "assistant", Status: "completed",
			Content: []respContent{{Type: "output_text", Text: res.Content, Annotations: []any{}}}}}
		o.Usage = &respUsage{InputTokens: res.PromptTokens, OutputTokens: res.CompletionTokens, TotalTokens: res.PromptTokens + res.CompletionTokens}
		return o
	}
	if !req.Stream {
		res, err := s.execute(context.Background(), rn, nil)
		if err != nil {
			return err
		}
		writeJSON(r.rc, fasthttp.StatusOK, done(res))
		return nil
	}
	lang := r.lang
	zero := 0
	s.stream(r, func(ctx context.Context, sw *sseWriter) {
		if sw.send("response.started", respEvent{Type: "response.started", Response: &obj}) != nil {
			return
		}
		res, err := s.pump(ctx, sw, rn, func(d string) error {
			return sw.send("response.delta", respEvent{Type: "response.delta", ItemID: itemID, OutputIndex: &zero, ContentIndex: &zero, Delta: d})
		})
		if err != nil {
			if ctx.Err() == nil {
				e, body, _ := envelope(err, lang)
				failed := obj
				failed.Status = "failed"
				failed.Error = &respError{Code: e.code, Message: body.Error.Message}
				_ = sw.send("response.done", respEvent{Type: "response.done", Response: &failed})
			}
			return
		}
		o := done(res)
		_ = sw.send("response.done", respEvent{Type: "response.done", Response: &o})
	})
	return nil
}
