package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Ollama is a stub of Ollama's native API
// (https://github.com/ollama/ollama/blob/main/docs/api.md): POST
// /api/chat, whole ("stream": false) or streamed as NDJSON (one JSON
// object a line, the last with "done": true, done_reason and the token
// counts prompt_eval_count and eval_count), and GET /api/tags. Its URL is
// the api_base. Tool calls go out with their arguments as a JSON object
// and no id (unless the Reply's Call has one); a mid-stream error is a
// line {"error": "…"}, an error status answers {"error": "…"}.
//
// It checks every request: "stream" explicitly set (Ollama streams when
// it is absent), a model, known roles, assistant tool calls with
// arguments as objects, every tool message naming (tool_name) a call of
// the assistant message before it, tool specs. A violation fails the
// test and is answered 400. A credential is optional (Authorization:
// Bearer, an Ollama behind a proxy) and recorded when present.
type Ollama struct {
	*httptest.Server
	Script
	// Models are the model names GET /api/tags lists.
	Models []string

	t    testing.TB
	done chan struct{}
}

// NewOllama starts an Ollama stub on loopback, closed by t.Cleanup.
func NewOllama(t testing.TB) *Ollama {
	t.Helper()
	s := &Ollama{t: t, done: make(chan struct{}), Models: []string{"llama3.2:latest", "qwen3:8b"}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Server.Close)
	t.Cleanup(func() { close(s.done) }) // runs first: hung answers end
	return s
}

func (s *Ollama) serve(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case r.URL.Path == "/api/tags" && r.Method == http.MethodGet:
		s.tags(w, key)
	case r.URL.Path == "/api/chat" && r.Method == http.MethodPost:
		s.chat(w, r, key)
	default:
		Fail(s.t, "%s %s: no such endpoint", r.Method, r.URL.Path)
		oaWriteJSON(w, 404, map[string]any{"error": "404 page not found"})
	}
}

func (s *Ollama) tags(w http.ResponseWriter, key string) {
	if rep, ok := oaKeyReply(&s.Script, key); ok && rep.Status != 0 && rep.Status != 200 {
		s.status(w, rep)
		return
	}
	models := make([]map[string]any, 0, len(s.Models))
	for _, m := range s.Models {
		models = append(models, map[string]any{
			"name": m, "model": m, "modified_at": "2025-05-04T17:37:44.706015396-07:00", "size": 2019393189,
			"digest": "a80c4f17acd55265feec403c7aef86be0c25983ab279d83f3bcd3abbcb5b8b72",
			"details": map[string]any{"parent_model": "", "format": "gguf", "family": "llama", "families": []string{"llama"},
				"parameter_size": "3.2B", "quantization_level": "Q4_K_M"},
		})
	}
	oaWriteJSON(w, 200, map[string]any{"models": models})
}

func (s *Ollama) status(w http.ResponseWriter, rep Reply) {
	for k, v := range rep.Headers {
		w.Header().Set(k, v)
	}
	msg := rep.ErrorMessage
	if msg == "" {
		msg = http.StatusText(rep.Status)
	}
	oaWriteJSON(w, rep.Status, map[string]any{"error": msg})
}

func (s *Ollama) chat(w http.ResponseWriter, r *http.Request, key string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	req, problems := checkOllamaRequest(body)
	if len(problems) > 0 {
		for _, p := range problems {
			Fail(s.t, "%s", p)
		}
		oaWriteJSON(w, 400, map[string]any{"error": problems[0]})
		return
	}
	rep := s.Next(Recorded{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body, Key: key}, req.lastUser())
	for k, v := range rep.Headers {
		w.Header().Set(k, v)
	}
	switch {
	case rep.Raw != "":
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(max(rep.Status, 200))
		_, _ = io.WriteString(w, rep.Raw)
	case rep.Status != 0 && rep.Status != 200:
		s.status(w, rep)
	case rep.Hang && !req.Stream:
		s.hang(r)
	case req.Stream:
		s.stream(w, r, req, rep)
	default:
		oaWriteJSON(w, 200, ollamaFinal(req.Model, ollamaMessage(rep.Text, rep.Thinking, rep.ToolCalls), rep))
	}
}

func (s *Ollama) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.done:
	}
}

func (s *Ollama) stream(w http.ResponseWriter, r *http.Request, req *ollamaRequest, rep Reply) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(200)
	fl, _ := w.(http.Flusher)
	line := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "%s\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	chunk := func(msg map[string]any) map[string]any {
		return map[string]any{"model": req.Model, "created_at": "2025-01-01T00:00:00.000000Z", "message": msg, "done": false}
	}
	for _, th := range Words(rep.Thinking) {
		line(chunk(map[string]any{"role": "assistant", "content": "", "thinking": th}))
	}
	for i, word := range Words(rep.Text) {
		if rep.StreamErrorAfter > 0 && i == rep.StreamErrorAfter {
			break
		}
		line(chunk(map[string]any{"role": "assistant", "content": word}))
		if rep.Hang {
			s.hang(r)
			return
		}
	}
	if rep.StreamErrorAfter > 0 {
		line(map[string]any{"error": rep.ErrorMessage})
		return
	}
	if rep.Hang {
		s.hang(r)
		return
	}
	if len(rep.ToolCalls) > 0 {
		line(chunk(ollamaMessage("", "", rep.ToolCalls)))
	}
	line(ollamaFinal(req.Model, map[string]any{"role": "assistant", "content": ""}, rep))
}

// ollamaMessage is an answer's message: text, thinking, tool calls with
// their arguments as objects.
func ollamaMessage(text, thinking string, calls []Call) map[string]any {
	msg := map[string]any{"role": "assistant", "content": text}
	if thinking != "" {
		msg["thinking"] = thinking
	}
	if len(calls) > 0 {
		out := make([]map[string]any, len(calls))
		for i, c := range calls {
			fn := map[string]any{"name": c.Name, "arguments": json.RawMessage(oaArgsOf(c))}
			out[i] = map[string]any{"function": fn}
			if c.ID != "" {
				out[i]["id"] = c.ID
			}
		}
		msg["tool_calls"] = out
	}
	return msg
}

// ollamaFinal is the last (done) object of an answer.
func ollamaFinal(model string, msg map[string]any, rep Reply) map[string]any {
	u := UsageOf(rep)
	return map[string]any{
		"model": model, "created_at": "2025-01-01T00:00:01.000000Z", "message": msg,
		"done_reason": "stop", "done": true, "total_duration": 885095291, "load_duration": 3753500,
		"prompt_eval_count": u.Prompt, "prompt_eval_duration": 328493000, "eval_count": u.Completion, "eval_duration": 552222000,
	}
}
