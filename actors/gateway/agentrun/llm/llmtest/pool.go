package llmtest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// PoolStub is an OpenAI-compatible upstream that answers every call at
// once with "hello there" and counts the TCP connections it accepts, for
// tests of connection reuse. A streamed answer ends as real providers'
// do: the last event, `data: [DONE]`, is flushed, and the chunked
// terminator follows a moment later. With trail, it keeps sending past
// [DONE] until the client goes.
type PoolStub struct {
	srv   *httptest.Server
	conns atomic.Int64
	trail bool
}

// NewPoolStub starts a PoolStub, closed when t ends.
func NewPoolStub(t testing.TB, trail bool) *PoolStub {
	s := &PoolStub{trail: trail}
	s.srv = httptest.NewUnstartedServer(s)
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

// Base is the stub's API base (.../v1).
func (s *PoolStub) Base() string { return s.srv.URL + "/v1" }

// Conns is how many connections the stub has accepted.
func (s *PoolStub) Conns() int64 { return s.conns.Load() }

// ServeHTTP answers a chat completion, streamed when the body asks.
func (s *PoolStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if !bytes.Contains(b, []byte(`"stream":true`)) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello\"}}]}\n\n")
	fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" there\"},\"finish_reason\":\"stop\"}]}\n\n")
	fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n")
	fl.Flush()
	if !s.trail {
		time.Sleep(time.Millisecond) // the terminator arrives after [DONE]
		return
	}
	for r.Context().Err() == nil {
		fmt.Fprint(w, ": keep-alive\n\n")
		fl.Flush()
		time.Sleep(5 * time.Millisecond)
	}
}

// Load runs call n times, conc at a time, and fails t on the first error
// (each call's error, or its answer's when the answer is not "hello
// there": call returns the answer's content).
func Load(t testing.TB, n, conc int, call func() (string, error)) {
	t.Helper()
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, conc)
	for range conc {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				content, err := call()
				if err == nil && content != "hello there" {
					err = fmt.Errorf("answer %q", content)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
