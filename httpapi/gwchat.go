package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"gatehouse/actors/gateway"
)

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

func usageOf(res llmResult) chatUsage {
	return chatUsage{PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens, TotalTokens: res.PromptTokens + res.CompletionTokens}
}

var chatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

// agentRef applies the resolution order: model prefix, header, "default".
func agentRef(model, header string) string {
	for _, p := range []string{"gateway:", "agent:"} {
		if ref, ok := strings.CutPrefix(model, p); ok && ref != "" {
			return ref
		}
	}
	if header != "" {
		return header
	}
	return "default"
}

// run is one prepared agent run.
type run struct {
	id       string
	agent    gateway.Agent
	call     llmCall
	req      llmRequest
	user     string
	endpoint string
}

// prepare resolves the agent and its provider and builds the messages.
func (s *GatewayServer) prepare(r *gwReq, ref, user, endpoint string, msgs []llmMessage) (*run, error) {
	a, p, err := s.svc.ResolveAgent(r.ctx, ref)
	if err != nil {
		return nil, resource(err, errGWAgentNotFound, nil)
	}
	if a.Status != gateway.AgentActive {
		return nil, errGWAgentDisabled
	}
	if !p.Enabled {
		return nil, errGWProvDisabled
	}
	key, err := s.svc.ProviderKey(p)
	if err != nil {
		return nil, err
	}
	all := make([]llmMessage, 0, len(msgs)+1)
	if a.SystemPrompt != "" {
		all = append(all, llmMessage{Role: "system", Content: a.SystemPrompt})
	}
	all = append(all, msgs...)
	id := strings.ReplaceAll(uuid.NewString(), "-", "")
	return &run{
		id: id, agent: a, call: s.llm.forProvider(p, key), user: user, endpoint: endpoint,
		req: llmRequest{Model: a.Model, Messages: all},
	}, nil
}

// execute calls the provider within the agent's time limit, records the
// run's trace and usage, and maps a timeout to AGENT_TIMEOUT. parent ends
// early when the client goes away.
func (s *GatewayServer) execute(parent context.Context, rn *run, onDelta func(string) error) (llmResult, error) {
	limit := time.Duration(rn.agent.TimeoutSeconds) * time.Second
	ctx, cancel := context.WithTimeout(parent, limit)
	defer cancel()
	start := time.Now()
	res, err := rn.call(ctx, rn.req, onDelta)
	dur := time.Since(start)
	status, msg := gateway.RunOK, ""
	switch {
	case err == nil:
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && parent.Err() == nil:
		status, msg = gateway.RunTimeout, "agent time limit exceeded"
		err = &agentTimeoutError{seconds: rn.agent.TimeoutSeconds}
	case parent.Err() != nil:
		status, msg = gateway.RunFailed, "client disconnected"
	default:
		status, msg = gateway.RunFailed, err.Error()
	}
	s.svc.RecordRun(gateway.Trace{
		ID: rn.id, AgentID: rn.agent.ID, UserID: rn.user, Endpoint: rn.endpoint, Status: status,
		StartedAt: start.UTC(), DurationMs: dur.Milliseconds(),
		Spans: []gateway.Span{{
			Name: "llm.call " + rn.req.Model, Kind: "llm", StartedAt: start.UTC(), DurationMs: dur.Milliseconds(),
			PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens, Status: status, Error: msg,
		}},
	})
	return res, err
}

func (s *GatewayServer) chatCompletions(r *gwReq) error {
	var req chatReq
	if err := decode(r, &req); err != nil {
		return err
	}
	if len(req.Messages) == 0 {
		return errGWInvalid("messages must hold at least one message")
	}
	msgs := make([]llmMessage, len(req.Messages))
	for i, m := range req.Messages {
		if !chatRoles[m.Role] {
			return errGWInvalid("messages[].role must be system, developer, user, assistant or tool")
		}
		msgs[i] = llmMessage{Role: m.Role, Content: string(m.Content)}
	}
	user := r.userID
	if user == "" {
		user = req.User
	}
	rn, err := s.prepare(r, agentRef(req.Model, r.agentID), user, "chat.completions", msgs)
	if err != nil {
		return err
	}
	model := req.Model
	if model == "" {
		model = "gateway:" + rn.agent.AgentKey
	}
	id, created := "chatcmpl-"+rn.id, time.Now().Unix()
	if !req.Stream {
		res, err := s.execute(context.Background(), rn, nil)
		if err != nil {
			return err
		}
		writeJSON(r.rc, fasthttp.StatusOK, chatResp{
			ID: id, Object: "chat.completion", Created: created, Model: model,
			Choices: []chatChoice{{Message: chatOutMsg{Role: "assistant", Content: res.Content}, FinishReason: res.FinishReason}},
			Usage:   usageOf(res),
		})
		return nil
	}
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	lang := r.lang
	chunk := func(d chatOutMsg, finish *string) chatChunk {
		return chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model,
			Choices: []chunkChoice{{Delta: d, FinishReason: finish}}}
	}
	s.stream(r, func(ctx context.Context, sw *sseWriter) {
		if sw.send("", chunk(chatOutMsg{Role: "assistant"}, nil)) != nil {
			return
		}
		res, err := s.pump(ctx, sw, rn, func(d string) error { return sw.send("", chunk(chatOutMsg{Content: d}, nil)) })
		if err != nil {
			if ctx.Err() == nil {
				_, body, _ := envelope(err, lang)
				_ = sw.send("", body)
				_ = sw.raw("data: [DONE]\n\n")
			}
			return
		}
		fr := res.FinishReason
		if sw.send("", chunk(chatOutMsg{}, &fr)) != nil {
			return
		}
		if includeUsage {
			u := usageOf(res)
			if sw.send("", chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, Choices: []chunkChoice{}, Usage: &u}) != nil {
				return
			}
		}
		_ = sw.raw("data: [DONE]\n\n")
	})
	return nil
}

// Wake.

type wakeReq struct {
	Message string `json:"message"`
}

type wakeResp struct {
	Content string    `json:"content"`
	RunID   string    `json:"run_id"`
	Usage   chatUsage `json:"usage"`
}

func (s *GatewayServer) wake(r *gwReq) error {
	var req wakeReq
	if err := decode(r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Message) == "" {
		return errGWInvalid("message must not be empty")
	}
	a, err := s.svc.GetAgent(r.ctx, r.userID, param(r, "id"))
	if err != nil {
		return resource(err, errGWAgentNotFound, nil)
	}
	rn, err := s.prepare(r, a.ID.String(), r.userID, "agents.wake", []llmMessage{{Role: "user", Content: req.Message}})
	if err != nil {
		return err
	}
	res, err := s.execute(context.Background(), rn, nil)
	if err != nil {
		return err
	}
	writeJSON(r.rc, fasthttp.StatusOK, wakeResp{Content: res.Content, RunID: rn.id, Usage: usageOf(res)})
	return nil
}
