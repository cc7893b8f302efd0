package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// HalvesConfig is one run of the two-halves case (issue 35): while the
// agent gateway of a process takes a burst of large chat messages, the
// key service of the same process is probed on its /health.
type HalvesConfig struct {
	// MessageBytes is each chat message's content (the gateway's body
	// cap is 1 MiB by default, so 1,000,000 fits with the JSON around it).
	MessageBytes int
	// Senders post the messages concurrently, each on its connection.
	Senders int
	// Messages is how many the burst posts.
	Messages int
	// ProbeEvery is the pause between two /health probes (one at a time).
	ProbeEvery time.Duration
	// Quiet is how long /health is probed before the burst.
	Quiet time.Duration
	// Timeout bounds each request.
	Timeout time.Duration
}

// DefaultHalvesConfig is what `make bench` runs: 32 senders, 320 messages
// of 1 MB, /health probed every 5 ms. (With 4 senders the gateway is not
// the bottleneck and /health stays fast before and after issue 35.)
func DefaultHalvesConfig() HalvesConfig {
	return HalvesConfig{MessageBytes: 1_000_000, Senders: 32, Messages: 320, ProbeEvery: 5 * time.Millisecond, Quiet: 2 * time.Second, Timeout: 60 * time.Second}
}

// Validate reports the first invalid field, by name.
func (c HalvesConfig) Validate() error {
	switch {
	case c.MessageBytes < 16 || c.Senders < 1 || c.Messages < 1:
		return errors.New("bench: halves: message_bytes must be >= 16, senders and messages >= 1")
	case c.ProbeEvery < 0 || c.Quiet <= 0 || c.Timeout <= 0:
		return errors.New("bench: halves: probe_every must be >= 0, quiet and timeout > 0")
	}
	return nil
}

// Halves is one gatehouse's two-halves case.
type Halves struct {
	Name     string
	Baseline bool // built from AgentConfig.Vs: reported, not judged
	// Quiet and Loaded are /health's latencies before and during the
	// burst.
	Quiet, Loaded Histogram
	ProbeFailed   int
	// Sent is the messages answered 200; ChatFailed the others.
	Sent, ChatFailed int
	BurstTime        time.Duration
	FirstErr         error

	api, gateway, key string
	errMu             sync.Mutex
}

// halvesUser is the user whose agent takes the burst; its agent runs on
// an OpenAI-compatible stub (not echo: echo would answer the megabyte
// back), as the chat path's issue measured it.
const halvesUser = "burst"

// halvesStub is an OpenAI-compatible upstream on loopback that reads
// each request whole and answers at once, briefly.
type halvesStub struct {
	srv *http.Server
	ln  net.Listener
}

func startHalvesStub() (*halvesStub, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"Noted."},"finish_reason":"stop"}],"usage":{"prompt_tokens":250000,"completion_tokens":2}}`)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &halvesStub{srv: srv, ln: ln}, nil
}

func (s *halvesStub) base() string { return "http://" + s.ln.Addr().String() + "/v1" }

func (s *halvesStub) close() { _ = s.srv.Close() }

// halvesBody is a chat completion whose one user message is n bytes of
// words.
func halvesBody(n int) []byte {
	const words = "the quick brown fox jumps over the lazy dog while the release train leaves on time "
	text := strings.Repeat(words, n/len(words)+1)[:n]
	b, _ := json.Marshal(chatBody(halvesUser, text))
	return b
}

// Run probes h's /health alone for cfg.Quiet, then during a burst of
// cfg.Messages chat messages posted by cfg.Senders clients. Each run adds
// to h's histograms and counts.
func (h *Halves) Run(ctx context.Context, cfg HalvesConfig) {
	probe := &http.Client{Timeout: cfg.Timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
	defer probe.CloseIdleConnections()
	url := "http://" + h.api + "/health"
	probeUntil := func(hist *Histogram, done func() bool) {
		for !done() && ctx.Err() == nil {
			t0 := time.Now()
			resp, err := probe.Get(url)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("GET /health = %d", resp.StatusCode)
				}
			}
			if err != nil {
				h.ProbeFailed++
				h.fail(err)
			} else {
				hist.Record(time.Since(t0))
			}
			sleepCtx(ctx, cfg.ProbeEvery)
		}
	}
	probeUntil(&Histogram{}, afterN(10)) // warm the probe's connection
	quietEnd := time.Now().Add(cfg.Quiet)
	probeUntil(&h.Quiet, func() bool { return time.Now().After(quietEnd) })

	body := halvesBody(cfg.MessageBytes)
	var next, sent, failed atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for range cfg.Senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{Timeout: cfg.Timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
			defer hc.CloseIdleConnections()
			for next.Add(1) <= int64(cfg.Messages) && ctx.Err() == nil {
				if err := h.post(ctx, hc, body); err != nil {
					failed.Add(1)
					h.fail(err)
					continue
				}
				sent.Add(1)
			}
		}()
	}
	var burstDone atomic.Bool
	go func() { wg.Wait(); burstDone.Store(true) }()
	probeUntil(&h.Loaded, burstDone.Load)
	wg.Wait()
	h.BurstTime += time.Since(t0)
	h.Sent += int(sent.Load())
	h.ChatFailed += int(failed.Load())
}

func (h *Halves) fail(err error) {
	h.errMu.Lock()
	defer h.errMu.Unlock()
	if h.FirstErr == nil {
		h.FirstErr = err
	}
}

// post sends one chat completion and reads its answer.
func (h *Halves) post(ctx context.Context, hc *http.Client, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+h.gateway+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+h.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("chat = %d %.200s", resp.StatusCode, rb)
	}
	return nil
}

// afterN is a done func that is true from its n+1st call on.
func afterN(n int) func() bool {
	i := 0
	return func() bool { i++; return i > n }
}
