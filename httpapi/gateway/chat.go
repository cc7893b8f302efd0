package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/runtime"
)

// Runner runs agents (the agent runtime). Safe for concurrent use.
type Runner interface {
	// Prepare resolves the agent and its provider: runtime.ErrAgentNotFound,
	// ErrAgentDisabled, ErrProviderDisabled.
	Prepare(ctx context.Context, req runtime.Request) (*runtime.Run, error)
	// Execute runs rn within its agent's time limit and records it;
	// onDelta gets streamed content. Errors: *runtime.TimeoutError,
	// *runtime.ProviderError, ctx's.
	Execute(ctx context.Context, rn *runtime.Run, onDelta func(string) error) (runtime.Result, error)
	// ToolsFor lists the tools agent ref runs with for user (tools.invoke).
	ToolsFor(ctx context.Context, ref, user string) (gateway.Agent, []runtime.Tool, error)
}

var _ Runner = (*runtime.Runtime)(nil)

// msgContent is a message's content: a string, or an array of parts whose
// "text" fields are joined (OpenAI's content-part form).
type msgContent string

// invalidContent is a content field of the wrong shape.
type invalidContent string

func (e invalidContent) Error() string { return string(e) }

// UnmarshalJSON accepts a string or [{type, text}, ...].
func (c *msgContent) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*c = msgContent(s)
		return nil
	}
	var parts []struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return invalidContent("content must be a string or an array of text parts")
	}
	var sb strings.Builder
	for _, p := range parts {
		if p.Text != nil {
			sb.WriteString(*p.Text)
		}
	}
	*c = msgContent(sb.String())
	return nil
}

// jsonSchema describes msgContent in the OpenAPI document.
func (msgContent) jsonSchema() map[string]any {
	return map[string]any{"oneOf": []any{
		map[string]any{"type": "string"},
		map[string]any{"type": "array", "items": map[string]any{
			"type": "object", "properties": map[string]any{"type": map[string]any{"type": "string"}, "text": map[string]any{"type": "string"}},
		}},
	}}
}

type chatMsg struct {
	Role    string     `json:"role"`
	Content msgContent `json:"content"`
}

type chatStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatReq is the seed's chat-completions body; other OpenAI fields are
// accepted and ignored.
type chatReq struct {
	// Model selects the agent with "gateway:<agent>" or "agent:<agent>";
	// otherwise X-Gateway-Agent-Id, then the agent "default".
	Model         string             `json:"model"`
	Messages      []chatMsg          `json:"messages"`
	Stream        bool               `json:"stream,omitempty"`
	StreamOptions *chatStreamOptions `json:"stream_options,omitempty"`
	User          string             `json:"user,omitempty"`
}

type chatOutMsg struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content"`
}

type chatChoice struct {
	Index        int        `json:"index"`
	Message      chatOutMsg `json:"message"`
	FinishReason string     `json:"finish_reason"`
}

type chatUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

type chatResp struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   chatUsage    `json:"usage"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chatOutMsg `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
}

type chatChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *chatUsage    `json:"usage,omitempty"`
}

func usageOf(res runtime.Result) chatUsage {
	return chatUsage{PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens, TotalTokens: res.PromptTokens + res.CompletionTokens}
}

var chatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

// agentRef applies the first two steps of the resolution order: the
// model prefix, then X-Gateway-Agent-Id; "" leaves the third, the
// default agent, to the caller.
func agentRef(model, header string) string {
	for _, p := range []string{"gateway:", "agent:"} {
		if ref, ok := strings.CutPrefix(model, p); ok && ref != "" {
			return ref
		}
	}
	return header // "": the default agent (Gateway.DefaultAgent)
}

// runUser is the user a run acts for: the caller's (see bindUser), or,
// for a trusted backend that named none, the body's "user". A key bound to
// a user cannot name another in the body either (errUserBinding).
func runUser(c Caller, body string) (string, error) {
	switch {
	case c.Trusted() && c.UserID == "":
		return body, nil
	case body != "" && body != c.UserID && !c.Trusted():
		return "", errUserBinding
	}
	return c.UserID, nil
}

