package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"gatehouse/actors"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/clock"
	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/app"
	"gatehouse/wal/waltest"
)

const gwToken = "test-gateway-token"

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// fasthttp refreshes its Date header from one global goroutine.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		// A stopped server's worker-pool cleaner sleeps out
		// MaxIdleWorkerDuration (10 s), then sees the stop and exits.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		// fasthttp compresses on a few global workers, started once
		// (webassets.Encode, for /docs).
		goleak.IgnoreTopFunction("github.com/valyala/fasthttp/stackless.funcWorker"),
	)
}

// gwEnv is a Server on 127.0.0.1 backed by a real actor System with the
// gateway extension, on a temp dir (actorstest).
type gwEnv struct {
	tb   testing.TB
	url  string
	gw   *gateway.Gateway
	srv  *Server
	clk  *clock.Fake
	http *http.Client
}

type gwOpts struct {
	rpm   int
	token string
	extra []Route
	clk   *clock.Fake  // nil: actorstest's fake clock, which tests never move
	lg    *slog.Logger // nil: the test's log
	deps  func(*Deps)  // edits the services before the server starts
	gw    func(*gateway.Config)
	cfg   func(*Config)
	app   func(*app.Config) // edits the application services' config
}

func newGWEnv(tb testing.TB, o gwOpts) *gwEnv {
	tb.Helper()
	opts := []actorstest.Option{actorstest.WithExtensions(func() []actors.Extension {
		cfg := gateway.DefaultConfig()
		cfg.RateLimitRPM = o.rpm
		cfg.DefaultAgent = "default" // the operator's default, as most tests seed it
		if o.gw != nil {
			o.gw(&cfg)
		}
		gw, err := gateway.New(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		return []actors.Extension{gw}
	})}
	if o.clk != nil {
		opts = append(opts, actorstest.WithClock(o.clk))
	}
	n := actorstest.New(tb, opts...)
	n.Start()
	gw := n.Exts[0].(*gateway.Gateway)
	cfg := DefaultConfig()
	cfg.Token = o.token
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	acfg := app.DefaultConfig()
	acfg.Webhook.Code = WebhookCode
	if o.app != nil {
		o.app(&acfg)
	}
	a, err := app.New(acfg, gw, o.lg)
	if err != nil {
		tb.Fatal(err)
	}
	d, lg := DepsOf(gw, a), o.lg
	if o.deps != nil {
		o.deps(&d)
	}
	if lg == nil {
		lg = waltest.Logger(tb)
	}
	reg := prometheus.NewRegistry()
	srv, err := newServer(cfg, d, lg, reg, reg, o.extra)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second}
	// Registered after actorstest's cleanups, so it runs first: the
	// listener drains before the system stops.
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			tb.Errorf("Shutdown() = %v", err)
		}
		<-done
		if err := a.Close(ctx); err != nil { // after the listener drained, as cmd does
			tb.Errorf("app Close() = %v", err)
		}
	})
	return &gwEnv{tb: tb, url: "http://" + ln.Addr().String(), gw: gw, srv: srv, clk: o.clk, http: hc}
}

// gwResp is an answer with its JSON body decoded (when JSON).
type gwResp struct {
	status int
	header http.Header
	raw    string
	body   map[string]any
}

// errCode returns error.code of an envelope.
func (r gwResp) errCode() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (r gwResp) errMsg() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["message"].(string)
	return c
}

// do sends a request; hdr holds name, value pairs. A token "" sends none.
func (e *gwEnv) do(method, path, token, body string, hdr ...string) gwResp {
	e.tb.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.http.Do(req)
	if err != nil {
		e.tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := gwResp{status: resp.StatusCode, header: resp.Header, raw: string(b)}
	_ = json.Unmarshal(b, &out.body)
	return out
}

// must is do that fails the test unless the status is want.
func (e *gwEnv) must(want int, method, path, token, body string, hdr ...string) gwResp {
	e.tb.Helper()
	r := e.do(method, path, token, body, hdr...)
	if r.status != want {
		e.tb.Fatalf("%s %s = %d %s, want %d", method, path, r.status, r.raw, want)
	}
	return r
}

// chat runs agent on msg with token (200, or the test fails) and returns
// the answer's content.
func (e *gwEnv) chat(token, agent, msg string) string {
	e.tb.Helper()
	m, _ := json.Marshal(msg)
	r := e.must(200, "POST", "/v1/chat/completions", token, `{"model":"gateway:`+agent+`","messages":[{"role":"user","content":`+string(m)+`}]}`)
	return r.body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
}

// seedAgent creates an echo provider and an agent for user alice.
func (e *gwEnv) seedAgent(key, settings string, extra string) {
	e.tb.Helper()
	if r := e.do("GET", "/v1/providers/echo", gwToken, ""); r.status == http.StatusNotFound {
		e.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo","settings":`+settings+`}`)
	}
	e.must(201, "POST", "/v1/agents", gwToken,
		`{"agent_key":"`+key+`","provider":"echo","model":"echo-1","system_prompt":"be brief"`+extra+`}`, "X-Gateway-User-Id", "alice")
}

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	event string
	data  string
}

// readEvents parses an SSE body.
func readEvents(tb testing.TB, body io.Reader) []sseEvent {
	tb.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	return out
}

func jsonOf(tb testing.TB, s string) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		tb.Fatalf("json %q: %v", s, err)
	}
	return m
}

func ctxT(tb testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	tb.Cleanup(cancel)
	return c
}
