package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// OpenAI is a stub of OpenAI's Chat Completions API
// (https://platform.openai.com/docs/api-reference/chat): POST
// /v1/chat/completions, whole or streamed (SSE chat.completion.chunk
// events, a usage chunk with empty choices when
// stream_options.include_usage, then `data: [DONE]`), and GET /v1/models.
// Made by NewAzure, it is Azure OpenAI's instead (see NewAzure). Point a
// client at Base().
//
// It checks every request: the credential (Authorization: Bearer; Azure:
// api-key and no Authorization), a model, known roles, tool calls typed
// "function" with string arguments, every tool message answering a
// tool_call id of the assistant message before it (and every such call
// answered), tool specs, stream_options only with stream. A violation
// fails the test and is answered 400.
type OpenAI struct {
	*httptest.Server
	Script
	// Models are the model ids GET /models lists.
	Models []string
	// AllowNoKey accepts requests without a credential (a local
	// OpenAI-compatible server); otherwise they are answered 401.
	AllowNoKey bool
	// Deployments, in Azure's deployments mode, are the deployments that
	// exist (nil: any); another is answered 404 DeploymentNotFound.
	Deployments []string

	t          testing.TB
	azure      bool
	apiVersion string
	done       chan struct{}
}

// NewOpenAI starts an OpenAI stub on loopback, closed by t.Cleanup.
func NewOpenAI(t testing.TB) *OpenAI {
	t.Helper()
	return startOpenAI(t, false, "")
}

// NewAzure starts an Azure OpenAI stub
// (https://learn.microsoft.com/azure/ai-services/openai/reference) on
// loopback, closed by t.Cleanup. With apiVersion "v1" it serves the v1
// API, POST /openai/v1/chat/completions (the deployment as the body's
// model) and GET /openai/v1/models; otherwise POST
// /openai/deployments/{deployment}/chat/completions and GET
// /openai/models, each requiring ?api-version=apiVersion. The key goes in
// the api-key header. Its streams begin, as Azure's do, with a chunk
// whose choices are empty (prompt_filter_results); errors have Azure's
// shape, {"error": {"code", "message"}}.
func NewAzure(t testing.TB, apiVersion string) *OpenAI {
	t.Helper()
	return startOpenAI(t, true, apiVersion)
}

func startOpenAI(t testing.TB, azure bool, apiVersion string) *OpenAI {
	s := &OpenAI{t: t, azure: azure, apiVersion: apiVersion, done: make(chan struct{}),
		Models: []string{"gpt-4o-mini", "gpt-4o"}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Server.Close)
	t.Cleanup(func() { close(s.done) }) // runs first: hung answers end
	return s
}

// Base is the api_base a client of this stub uses: {URL}/v1 for OpenAI,
// {URL} for Azure.
func (s *OpenAI) Base() string {
	if s.azure {
		return s.URL
	}
	return s.URL + "/v1"
}

// route is what a request asks for: a completion or the model list,
// and the deployment its path names (Azure).
func (s *OpenAI) route(r *http.Request) (chat, models bool, deployment string) {
	p := r.URL.Path
	if !s.azure {
		return p == "/v1/chat/completions", p == "/v1/models", ""
	}
	if s.apiVersion == "v1" {
		return p == "/openai/v1/chat/completions", p == "/openai/v1/models", ""
	}
	if rest, ok := strings.CutPrefix(p, "/openai/deployments/"); ok {
		d, ok := strings.CutSuffix(rest, "/chat/completions")
		if ok && d != "" && !strings.Contains(d, "/") {
			return true, false, d
		}
	}
	return false, p == "/openai/models", ""
}

func (s *OpenAI) serve(w http.ResponseWriter, r *http.Request) {
	chat, models, deployment := s.route(r)
	switch {
	case chat && r.Method != http.MethodPost, models && r.Method != http.MethodGet:
		Fail(s.t, "%s %s: wrong method", r.Method, r.URL.Path)
		s.fail(w, 405, "invalid_request_error", "method not allowed")
		return
	case !chat && !models:
		Fail(s.t, "%s %s: no such endpoint", r.Method, r.URL.Path)
		s.fail(w, 404, "invalid_request_error", "Unknown request URL: "+r.URL.Path)
		return
	}
	if s.azure && s.apiVersion != "v1" && r.URL.Query().Get("api-version") != s.apiVersion {
		Fail(s.t, "api-version = %q, want %q", r.URL.Query().Get("api-version"), s.apiVersion)
		s.fail(w, 404, "404", "Resource not found")
		return
	}
	key, ok := s.key(r)
	if !ok {
		s.fail(w, 401, "invalid_api_key", "no credential was given")
		return
	}
	if models {
		s.models(w, key)
		return
	}
	if deployment != "" && s.Deployments != nil && !slices.Contains(s.Deployments, deployment) {
		s.fail(w, 404, "DeploymentNotFound", "The API deployment for this resource does not exist.")
		return
	}
	s.chat(w, r, key)
}