// runContext is the context of a run that answers in one piece: the
// request's values without its deadline, because a run is bounded by its
// agent's timeout_seconds, not by the control plane's request timeout.
func runContext(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// appendMessages appends msgs to dst, checking each role; field names
// the array in the error.
func appendMessages(dst []runtime.Message, field string, msgs []chatMsg) ([]runtime.Message, error) {
	for _, m := range msgs {
		if !chatRoles[m.Role] {
			return nil, errInvalid(field + "[].role must be system, developer, user, assistant or tool")
		}
		dst = append(dst, runtime.Message{Role: m.Role, Content: string(m.Content)})
	}
	return dst, nil
}

// prepare prepares the run of a chat-style request: the agent from model
// (or the caller's X-Gateway-Agent-Id, or "default"), the user from the
// caller (or the body's user). It returns the model to echo in the
// answer: the request's, else "gateway:" and the agent's key.
func (s *Server) prepare(ctx context.Context, c Caller, model, user, endpoint string, msgs []runtime.Message) (*runtime.Run, string, error) {
	user, err := runUser(c, user)
	if err != nil {
		return nil, "", err
	}
	ref := agentRef(model, c.AgentID)
	if ref == "" {
		a, err := s.d.Agents.DefaultAgent(ctx, user)
		if err != nil {
			return nil, "", resource(err, errAgentNotFound, nil)
		}
		ref = a.ID.String()
	}
	rn, err := s.d.Runner.Prepare(ctx, runtime.Request{
		Agent: ref, User: user, Endpoint: endpoint, Channel: c.Channel, Messages: msgs,
	})
	if err != nil {
		return nil, "", err
	}
	if !mayRun(c, user, &rn.Agent) {
		return nil, "", errAgentNotFound
	}
	if model == "" {
		model = "gateway:" + rn.Agent.AgentKey
	}
	return rn, model, nil
}

// mayRun reports whether c may run agent a for user: user must own it or
// have it shared with them; only a trusted backend acting for nobody may
// run any agent. A stranger gets 404, as on GET /v1/agents/{id}: ids do
// not leak.
func mayRun(c Caller, user string, a *gateway.Agent) bool {
	return (user == "" && c.Trusted()) || a.CanUse(user)
}

func (s *Server) chatCompletions(ctx context.Context, c Caller, req chatReq) (Streaming[chatResp], error) {
	var none Streaming[chatResp]
	if len(req.Messages) == 0 {
		return none, errInvalid("messages must hold at least one message")
	}
	msgs, err := appendMessages(make([]runtime.Message, 0, len(req.Messages)), "messages", req.Messages)
	if err != nil {
		return none, err
	}
	rn, model, err := s.prepare(ctx, c, req.Model, req.User, "chat.completions", msgs)
	if err != nil {
		return none, err
	}
	id, created := "chatcmpl-"+rn.ID, time.Now().Unix()
	if !req.Stream {
		res, err := s.d.Runner.Execute(runContext(ctx), rn, nil)
		if err != nil {
			return none, err
		}
		return Streaming[chatResp]{Value: chatResp{
			ID: id, Object: "chat.completion", Created: created, Model: model,
			Choices: []chatChoice{{Message: chatOutMsg{Role: "assistant", Content: res.Content}, FinishReason: res.FinishReason}},
			Usage:   usageOf(res),
		}}, nil
	}
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	chunk := func(d chatOutMsg, finish *string) chatChunk {
		return chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model,
			Choices: []chunkChoice{{Delta: d, FinishReason: finish}}}
	}
	return Streaming[chatResp]{Events: func(ctx context.Context, st Stream) {
		if st.Send("", chunk(chatOutMsg{Role: "assistant"}, nil)) != nil {
			return
		}
		res, err := s.pump(ctx, st, rn, func(d string) error { return st.Send("", chunk(chatOutMsg{Content: d}, nil)) })
		if err != nil {
			if ctx.Err() == nil { // the client is still there: tell it, as OpenAI does
				_ = st.Send("", ErrorBody{Error: st.Error(err)})
				_ = st.Send("", chatDone)
			}
			return
		}
		fr := res.FinishReason
		if st.Send("", chunk(chatOutMsg{}, &fr)) != nil {
			return
		}
		if includeUsage {
			u := usageOf(res)
			if st.Send("", chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, Choices: []chunkChoice{}, Usage: &u}) != nil {
				return
			}
		}
		_ = st.Send("", chatDone)
	}}, nil
}

// chatDone ends a chat-completions stream.
const chatDone = Raw("[DONE]")

// Wake.

type wakeReq struct {
	ID      string `path:"id" json:"-"`
	Message string `json:"message"`
	// SessionKey, when set, runs the wake as a turn of that session (its
	// history goes to the provider; the turn is appended to it).
	SessionKey string `json:"session_key,omitempty"`
}

type wakeResp struct {
	Content string    `json:"content"`
	RunID   string    `json:"run_id"`
	Usage   chatUsage `json:"usage"`
}

func (s *Server) wake(ctx context.Context, c Caller, req wakeReq) (wakeResp, error) {
	if strings.TrimSpace(req.Message) == "" {
		return wakeResp{}, errInvalid("message must not be empty")
	}
	a, err := s.d.Agents.GetAgent(ctx, c.UserID, req.ID)
	if err != nil {
		return wakeResp{}, resource(err, errAgentNotFound, nil)
	}
	msgs := []runtime.Message{{Role: "user", Content: req.Message}}
	runCtx := runContext(ctx)
	if req.SessionKey != "" {
		tctx, cancel := context.WithCancel(runCtx)
		defer cancel()
		turn, err := s.d.Sessions.QueueTurn(req.SessionKey, a.ID.String(), c.UserID, "http", cancel)(tctx)
		if err != nil {
			return wakeResp{}, resource(err, errAgentNotFound, nil)
		}
		msgs, runCtx = turnMessages(turn, req.Message), tctx
	}
	rn, err := s.d.Runner.Prepare(ctx, runtime.Request{Agent: a.ID.String(), User: c.UserID, Endpoint: "agents.wake", Channel: c.Channel, Messages: msgs})
	var res runtime.Result
	if err == nil {
		res, err = s.d.Runner.Execute(runCtx, rn, nil)
	}
	if req.SessionKey != "" {
		s.endTurn(ctx, req.SessionKey, req.Message, res, err)
	}
	if err != nil {
		return wakeResp{}, err
	}
	return wakeResp{Content: res.Content, RunID: rn.ID, Usage: usageOf(res)}, nil
}
