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
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// CaseChat is the chat path's throughput CPU (issue 35): gatehouse's
// POST /v1/chat/completions on an agent whose provider is an instant
// OpenAI-compatible stub, beside a bare forwarder and, with Vs, another
// build.
const CaseChat = "chat"

// ChatConfig is one run of the chat case.
type ChatConfig struct {
	Conns    []int // connection counts measured, 1 first (its p50 is compared with the stub's)
	Warmup   time.Duration
	Duration time.Duration
	Rounds   int
	Dir      string
	Vs       string   // git revision measured beside the working tree, "" for none
	Self     []string // argv of this program, to start the forwarder ("chatfwd" subcommand)
	Log      io.Writer
}

// chatUser owns the chat case's agent and key.
const chatUser = "chat"

// chatStub is an OpenAI-compatible upstream on loopback answering at
// once, streamed (chunked server-sent events, flushed event by event, as
// OpenAI does) or not, that counts the connections it accepts.
type chatStub struct {
	srv      *http.Server
	ln       net.Listener
	accepted atomic.Int64
	sawTools atomic.Bool // a request carried tool schemas (the agent's built-in tools)
}

// The stub's answers: a few words, and usage.
const (
	chatAnswer = `{"id":"chatcmpl-bench","object":"chat.completion","created":1,"model":"stub-1","choices":[{"index":0,"message":{"role":"assistant","content":"Noted, thank you."},"finish_reason":"stop"}],"usage":{"prompt_tokens":40,"completion_tokens":4,"total_tokens":44}}`
	chunkHead  = `{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"stub-1","choices":[{"index":0,"delta":`
)

