package llmtest

// Anthropic is a stub of Anthropic's Messages API as
// https://docs.anthropic.com/en/api/messages, .../api/messages-streaming,
// .../api/errors and .../api/models-list document it.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// AnthropicVersion is the anthropic-version header the stub requires.
const AnthropicVersion = "2023-06-01"

// Anthropic is a stub Anthropic API on a loopback listener: POST
// /v1/messages (whole JSON or SSE, stream: true) and GET /v1/models. Every
// request, the model list's included, is recorded and takes its reply
// from the Script (a reply with Status answers the model list with that
// error too; any other lists Models). It checks each request as the API
// does — x-api-key (or Authorization: Bearer; Recorded.Key holds it,
// AnthropicRequest.KeyHeader says which), anthropic-version, model and
// max_tokens, thinking's budget below max_tokens, roles alternating from
// user, each tool_result answering a tool_use of the assistant turn just
// before at the start of its user turn, no unanswered tool_use, thinking
// blocks sent back with the signature the stub issued and their text
// unchanged (and first in the last assistant turn of a tool loop when
// thinking is on), tools' names and schemas, at most 4 cache_control
// breakpoints, no unknown fields — failing the test (Fail) and answering
// 400 invalid_request_error on a violation.
//
// Script.Reply's Thinking is answered only when the request turns thinking
// on, as the API does; its signature is "sig-" and a counter.
type Anthropic struct {
	*httptest.Server
	Script
	// Models is what GET /v1/models lists; NewAnthropic puts two there.
	// Set it before the first request.
	Models []AnthropicModel

	t       testing.TB
	mu      sync.Mutex
	decoded []AnthropicRequest
	sigs    map[string]string // issued signature → its thinking text
	n       int               // ids and signatures issued
}

// AnthropicModel is one model of the stub's list.
type AnthropicModel struct {
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
}

// AnthropicRequest is a POST /v1/messages the stub received, decoded.
type AnthropicRequest struct {
	// KeyHeader is the header that carried the key: "x-api-key" or
	// "authorization" (a Bearer token).
	KeyHeader string
	// Version is the anthropic-version header.
	Version   string
	Model     string
	MaxTokens int
	Stream    bool
	// Thinking is the request's thinking object (nil when absent).
	Thinking *AnthropicThinking
	System   []AnthropicBlock
	Messages []AnthropicMessage
	Tools    []AnthropicTool
	// CacheBreakpoints are the places that carry a cache_control, in
	// field order: "messages[3].content[0]", "system[0]",
	// "tools[2]", or "request" for the top-level one.
	CacheBreakpoints []string
}

// AnthropicThinking is a request's thinking configuration.
type AnthropicThinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

// AnthropicMessage is one message of a request; a string content reads
// as one text block.
type AnthropicMessage struct {
	Role    string           `json:"role"`
	Content []AnthropicBlock `json:"content"`
}

// UnmarshalJSON accepts content as a string or as blocks.
func (m *AnthropicMessage) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	m.Role = raw.Role
	var s string
	if json.Unmarshal(raw.Content, &s) == nil {
		m.Content = []AnthropicBlock{{Type: "text", Text: s}}
		return nil
	}
	return json.Unmarshal(raw.Content, &m.Content)
}

// AnthropicBlock is one content block of a request, of any type.
type AnthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	// Content is a tool_result's content: a string or text blocks.
	Content      json.RawMessage `json:"content,omitempty"`
	IsError      bool            `json:"is_error,omitempty"`
	Thinking     string          `json:"thinking,omitempty"`
	Signature    string          `json:"signature,omitempty"`
	Data         string          `json:"data,omitempty"`
	CacheControl *AnthropicCache `json:"cache_control,omitempty"`
}

// ResultText is a tool_result's content as text.
func (b AnthropicBlock) ResultText() string {
	var s string
	if json.Unmarshal(b.Content, &s) == nil {
		return s
	}
	var blocks []AnthropicBlock
	_ = json.Unmarshal(b.Content, &blocks)
	var out []string
	for _, c := range blocks {
		out = append(out, c.Text)
	}
	return strings.Join(out, "")
}

// AnthropicTool is one tool definition of a request.
type AnthropicTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *AnthropicCache `json:"cache_control,omitempty"`
}

