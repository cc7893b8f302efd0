package llmtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Gemini is a stub of Google's Gemini API (v1beta REST,
// https://ai.google.dev/api): POST /v1beta/models/{model}:generateContent
// answers one JSON GenerateContentResponse, POST
// /v1beta/models/{model}:streamGenerateContent?alt=sse answers SSE events
// (`data: {GenerateContentResponse}` + "\r\n\r\n", one per word, usage
// complete on the last), GET /v1beta/models lists GeminiModels (pageSize,
// pageToken). Errors come in Google's shape {"error": {"code", "message",
// "status", "details"}}; a reply with a Retry-After header also carries a
// google.rpc.RetryInfo detail with that retryDelay, and ErrorType
// "API_KEY_INVALID" answers the API's refusal of a bad key (400
// INVALID_ARGUMENT with an ErrorInfo of that reason).
//
// Every request answers from the Script (the model list too: a reply
// with a Status fails it, any other lists the models). The key is read
// from x-goog-api-key, or from ?key= as the API also accepts (Recorded.Key
// either way); a request with neither fails the test and gets 403.
//
// It checks what the API checks: known top-level fields only; contents
// not empty, roles user/model only (no "system": that is
// systemInstruction), starting with user and alternating; every part
// holding exactly one datum, text non-empty; functionCall parts only in
// model turns, with a name and an object args; functionResponse parts only
// in the user turn right after a model turn with calls, one per call, each
// naming one of its calls; the first call of each model turn since the
// last plain user turn carrying a thoughtSignature this stub issued for
// that function (it signs each answer's first call, as Gemini 3 does) or
// the documented dummy "skip_thought_signature_validator"; tools as
// [{functionDeclarations: [{name, description, parameters}]}] with
// parameters in the API's Schema dialect (upper-case types, no JSON
// Schema-only keywords such as $schema or additionalProperties, an OBJECT
// at the top, no empty properties, required among properties);
// generationConfig's
// maxOutputTokens and thinkingConfig. A violation calls Fail and answers
// 400 INVALID_ARGUMENT.
//
// Thought parts (thought: true, Reply.Thinking) are sent only when the
// request asks for them (thinkingConfig.includeThoughts), as the API does.
type Gemini struct {
	*httptest.Server
	Script
	// MaxPageSize, when > 0, caps the model list's pageSize (to make a
	// client page through it).
	MaxPageSize int

	t    testing.TB
	mu   sync.Mutex
	sigs map[string]string // issued thoughtSignature → function name
	n    int
}

// GeminiModels are the models the stub lists: two that generate content,
// one embedding model (which a chat client should leave out).
var GeminiModels = []GeminiModel{
	{Name: "models/gemini-2.5-flash", DisplayName: "Gemini 2.5 Flash", Methods: []string{"generateContent", "countTokens", "createCachedContent"}},
	{Name: "models/gemini-2.5-pro", DisplayName: "Gemini 2.5 Pro", Methods: []string{"generateContent", "countTokens", "createCachedContent"}},
	{Name: "models/text-embedding-004", DisplayName: "Text Embedding 004", Methods: []string{"embedContent"}},
}

// GeminiModel is one entry of the stub's model list.
type GeminiModel struct {
	Name        string   `json:"name"`
	DisplayName string   `json:"displayName"`
	Methods     []string `json:"supportedGenerationMethods"`
}

// GeminiDummySignature is the thoughtSignature the API documents for
// function calls it did not produce.
const GeminiDummySignature = "skip_thought_signature_validator"

// NewGemini starts a Gemini stub on loopback, closed by t.Cleanup.
func NewGemini(t testing.TB) *Gemini {
	t.Helper()
	g := &Gemini{t: t, sigs: map[string]string{}}
	g.Server = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.Close)
	return g
}