// chatEvents are the stub's streamed answer, one SSE event a write.
var chatEvents = []string{
	"data: " + chunkHead + `{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n",
	"data: " + chunkHead + `{"content":"Noted, "},"finish_reason":null}]}` + "\n\n",
	"data: " + chunkHead + `{"content":"thank you."},"finish_reason":null}]}` + "\n\n",
	"data: " + chunkHead + `{},"finish_reason":"stop"}],"usage":{"prompt_tokens":40,"completion_tokens":4,"total_tokens":44}}` + "\n\n",
	"data: [DONE]\n\n",
}

func startChatStub() (*chatStub, error) {
	ln, err := listenLoopback()
	if err != nil {
		return nil, fmt.Errorf("chat stub: %w", err)
	}
	s := &chatStub{ln: ln}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.accepted.Add(1)
			}
		}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *chatStub) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Stream bool `json:"stream"`
	}
	b, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(b, &req)
	if !s.sawTools.Load() && bytes.Contains(b, []byte(`"tools"`)) {
		s.sawTools.Store(true)
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, chatAnswer)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	f, _ := w.(http.Flusher)
	for _, ev := range chatEvents {
		_, _ = io.WriteString(w, ev)
		if f != nil {
			f.Flush()
		}
	}
}

func (s *chatStub) addr() string { return s.ln.Addr().String() }

func (s *chatStub) close() { _ = s.srv.Close() }

// ChatForwarder returns the chat case's floor: a handler that decodes
// each request's JSON body, encodes it again, sends it to upstream
// (host:port) over one pooled client, and copies the answer back, event
// by event when it is streamed. No auth, no agent, no trace.
func ChatForwarder(upstream string) http.Handler {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, DisableCompression: true, IdleConnTimeout: time.Minute}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, "bad json: "+err.Error(), http.StatusBadRequest)
			return
		}
		b, err := json.Marshal(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), "POST", "http://"+upstream+r.URL.Path, bytes.NewReader(b))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer sk-stub-unused-1234")
		resp, err := hc.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		f, _ := w.(http.Flusher)
		buf := make([]byte, 4096)
		for { // to the end of the body, so that the connection goes back to the pool
			n, err := resp.Body.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
				if f != nil {
					f.Flush()
				}
			}
			if err != nil {
				return
			}
		}
	})
}

// serveChatForwarder serves ChatForwarder(upstream) on ln.
func serveChatForwarder(ln net.Listener, upstream string) error {
	srv := &http.Server{Handler: ChatForwarder(upstream), ReadHeaderTimeout: 10 * time.Second}
	return srv.Serve(ln)
}

// chatRequest is the raw request of the chat case: one user message to
// the agent (ignored by the forwarder and the stub), streamed or not.
func chatRequest(key string, stream bool) []byte {
	body := map[string]any{"model": "agent:" + chatUser, "messages": []map[string]string{{"role": "user", "content": "Please note that the quarterly report is due on Friday."}}}
	if stream {
		body["stream"] = true
	}
	b, _ := json.Marshal(body)
	return fmt.Appendf(nil, "POST /v1/chat/completions HTTP/1.1\r\nHost: bench.local\r\nUser-Agent: gatehouse-bench\r\n"+
		"Authorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", key, len(b), b)
}

// ChatTarget is one server of the chat case.
type ChatTarget struct {
	Name     string
	Kind     string // "stub", "forwarder", "gatehouse"
	Baseline bool   // the -vs build
	addr     string
	key      string
	proc     *Proc // nil for the in-process stub
	// Cells by streamed × conns.
	Cells map[chatCell]*ChatCell
}

type chatCell struct {
	Stream bool
	Conns  int
}

// ChatCell is one (target, streamed, conns) over the rounds.
type ChatCell struct {
	Rounds []ChatRound
	Err    error
}

// ChatRound is one measured window.
type ChatRound struct {
	Requests, Errors int64
	Elapsed          time.Duration
	CPU              time.Duration // the target process's user+system time
	NewConns         int64         // connections the stub accepted
	P50              time.Duration
}

// best returns the cell's cheapest CPU per request, best req/s, most
// new connections per 1,000 calls and median p50 over its rounds.
func (c *ChatCell) best() (cpu time.Duration, rps, perK float64, p50 time.Duration) {
	var p50s []time.Duration
	for _, r := range c.Rounds {
		if r.Requests == 0 {
			continue
		}
		if v := r.CPU / time.Duration(r.Requests); cpu == 0 || v < cpu {
			cpu = v
		}
		rps = max(rps, float64(r.Requests)/r.Elapsed.Seconds())
		perK = max(perK, float64(r.NewConns)*1000/float64(r.Requests))
		p50s = append(p50s, r.P50)
	}
	if len(p50s) > 0 {
		slices.Sort(p50s)
		p50 = p50s[len(p50s)/2]
	}
	return cpu, rps, perK, p50
}

// ChatSuite runs the chat case.
type ChatSuite struct {
	cfg        ChatConfig
	stub       *chatStub
	loadBefore string // /proc/loadavg's first three fields when Run began
	sawTools   bool   // the stub's sawTools, kept when it stops
	procs      []*Proc
	Targets    []*ChatTarget
}

// StartChat starts the stub, the forwarder and the gatehouses (built from
// the working tree and, with Vs, from that revision), and provisions on
// each gatehouse the stub provider, the agent and its user's key.
func StartChat(ctx context.Context, cfg ChatConfig) (_ *ChatSuite, err error) {
	if len(cfg.Conns) == 0 || cfg.Rounds < 1 || cfg.Duration <= 0 || cfg.Dir == "" || len(cfg.Self) == 0 {
		return nil, errors.New("bench: chat needs conns, rounds, duration, dir and self")
	}
	s := &ChatSuite{cfg: cfg}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if s.stub, err = startChatStub(); err != nil {
		return nil, err
	}
	s.Targets = append(s.Targets, &ChatTarget{Name: "stub direct", Kind: "stub", addr: s.stub.addr()})
	fwd, faddr, err := StartProc(cfg.Dir, "chatfwd", append(slices.Clone(cfg.Self), "chatfwd", "-upstream", s.stub.addr()), nil, 30*time.Second, listeningLine)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, fwd)
	s.Targets = append(s.Targets, &ChatTarget{Name: "bare forwarder", Kind: "forwarder", addr: faddr, proc: fwd})
	builds := [][2]string{{"gatehouse", ""}}
	if cfg.Vs != "" {
		builds = append(builds, [2]string{"gatehouse@" + cfg.Vs, cfg.Vs})
	}
	for _, b := range builds {
		dir := filepath.Join(cfg.Dir, "chat-"+strings.ReplaceAll(b[0], "@", "-"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		s.logf("building and starting %s (chat)", b[0])
		var bin string
		if b[1] == "" {
			bin, err = BuildGatehouse(dir)
		} else {
			bin, err = BuildGatehouseAt(b[1], dir)
		}
		if err != nil {
			return nil, err
		}
		p, a, err := startGatewayAddrs(bin, dir)
		if err != nil {
			return nil, err
		}
		s.procs = append(s.procs, p)
		key, err := provisionStubAgent(ctx, a.gateway, "bench-chat-stub", "http://"+s.stub.addr()+"/v1", chatUser)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b[0], err)
		}
		s.Targets = append(s.Targets, &ChatTarget{Name: b[0], Kind: "gatehouse", Baseline: b[1] != "", addr: a.gateway, key: key, proc: p})
	}
	for _, t := range s.Targets {
		t.Cells = map[chatCell]*ChatCell{}
	}
	return s, nil
}

// listeningLine matches the "listening ADDR" line of the suite's own
// servers.
func listeningLine(line string) (string, bool) {
	a, ok := strings.CutPrefix(line, "listening ")
	return a, ok
}

// Run measures every cell in Rounds rounds, the targets interleaved
// inside each (conns, streamed) so that a noisy moment hits them alike.
// The stub direct is measured at one connection only (its p50 is the
// reference of the latency added). A failed cell is recorded and the
// suite goes on.
func (s *ChatSuite) Run(ctx context.Context) error {
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		s.loadBefore = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	for round := range s.cfg.Rounds {
		for _, conns := range s.cfg.Conns {
			for _, stream := range []bool{false, true} {
				for _, t := range s.Targets {
					if t.Kind == "stub" && conns != 1 {
						continue
					}
					if ctx.Err() != nil {
						return ctx.Err()
					}
					cell := t.Cells[chatCell{stream, conns}]
					if cell == nil {
						cell = &ChatCell{}
						t.Cells[chatCell{stream, conns}] = cell
					}
					r, err := s.measure(ctx, t, stream, conns)
					if err != nil {
						cell.Err = err
						s.logf("chat round %d %-24s stream=%-5v conns=%-3d failed: %v", round+1, t.Name, stream, conns, err)
						continue
					}
					cell.Rounds = append(cell.Rounds, r)
					s.logf("chat round %d %-24s stream=%-5v conns=%-3d %8.0f req/s  cpu/req %s  new upstream conns %d  p50 %v  errors %d",
						round+1, t.Name, stream, conns, float64(r.Requests)/r.Elapsed.Seconds(), cpuPer(r.CPU, r.Requests), r.NewConns, r.P50, r.Errors)
				}
			}
		}
	}
	return ctx.Err()
}

func cpuPer(cpu time.Duration, n int64) string {
	if n == 0 || cpu == 0 {
		return "-"
	}
	return cpuDur(cpu / time.Duration(n))
}

// measure loads t once with conns connections.
func (s *ChatSuite) measure(ctx context.Context, t *ChatTarget, stream bool, conns int) (ChatRound, error) {
	var cpu0, cpu1 time.Duration
	var acc0, acc1 int64
	res, err := Run(ctx, Load{
		Addr: t.addr, Requests: [][]byte{chatRequest(t.key, stream)}, Conns: conns, Warmup: s.cfg.Warmup, Duration: s.cfg.Duration, Status: 200,
		OnWindow: func(start bool) {
			var c time.Duration
			if t.proc != nil {
				c = t.proc.CPU()
			}
			if start {
				cpu0, acc0 = c, s.stub.accepted.Load()
			} else {
				cpu1, acc1 = c, s.stub.accepted.Load()
			}
		},
	})
	if err != nil {
		return ChatRound{}, err
	}
	if res.Errors > 0 && res.Requests == 0 {
		return ChatRound{}, fmt.Errorf("no answer: %v", res.FirstErr)
	}
	return ChatRound{Requests: res.Requests, Errors: res.Errors, Elapsed: res.Elapsed, CPU: cpu1 - cpu0,
		NewConns: acc1 - acc0, P50: res.Latency.Quantile(0.5)}, nil
}

// Stop stops the processes, the last started first, and the stub.
func (s *ChatSuite) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].Stop()
	}
	s.procs = nil
	if s.stub != nil {
		s.sawTools = s.stub.sawTools.Load()
		s.stub.close()
		s.stub = nil
	}
}

func (s *ChatSuite) logf(format string, args ...any) {
	if s.cfg.Log != nil {
		fmt.Fprintf(s.cfg.Log, format+"\n", args...)
	}
}