// AnthropicCache is a cache_control object.
type AnthropicCache struct {
	Type string `json:"type"`
	TTL  string `json:"ttl,omitempty"`
}

// NewAnthropic starts a stub Anthropic API, closed when t ends.
func NewAnthropic(t testing.TB) *Anthropic {
	t.Helper()
	a := &Anthropic{t: t, sigs: map[string]string{}, Models: []AnthropicModel{
		{ID: "claude-sonnet-4-5-20250929", DisplayName: "Claude Sonnet 4.5"},
		{ID: "claude-haiku-4-5-20251001", DisplayName: "Claude Haiku 4.5"},
	}}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	return a
}

// Decoded returns the POST /v1/messages requests received so far,
// decoded (as far as they decode).
func (a *Anthropic) Decoded() []AnthropicRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]AnthropicRequest(nil), a.decoded...)
}

// Last is the last decoded POST /v1/messages request (zero if none).
func (a *Anthropic) Last() AnthropicRequest {
	d := a.Decoded()
	if len(d) == 0 {
		return AnthropicRequest{}
	}
	return d[len(d)-1]
}

func (a *Anthropic) next() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	return a.n
}

func (a *Anthropic) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	rec := Recorded{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	keyHeader := "x-api-key"
	rec.Key = r.Header.Get("x-api-key")
	if rec.Key == "" {
		if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			rec.Key, keyHeader = v, "authorization"
		}
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		a.messages(w, r, rec, keyHeader)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		a.models(w, r, rec)
	default:
		Fail(a.t, "anthropic: unexpected %s %s", r.Method, r.URL.Path)
		anthropicError(w, http.StatusNotFound, "not_found_error", "Not found", nil)
	}
}

// headers checks what every request carries; it answers and returns
// false when a header is missing.
func (a *Anthropic) headers(w http.ResponseWriter, r *http.Request, rec Recorded) bool {
	if rec.Key == "" {
		Fail(a.t, "anthropic: %s %s without x-api-key", r.Method, r.URL.Path)
		anthropicError(w, http.StatusUnauthorized, "authentication_error", "x-api-key header is required", nil)
		return false
	}
	if v := r.Header.Get("anthropic-version"); v != AnthropicVersion {
		Fail(a.t, "anthropic: anthropic-version %q, want %q", v, AnthropicVersion)
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required", nil)
		return false
	}
	return true
}

func (a *Anthropic) messages(w http.ResponseWriter, r *http.Request, rec Recorded, keyHeader string) {
	if !a.headers(w, r, rec) {
		a.Next(rec, "")
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		Fail(a.t, "anthropic: Content-Type %q", ct)
	}
	req, probs := a.decode(rec.Body)
	req.KeyHeader, req.Version = keyHeader, r.Header.Get("anthropic-version")
	a.mu.Lock()
	a.decoded = append(a.decoded, req)
	a.mu.Unlock()
	rep := a.Next(rec, anthropicLastUser(req))
	if len(probs) > 0 {
		for _, p := range probs {
			Fail(a.t, "anthropic: %s", p)
		}
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", probs[0], nil)
		return
	}
	a.answer(w, r, req, rep)
}

// anthropicLastUser is the text of the last user message (or its last tool
// result's), for the default reply.
func anthropicLastUser(req AnthropicRequest) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		var text, result []string
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				text = append(text, b.Text)
			case "tool_result":
				result = append(result, b.ResultText())
			}
		}
		if len(text) > 0 {
			return strings.Join(text, " ")
		}
		return strings.Join(result, " ")
	}
	return ""
}

func (a *Anthropic) answer(w http.ResponseWriter, r *http.Request, req AnthropicRequest, rep Reply) {
	for k, v := range rep.Headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("request-id", "req_stub"+strconv.Itoa(a.next()))
	status := rep.Status
	if status == 0 {
		status = http.StatusOK
	}
	switch {
	case rep.Raw != "":
		if req.Stream && status == http.StatusOK {
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, rep.Raw)
	case status != http.StatusOK:
		anthropicError(w, status, rep.ErrorType, rep.ErrorMessage, nil)
	case rep.Hang && !req.Stream:
		<-r.Context().Done()
	case req.Stream:
		a.stream(w, r, req, rep)
	default:
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(a.message(req, rep))
		_, _ = w.Write(b)
	}
}

