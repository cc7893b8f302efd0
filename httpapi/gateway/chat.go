package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun"
)

// Runner runs agents (the agent runtime): every run is a turn, which
// decides policy before it resolves tools or calls a provider. Safe for
// concurrent use.
type Runner interface {
	// Begin resolves the agent, decides whether p may run it, begins the
	// session turn if any and prepares the run: agentrun.ErrAgentNotFound
	// (also for a caller who may not run it), ErrAgentDisabled,
	// ErrProviderDisabled.
	Begin(ctx context.Context, p gateway.Principal, req agentrun.TurnRequest) (*agentrun.Turn, error)
	// RunTurn runs t within its agent's time limit and records it;
	// onDelta gets streamed content. Errors: *agentrun.TimeoutError,
	// *agentrun.ProviderError, ctx's.
	RunTurn(ctx context.Context, t *agentrun.Turn, onDelta func(string) error) (agentrun.TurnResult, error)
	// Turn is Begin then RunTurn with req.OnDelta.
	Turn(ctx context.Context, p gateway.Principal, req agentrun.TurnRequest) (agentrun.TurnResult, error)
	// ToolsFor lists the tools agent ref runs with for p (tools.invoke),
	// after the policy.
	ToolsFor(ctx context.Context, p gateway.Principal, ref string) (gateway.Agent, []agentrun.Tool, error)
	// Summon starts agent a's summoning in the background.
	Summon(a gateway.Agent, user string)
	// Regenerate rewrites agent ref's prompt by request (owner or
	// operator: gateway.ErrForbidden).
	Regenerate(ctx context.Context, p gateway.Principal, ref, request string) (gateway.Agent, error)
}

var _ Runner = (*agentrun.Runtime)(nil)

// msgContent is a message's content: a string, or an array of parts whose
// "text" fields are joined (OpenAI's content-part form).
type msgContent string

// invalidContent is a content field of the wrong shape.
type invalidContent string

func (e invalidContent) Error() string { return string(e) }

// UnmarshalJSON accepts a string or [{type, text}, ...]. b is one JSON
// value the decoder has already checked; a string without escapes whose
// bytes are valid UTF-8 is its own text, taken without decoding it
// again (a chat message may be a megabyte: issue 35).
func (c *msgContent) UnmarshalJSON(b []byte) error {
	if n := len(b); n >= 2 && b[0] == '"' && bytes.IndexByte(b, '\\') < 0 && utf8.Valid(b) {
		*c = msgContent(b[1 : n-1])
		return nil
	}
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
	// The parts of the counts the provider reported (OpenAI's shape):
	// prompt tokens read from and written to its cache, completion
	// tokens spent reasoning. Absent when it reported none.
	PromptDetails     *promptDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionDetails *completionDetails `json:"completion_tokens_details,omitempty"`
}

type promptDetails struct {
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
}

type completionDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
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

func usageOf(res agentrun.Result) chatUsage {
	u := chatUsage{PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens, TotalTokens: res.PromptTokens + res.CompletionTokens}
	if res.CacheReadTokens > 0 || res.CacheWriteTokens > 0 {
		u.PromptDetails = &promptDetails{CachedTokens: res.CacheReadTokens, CacheWriteTokens: res.CacheWriteTokens}
	}
	if res.ReasoningTokens > 0 {
		u.CompletionDetails = &completionDetails{ReasoningTokens: res.ReasoningTokens}
	}
	return u
}

var chatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

// agentRef applies the first two steps of the resolution order: the
// model prefix, then X-Gateway-Agent-Id; "" leaves the third, the
// default agent, to the runtime's turn.
func agentRef(model, header string) string {
	for _, p := range []string{"gateway:", "agent:"} {
		if ref, ok := strings.CutPrefix(model, p); ok && ref != "" {
			return ref
		}
	}
	return header // "": the default agent (Gateway.DefaultAgent)
}

// runPrincipal is who a run acts for: the caller's user (see bindUser),
// or, for a trusted backend that named none, the body's "user". A key
// bound to a user cannot name another in the body either
// (errUserBinding).
func runPrincipal(c Caller, body string) (gateway.Principal, error) {
	switch {
	case c.Trusted() && c.UserID == "":
		return gateway.Principal{User: body, Trusted: true, KeyID: c.KeyID}, nil
	case body != "" && body != c.UserID && !c.Trusted():
		return gateway.Principal{}, errUserBinding
	}
	return c.principal(), nil
}