// key is the request's credential as the API carries it; ok false when
// it carries none and one is required.
func (s *OpenAI) key(r *http.Request) (string, bool) {
	if s.azure {
		if r.Header.Get("Authorization") != "" {
			Fail(s.t, "Azure request with an Authorization header (the key goes in api-key)")
		}
		k := r.Header.Get("api-key")
		return k, k != ""
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", s.AllowNoKey
	}
	k, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || k == "" {
		Fail(s.t, "Authorization %q is not a Bearer credential", h)
		return "", false
	}
	return k, true
}

func (s *OpenAI) models(w http.ResponseWriter, key string) {
	if rep, ok := oaKeyReply(&s.Script, key); ok && rep.Status != 0 && rep.Status != 200 {
		s.status(w, rep)
		return
	}
	data := make([]map[string]any, 0, len(s.Models))
	for _, m := range s.Models {
		data = append(data, map[string]any{"id": m, "object": "model", "created": 1715367049, "owned_by": "system"})
	}
	oaWriteJSON(w, 200, map[string]any{"object": "list", "data": data})
}

func (s *OpenAI) chat(w http.ResponseWriter, r *http.Request, key string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		Fail(s.t, "Content-Type = %q, want application/json", ct)
	}
	req, problems := checkOpenAIRequest(body, s.azure && s.apiVersion != "v1")
	if len(problems) > 0 {
		for _, p := range problems {
			Fail(s.t, "%s", p)
		}
		s.fail(w, 400, "invalid_request_error", problems[0])
		return
	}
	rep := s.Next(Recorded{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body, Key: key}, req.lastUser())
	for k, v := range rep.Headers {
		w.Header().Set(k, v)
	}
	stream := req.Stream != nil && *req.Stream
	switch {
	case rep.Raw != "":
		ct := "application/json"
		if stream {
			ct = "text/event-stream"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(max(rep.Status, 200))
		_, _ = io.WriteString(w, rep.Raw)
	case rep.Status != 0 && rep.Status != 200:
		s.status(w, rep)
	case rep.Hang && !stream:
		s.hang(r)
	case stream:
		s.stream(w, r, req, rep)
	default:
		s.whole(w, req, rep)
	}
}

// hang waits until the client leaves or the test ends.
func (s *OpenAI) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.done:
	}
}

// status answers rep's error status in the API's error shape.
func (s *OpenAI) status(w http.ResponseWriter, rep Reply) {
	for k, v := range rep.Headers {
		w.Header().Set(k, v)
	}
	typ, msg := rep.ErrorType, rep.ErrorMessage
	if msg == "" {
		msg = http.StatusText(rep.Status)
	}
	if typ == "" {
		typ = openAIErrorType(rep.Status)
		if s.azure {
			typ = strconv.Itoa(rep.Status)
		}
	}
	s.fail(w, rep.Status, typ, msg)
}

// fail answers status with an error of type typ (Azure: code) in the
// API's shape.
func (s *OpenAI) fail(w http.ResponseWriter, status int, typ, msg string) {
	if s.azure {
		oaWriteJSON(w, status, map[string]any{"error": map[string]any{"code": typ, "message": msg}})
		return
	}
	oaWriteJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}

