package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// chatStub is an upstream that speaks enough of the OpenAI API for the
// official client: POST /v1/chat/completions (plain and streamed as
// server-sent events) and GET /v1/models. A streamed completion sends its
// first chunk, then waits until the test calls release (or 10 s), then
// sends the rest: so a test can check the first chunk reached the client
// before the upstream finished.
type chatStub struct {
	*httptest.Server
	releaseOnce sync.Once
	released    chan struct{}
	finishOnce  sync.Once
	finished    chan struct{} // closed when a streamed completion has ended

	mu   sync.Mutex
	seen []http.Header // headers of every request received
}

func newChatStub(tb testing.TB) *chatStub {
	tb.Helper()
	s := &chatStub{released: make(chan struct{}), finished: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.completions)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		s.record(r)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"stub-model","object":"model","created":1700000000,"owned_by":"gatehouse"}]}`)
	})
	s.Server = httptest.NewServer(mux)
	tb.Cleanup(func() {
		s.release()
		s.Close()
	})
	return s
}

func (s *chatStub) release() { s.releaseOnce.Do(func() { close(s.released) }) }

func (s *chatStub) record(r *http.Request) {
	s.mu.Lock()
	s.seen = append(s.seen, r.Header.Clone())
	s.mu.Unlock()
}

// headers returns the headers of every request the stub received.
func (s *chatStub) headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.seen...)
}

func (s *chatStub) completions(w http.ResponseWriter, r *http.Request) {
	s.record(r)
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`)
		return
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":%q,`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"echo: %s"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`, req.Model, req.Messages[0].Content)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	chunk := func(delta, finish string) {
		fmt.Fprintf(w, `data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1700000000,"model":%q,`+
			`"choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`+"\n\n", req.Model, delta, finish)
		w.(http.Flusher).Flush()
	}
	chunk(`{"role":"assistant","content":"one"}`, "null")
	select {
	case <-s.released:
	case <-r.Context().Done():
		return
	case <-time.After(10 * time.Second):
	}
	chunk(`{"content":" two"}`, "null")
	chunk(`{"content":" three"}`, "null")
	chunk(`{}`, `"stop"`)
	fmt.Fprint(w, "data: [DONE]\n\n")
	w.(http.Flusher).Flush()
	s.finishOnce.Do(func() { close(s.finished) })
}
