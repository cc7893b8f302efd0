package llmtest

import (
	"encoding/json"
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