func (g *Gemini) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	rec := Recorded{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	rec.Key = r.Header.Get("x-goog-api-key")
	if rec.Key == "" {
		rec.Key = r.URL.Query().Get("key")
	}
	if rec.Key == "" {
		Fail(g.t, "gemini: %s %s without x-goog-api-key", r.Method, r.URL.Path)
		gemWriteError(w, 403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.", nil)
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == "/v1beta/models" {
		g.models(w, r, rec)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
	model, method, ok2 := strings.Cut(rest, ":")
	if r.Method != http.MethodPost || !ok || !ok2 || model == "" || (method != "generateContent" && method != "streamGenerateContent") {
		Fail(g.t, "gemini: unexpected %s %s", r.Method, r.URL.Path)
		gemWriteError(w, 404, "NOT_FOUND", "Requested entity was not found.", nil)
		return
	}
	stream := method == "streamGenerateContent"
	if stream && r.URL.Query().Get("alt") != "sse" {
		Fail(g.t, "gemini: streamGenerateContent without alt=sse (the API would answer a JSON array)")
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		Fail(g.t, "gemini: Content-Type %q, want application/json", ct)
	}
	req, problem := g.check(body)
	if problem != "" {
		Fail(g.t, "gemini: %s", problem)
		g.Next(rec, "")
		gemWriteError(w, 400, "INVALID_ARGUMENT", problem, nil)
		return
	}
	reply := g.Next(rec, req.lastUser())
	g.answer(w, r, reply, model, stream, req.includeThoughts())
}

func (g *Gemini) models(w http.ResponseWriter, r *http.Request, rec Recorded) {
	reply := g.Next(rec, "")
	if reply.Status != 0 && reply.Status != 200 {
		gemWriteReplyError(w, reply)
		return
	}
	size := 50
	if s := r.URL.Query().Get("pageSize"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			Fail(g.t, "gemini: pageSize %q", s)
			gemWriteError(w, 400, "INVALID_ARGUMENT", "Invalid value for pageSize", nil)
			return
		}
		if n > 0 {
			size = min(n, 1000)
		}
	}
	if g.MaxPageSize > 0 {
		size = min(size, g.MaxPageSize)
	}
	start := 0
	if tok := r.URL.Query().Get("pageToken"); tok != "" {
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 || n > len(GeminiModels) {
			Fail(g.t, "gemini: pageToken %q was never issued", tok)
			gemWriteError(w, 400, "INVALID_ARGUMENT", "Invalid page token", nil)
			return
		}
		start = n
	}
	end := min(start+size, len(GeminiModels))
	page := map[string]any{"models": GeminiModels[start:end]}
	if end < len(GeminiModels) {
		page["nextPageToken"] = strconv.Itoa(end)
	}
	gemWriteJSON(w, 200, page)
}

// answer writes reply as the API would.
func (g *Gemini) answer(w http.ResponseWriter, r *http.Request, reply Reply, model string, stream, thoughts bool) {
	for k, v := range reply.Headers {
		w.Header().Set(k, v)
	}
	switch {
	case reply.Status != 0 && reply.Status != 200 && reply.Raw == "":
		gemWriteReplyError(w, reply)
		return
	case reply.Raw != "":
		ct := "application/json; charset=UTF-8"
		if stream {
			ct = "text/event-stream"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(max(reply.Status, 200))
		_, _ = io.WriteString(w, reply.Raw)
		return
	case reply.Hang && !stream:
		<-r.Context().Done()
		return
	}
	if stream {
		g.stream(w, r, reply, model, thoughts)
		return
	}
	var parts []map[string]any
	if thoughts && reply.Thinking != "" {
		parts = append(parts, map[string]any{"text": reply.Thinking, "thought": true})
	}
	if reply.Text != "" {
		parts = append(parts, map[string]any{"text": reply.Text})
	}
	parts = append(parts, g.callParts(reply)...)
	gemWriteJSON(w, 200, gemChunk(parts, "STOP", gemUsage(reply, true), model))
}

func (g *Gemini) stream(w http.ResponseWriter, r *http.Request, reply Reply, model string, thoughts bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		_, _ = fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	partial := gemUsage(reply, false)
	if thoughts && reply.Thinking != "" {
		send(gemChunk([]map[string]any{{"text": reply.Thinking, "thought": true}}, "", partial, model))
	}
	words := Words(reply.Text)
	calls := g.callParts(reply)
	if reply.Hang {
		first := ""
		if len(words) > 0 {
			first = words[0]
		}
		send(gemChunk([]map[string]any{{"text": first}}, "", partial, model))
		<-r.Context().Done()
		return
	}
	for i, word := range words {
		if reply.StreamErrorAfter > 0 && i == reply.StreamErrorAfter {
			send(map[string]any{"error": gemErrorBody(500, reply.ErrorType, reply.ErrorMessage, nil)})
			return
		}
		if i == len(words)-1 && len(calls) == 0 && reply.StreamErrorAfter == 0 {
			send(gemChunk([]map[string]any{{"text": word}}, "STOP", gemUsage(reply, true), model))
			return
		}
		send(gemChunk([]map[string]any{{"text": word}}, "", partial, model))
	}
	if reply.StreamErrorAfter > 0 && reply.StreamErrorAfter >= len(words) {
		send(map[string]any{"error": gemErrorBody(500, reply.ErrorType, reply.ErrorMessage, nil)})
		return
	}
	if len(calls) == 0 {
		calls = []map[string]any{{"text": ""}}
	}
	send(gemChunk(calls, "STOP", gemUsage(reply, true), model))
}

// callParts are reply's tool calls as functionCall parts, the first
// signed (Gemini 3 signs the first call of a step).
func (g *Gemini) callParts(reply Reply) []map[string]any {
	var parts []map[string]any
	for i, c := range reply.ToolCalls {
		args := json.RawMessage(c.Args)
		if c.Args == "" {
			args = json.RawMessage("{}")
		}
		p := map[string]any{"functionCall": map[string]any{"name": c.Name, "args": args}}
		if i == 0 {
			g.mu.Lock()
			g.n++
			sig := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "sig-%d", g.n))
			g.sigs[sig] = c.Name
			g.mu.Unlock()
			p["thoughtSignature"] = sig
		}
		parts = append(parts, p)
	}
	return parts
}

func gemChunk(parts []map[string]any, finish string, usage map[string]any, model string) map[string]any {
	cand := map[string]any{"content": map[string]any{"parts": parts, "role": "model"}, "index": 0}
	if finish != "" {
		cand["finishReason"] = finish
	}
	return map[string]any{"candidates": []any{cand}, "usageMetadata": usage, "modelVersion": model, "responseId": "stub-response"}
}

// gemUsage is reply's usage as usageMetadata; partial (an intermediate
// chunk) carries the prompt count only, as the API's do.
func gemUsage(reply Reply, final bool) map[string]any {
	u := UsageOf(reply)
	if !final {
		return map[string]any{"promptTokenCount": u.Prompt, "totalTokenCount": u.Prompt}
	}
	m := map[string]any{
		"promptTokenCount":     u.Prompt,
		"candidatesTokenCount": u.Completion - u.Reasoning,
		"totalTokenCount":      u.Prompt + u.Completion,
	}
	if u.CacheRead > 0 {
		m["cachedContentTokenCount"] = u.CacheRead
	}
	if u.Reasoning > 0 {
		m["thoughtsTokenCount"] = u.Reasoning
	}
	return m
}

func gemWriteReplyError(w http.ResponseWriter, reply Reply) {
	for k, v := range reply.Headers {
		w.Header().Set(k, v)
	}
	var details []any
	if s := reply.Headers["Retry-After"]; s != "" {
		details = append(details, map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": s + "s"})
	}
	typ := reply.ErrorType
	if typ == "API_KEY_INVALID" {
		typ = "INVALID_ARGUMENT"
		details = append(details, map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"})
	}
	gemWriteError(w, reply.Status, typ, reply.ErrorMessage, details)
}

func gemWriteError(w http.ResponseWriter, code int, status, msg string, details []any) {
	gemWriteJSON(w, code, map[string]any{"error": gemErrorBody(code, status, msg, details)})
}

func gemErrorBody(code int, status, msg string, details []any) map[string]any {
	if status == "" {
		status = gemStatusName(code)
	}
	if msg == "" {
		msg = "stub error " + status
	}
	e := map[string]any{"code": code, "message": msg, "status": status}
	if len(details) > 0 {
		e["details"] = details
	}
	return e
}

// gemStatusName is the google.rpc.Code name the API pairs with an HTTP
// status.
func gemStatusName(code int) string {
	switch code {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 500:
		return "INTERNAL"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	return "UNKNOWN"
}

func gemWriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// gemFuncName is the API's rule for a function's name.
var gemFuncName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$`)