// openAIErrorType is the error type OpenAI answers a status with.
func openAIErrorType(status int) string {
	switch {
	case status == 401:
		return "invalid_request_error"
	case status == 429:
		return "rate_limit_exceeded"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// oaStubCallID is the id the stub gives call i of a reply without one.
func oaStubCallID(c Call, i int) string {
	if c.ID != "" {
		return c.ID
	}
	return fmt.Sprintf("call_stub%d", i)
}

// oaArgsOf is a call's arguments ("" : {}).
func oaArgsOf(c Call) string {
	if c.Args == "" {
		return "{}"
	}
	return c.Args
}

func (s *OpenAI) whole(w http.ResponseWriter, req *openAIRequest, rep Reply) {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if rep.Text != "" || len(rep.ToolCalls) == 0 {
		msg["content"] = rep.Text
	}
	finish := "stop"
	if len(rep.ToolCalls) > 0 {
		calls := make([]map[string]any, len(rep.ToolCalls))
		for i, c := range rep.ToolCalls {
			calls[i] = map[string]any{"id": oaStubCallID(c, i), "type": "function", "function": map[string]any{"name": c.Name, "arguments": oaArgsOf(c)}}
		}
		msg["tool_calls"], finish = calls, "tool_calls"
	}
	choice := map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}
	out := map[string]any{
		"id": "chatcmpl-stub", "object": "chat.completion", "created": 1700000000, "model": req.answerModel(),
		"system_fingerprint": "fp_stub", "choices": []any{choice}, "usage": openAIUsage(UsageOf(rep)),
	}
	if s.azure {
		choice["content_filter_results"] = azureFilterResults()
		out["prompt_filter_results"] = []any{map[string]any{"prompt_index": 0, "content_filter_results": azureFilterResults()}}
	}
	oaWriteJSON(w, 200, out)
}

func (s *OpenAI) stream(w http.ResponseWriter, r *http.Request, req *openAIRequest, rep Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	fl, _ := w.(http.Flusher)
	withUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	send := func(choices []any, extra map[string]any) {
		ch := map[string]any{"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 1700000000,
			"model": req.answerModel(), "system_fingerprint": "fp_stub", "choices": choices}
		if withUsage {
			ch["usage"] = nil
		}
		for k, v := range extra {
			ch[k] = v
		}
		b, _ := json.Marshal(ch)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	delta := func(d map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "logprobs": nil, "finish_reason": finish}}
	}
	if s.azure { // Azure's first chunk: the prompt's filter results, no choices
		send([]any{}, map[string]any{"id": "", "model": "", "object": "", "created": 0,
			"prompt_filter_results": []any{map[string]any{"prompt_index": 0, "content_filter_results": azureFilterResults()}}})
	}
	send(delta(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil), nil)
	for i, word := range Words(rep.Text) {
		if rep.StreamErrorAfter > 0 && i == rep.StreamErrorAfter {
			break
		}
		send(delta(map[string]any{"content": word}, nil), nil)
		if rep.Hang {
			s.hang(r)
			return
		}
	}
	if rep.StreamErrorAfter > 0 {
		typ := rep.ErrorType
		if typ == "" {
			typ = "server_error"
		}
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": rep.ErrorMessage, "type": typ, "param": nil, "code": nil}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		return
	}
	if rep.Hang { // no text: hang after the role chunk
		s.hang(r)
		return
	}
	finish := "stop"
	for i, c := range rep.ToolCalls {
		finish = "tool_calls"
		args := oaArgsOf(c)
		send(delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": oaStubCallID(c, i), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil), nil)
		for _, part := range []string{args[:len(args)/2], args[len(args)/2:]} {
			send(delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": part}}}}, nil), nil)
		}
	}
	send(delta(map[string]any{}, finish), nil)
	if withUsage {
		send([]any{}, map[string]any{"usage": openAIUsage(UsageOf(rep))})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// openAIUsage is u in the API's usage shape.
func openAIUsage(u Usage) map[string]any {
	return map[string]any{
		"prompt_tokens": u.Prompt, "completion_tokens": u.Completion, "total_tokens": u.Prompt + u.Completion,
		"prompt_tokens_details":     map[string]any{"cached_tokens": u.CacheRead, "audio_tokens": 0},
		"completion_tokens_details": map[string]any{"reasoning_tokens": u.Reasoning, "audio_tokens": 0},
	}
}

func azureFilterResults() map[string]any {
	safe := map[string]any{"filtered": false, "severity": "safe"}
	return map[string]any{"hate": safe, "self_harm": safe, "sexual": safe, "violence": safe}
}

// oaWriteJSON answers status with v as JSON.
func oaWriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// oaKeyReply is the reply OnKey set for key, if any, without recording a
// request or taking a queued reply.
func oaKeyReply(s *Script, key string) (Reply, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.byKey[key]
	return r, ok
}