// runContext is the context of a run that answers in one piece: the
// request's values without its deadline, because a run is bounded by its
// agent's timeout_seconds, not by the control plane's request timeout;
// but, over HTTP, it ends when the client goes away (the connection is
// watched while the run waits: clientWatch), and the provider's request
// with it. It needs no cancel: it ends at the latest when the handler
// returns.
func runContext(ctx context.Context) context.Context {
	run := context.WithoutCancel(ctx)
	var gone context.Context
	switch w := ctx.Value(clientWatchKey{}).(type) {
	case *clientWatch: // HTTP: the request's connection, watched
		gone = w.gone()
	default: // an RPC over the WebSocket: the socket's life during the call
		if gone, _ = ctx.Value(socketLifeKey{}).(context.Context); gone == nil {
			return run
		}
	}
	run, cancel := context.WithCancelCause(run)
	context.AfterFunc(gone, func() { cancel(context.Cause(gone)) })
	return run
}

// appendMessages appends msgs to dst, checking each role; field names
// the array in the error.
func appendMessages(dst []agentrun.Message, field string, msgs []chatMsg) ([]agentrun.Message, error) {
	for _, m := range msgs {
		if !chatRoles[m.Role] {
			return nil, errInvalid(field + "[].role must be system, developer, user, assistant or tool")
		}
		dst = append(dst, agentrun.Message{Role: m.Role, Content: string(m.Content)})
	}
	return dst, nil
}

// begin begins the turn of a chat-style request: the agent from model
// (or the caller's X-Gateway-Agent-Id, or the default agent), the user
// from the caller (or the body's user). It returns the model to echo in
// the answer: the request's, else "gateway:" and the agent's key.
func (s *Server) begin(ctx context.Context, c Caller, model, user, endpoint string, msgs []agentrun.Message) (*agentrun.Turn, string, error) {
	p, err := runPrincipal(c, user)
	if err != nil {
		return nil, "", err
	}
	t, err := s.d.Runner.Begin(ctx, p, agentrun.TurnRequest{
		Agent: agentRef(model, c.AgentID), Endpoint: endpoint, Channel: c.Channel, Messages: msgs,
	})
	if err != nil {
		return nil, "", err
	}
	if model == "" {
		model = "gateway:" + t.Agent.AgentKey
	}
	return t, model, nil
}

func (s *Server) chatCompletions(ctx context.Context, c Caller, req chatReq) (Streaming[chatResp], error) {
	var none Streaming[chatResp]
	if len(req.Messages) == 0 {
		return none, errInvalid("messages must hold at least one message")
	}
	msgs, err := appendMessages(make([]agentrun.Message, 0, len(req.Messages)), "messages", req.Messages)
	if err != nil {
		return none, err
	}
	t, model, err := s.begin(ctx, c, req.Model, req.User, "chat.completions", msgs)
	if err != nil {
		return none, err
	}
	id, created := "chatcmpl-"+t.ID, time.Now().Unix()
	if !req.Stream {
		res, err := s.d.Runner.RunTurn(runContext(ctx), t, nil)
		if err != nil {
			return none, err
		}
		return Streaming[chatResp]{Value: chatResp{
			ID: id, Object: "chat.completion", Created: created, Model: model,
			Choices: []chatChoice{{Message: chatOutMsg{Role: "assistant", Content: res.Content}, FinishReason: res.FinishReason}},
			Usage:   usageOf(res.Result),
		}, Header: s.budgetHeader(ctx, c, req.User, t.Agent.ID)}, nil
	}
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	chunk := func(d chatOutMsg, finish *string) chatChunk {
		return chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model,
			Choices: []chunkChoice{{Delta: d, FinishReason: finish}}}
	}
	return Streaming[chatResp]{Header: s.budgetHeader(ctx, c, req.User, t.Agent.ID), Events: func(ctx context.Context, st Stream) {
		// The role chunk goes out with the first delta (or holdFirst
		// later, see pump): one write fewer.
		if queue(st, "", chunk(chatOutMsg{Role: "assistant"}, nil)) != nil {
			return
		}
		res, err := s.pump(ctx, st, t, func(d string) error { return st.Send("", chunk(chatOutMsg{Content: d}, nil)) })
		if err != nil {
			if ctx.Err() == nil { // the client is still there: tell it, as OpenAI does
				_ = queue(st, "", ErrorBody{Error: st.Error(err)})
				_ = st.Send("", chatDone)
			}
			return
		}
		// The last chunks and [DONE] follow each other: one write.
		fr := res.FinishReason
		if queue(st, "", chunk(chatOutMsg{}, &fr)) != nil {
			return
		}
		if includeUsage {
			u := usageOf(res)
			if queue(st, "", chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, Choices: []chunkChoice{}, Usage: &u}) != nil {
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
	res, err := s.d.Runner.Turn(runContext(ctx), c.principal(), agentrun.TurnRequest{
		Agent: req.ID, SessionKey: req.SessionKey, Endpoint: "agents.wake", Channel: c.Channel,
		Messages: []agentrun.Message{{Role: "user", Content: req.Message}},
	})
	if err != nil {
		return wakeResp{}, resource(err, errAgentNotFound, nil)
	}
	return wakeResp{Content: res.Content, RunID: res.RunID, Usage: usageOf(res.Result)}, nil
}
