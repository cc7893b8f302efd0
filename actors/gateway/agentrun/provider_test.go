package agentrun

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/actors/gateway/agentrun/llm"
)

// poolStub is an OpenAI-compatible upstream that answers at once and
// counts the TCP connections it accepts. A streamed answer ends as real
// providers' do: the last event, `data: [DONE]`, is flushed, and the
// chunked terminator follows a moment later. With trail, it keeps
// sending past [DONE] until the client goes.
type poolStub struct {
	srv   *httptest.Server
	conns atomic.Int64
	trail bool
}

func newPoolStub(t *testing.T, trail bool) *poolStub {
	s := &poolStub{trail: trail}
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

func (s *poolStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if !bytes.Contains(b, []byte(`"stream":true`)) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hello\"}}]}\n\n")
	fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\" there\"},\"finish_reason\":\"stop\"}]}\n\n")
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

// client is an openai_compat client of s over hc, the runtime's pool.
func (s *poolStub) client(t *testing.T, hc *http.Client, key string) llm.Client {
	t.Helper()
	c, err := llm.New(llm.Config{Type: "openai_compat", APIBase: s.srv.URL + "/v1", Key: key, MaxAnswer: 1 << 20, HTTP: hc})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// calls runs n calls, conc at a time, and fails t on a wrong answer.
func (s *poolStub) calls(t *testing.T, c llm.Client, n, conc int, stream bool) {
	t.Helper()
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, conc)
	for range conc {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				var onDelta func(string) error
				if stream {
					onDelta = func(string) error { return nil }
				}
				res, err := c.Complete(context.Background(), llm.Request{Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}}, onDelta)
				if err == nil && res.Content != "hello there" {
					err = fmt.Errorf("answer %q", res.Content)
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

// TestUpstreamPoolReuse: in steady state the provider pool opens no new
// upstream connection, streamed or not, at 1 or 64 calls in flight (at
// most 5 per 1,000 calls): the idle pool holds the calls in flight, and a
// stream is read to its end after [DONE] so its connection is reused.
func TestUpstreamPoolReuse(t *testing.T) {
	const calls = 300
	for _, tc := range []struct {
		stream bool
		conc   int
	}{{false, 1}, {false, 64}, {true, 1}, {true, 64}} {
		t.Run(fmt.Sprintf("stream=%v,conc=%d", tc.stream, tc.conc), func(t *testing.T) {
			s := newPoolStub(t, false)
			hc := newHTTPClient()
			defer hc.CloseIdleConnections()
			c := s.client(t, hc, "sk-test")
			s.calls(t, c, 2*tc.conc, tc.conc, tc.stream) // warm-up: the pool fills
			before := s.conns.Load()
			s.calls(t, c, calls, tc.conc, tc.stream)
			n := s.conns.Load() - before
			t.Logf("%d new upstream connections for %d calls", n, calls)
			if n*1000 > 5*calls {
				t.Errorf("%d new upstream connections for %d calls (want at most 5 per 1,000)", n, calls)
			}
		})
	}
}

// TestUpstreamDrainBounded: a provider that keeps sending after [DONE]
// does not hold the turn (the drain stops after drainTime), and a call
// whose context ends mid-stream returns at once.
func TestUpstreamDrainBounded(t *testing.T) {
	s := newPoolStub(t, true)
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()
	c := s.client(t, hc, "")
	start := time.Now()
	res, err := c.Complete(context.Background(), llm.Request{Model: "m"}, func(string) error { return nil })
	if err != nil || res.Content != "hello there" {
		t.Fatalf("call = %+v, %v", res, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("call with a trailing stream took %v", d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	start = time.Now()
	_, _ = c.Complete(ctx, llm.Request{Model: "m"}, func(string) error { cancel(); return nil })
	if d := time.Since(start); d > time.Second {
		t.Fatalf("cancelled call took %v", d)
	}
}