// anthropicErrorTypes are the API's error types by status.
var anthropicErrorTypes = map[int]string{
	400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
	403: "permission_error", 404: "not_found_error", 413: "request_too_large",
	429: "rate_limit_error", 500: "api_error", 504: "timeout_error", 529: "overloaded_error",
}

// anthropicError answers the API's error shape.
func anthropicError(w http.ResponseWriter, status int, typ, msg string, h map[string]string) {
	if typ == "" {
		typ = anthropicErrorTypes[status]
		if typ == "" {
			typ = "api_error"
		}
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	for k, v := range h {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	_, _ = w.Write(b)
}

// anthropicUsage is u in the API's fields: input_tokens excludes the
// cache parts.
func anthropicUsage(u Usage) map[string]int64 {
	return map[string]int64{
		"input_tokens":                max(u.Prompt-u.CacheRead-u.CacheWrite, 0),
		"cache_creation_input_tokens": u.CacheWrite,
		"cache_read_input_tokens":     u.CacheRead,
		"output_tokens":               u.Completion,
	}
}

// anthropicBlocks are the answer's content blocks: thinking (when the
// request turns it on), text, tool uses.
func (a *Anthropic) anthropicBlocks(req AnthropicRequest, rep Reply) []map[string]any {
	var out []map[string]any
	if rep.Thinking != "" && req.Thinking != nil && req.Thinking.Type == "enabled" {
		sig := fmt.Sprintf("sig-%d", a.next())
		a.mu.Lock()
		a.sigs[sig] = rep.Thinking
		a.mu.Unlock()
		out = append(out, map[string]any{"type": "thinking", "thinking": rep.Thinking, "signature": sig})
	}
	if rep.Text != "" {
		out = append(out, map[string]any{"type": "text", "text": rep.Text})
	}
	for _, c := range rep.ToolCalls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("toolu_stub%d", a.next())
		}
		args := c.Args
		if args == "" {
			args = "{}"
		}
		if !json.Valid([]byte(args)) {
			Fail(a.t, "anthropic: scripted tool call %s has arguments that are not JSON: %q", c.Name, args)
			args = "{}"
		}
		out = append(out, map[string]any{"type": "tool_use", "id": id, "name": c.Name, "input": json.RawMessage(args)})
	}
	return out
}

func anthropicStop(rep Reply) string {
	if len(rep.ToolCalls) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

// message is a whole answer.
func (a *Anthropic) message(req AnthropicRequest, rep Reply) map[string]any {
	content := a.anthropicBlocks(req, rep)
	if content == nil {
		content = []map[string]any{}
	}
	return map[string]any{
		"id": fmt.Sprintf("msg_stub%d", a.next()), "type": "message", "role": "assistant",
		"model": req.Model, "content": content, "stop_reason": anthropicStop(rep),
		"stop_sequence": nil, "usage": anthropicUsage(UsageOf(rep)),
	}
}

// models answers GET /v1/models (limit and after_id honoured).
func (a *Anthropic) models(w http.ResponseWriter, r *http.Request, rec Recorded) {
	if !a.headers(w, r, rec) {
		a.Next(rec, "")
		return
	}
	rep := a.Next(rec, "")
	if rep.Status != 0 && rep.Status != http.StatusOK {
		anthropicError(w, rep.Status, rep.ErrorType, rep.ErrorMessage, rep.Headers)
		return
	}
	if rep.Raw != "" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, rep.Raw)
		return
	}
	list := a.Models
	if after := r.URL.Query().Get("after_id"); after != "" {
		for i, m := range list {
			if m.ID == after {
				list = list[i+1:]
				break
			}
		}
	}
	limit := 20
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			Fail(a.t, "anthropic: models limit %q", v)
		} else {
			limit = n
		}
	}
	more := len(list) > limit
	if more {
		list = list[:limit]
	}
	data := []map[string]any{}
	for _, m := range list {
		data = append(data, map[string]any{"type": "model", "id": m.ID, "display_name": m.DisplayName, "created_at": "2025-09-29T00:00:00Z"})
	}
	page := map[string]any{"data": data, "has_more": more, "first_id": nil, "last_id": nil}
	if len(list) > 0 {
		page["first_id"], page["last_id"] = list[0].ID, list[len(list)-1].ID
	}
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(page)
	_, _ = w.Write(b)
}
