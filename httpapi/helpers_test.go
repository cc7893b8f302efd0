package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"
	"go.uber.org/goleak"

	"gatehouse/actors/accounts"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// fasthttp refreshes its Date header from one global goroutine.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		// A stopped server's worker-pool cleaner sleeps out
		// MaxIdleWorkerDuration (10 s), then sees the stop and exits.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		// A HostClient's cleaner sleeps out MaxIdleConnDuration after the
		// last connection closed, then exits.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		// fasthttp compresses on a few global workers, started once.
		goleak.IgnoreTopFunction("github.com/valyala/fasthttp/stackless.funcWorker"),
		// fasthttp's default dialer cleans its DNS cache on a global
		// goroutine, started by the first dial.
		goleak.IgnoreTopFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		// The process's upstream deadline wheel ticks while any upstream
		// connection is open; an idle pooled one outlives its test.
		goleak.IgnoreAnyFunction("gatehouse/httpapi.(*deadlineWheel).run"),
		// Cleanup replaces goleak's os.Exit: exit with its code, or a
		// leak found after a passing run would exit 0.
		goleak.Cleanup(func(code int) { removeWorldSeed(); os.Exit(code) }),
	)
}

// testHost is the Host header of every test request.
const testHost = "api.test"

// clientAddr is the address test requests come from.
var clientAddr = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 40000}

// logWriter sends slog output to t.Log.
type logWriter struct{ tb testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func testLogger(tb testing.TB) *slog.Logger {
	tb.Helper()
	return slog.New(slog.NewTextHandler(logWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serve runs srv on ln until the test ends.
func serve(tb testing.TB, srv *Server, ln net.Listener) {
	tb.Helper()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			tb.Errorf("Shutdown() = %v", err)
		}
		if err := <-done; err != nil {
			tb.Errorf("Serve() = %v", err)
		}
	})
}

// request is one test request. headers are name, value pairs.
type request struct {
	method  string
	path    string
	body    string
	cookie  string // session token
	headers []string
}

// response is a received response with its body decoded when JSON.
type response struct {
	status  int
	headers map[string]string // canonical name → value
	cookies []string          // raw Set-Cookie values
	body    []byte
	json    map[string]any
}

func (r response) code() string {
	s, _ := r.json["error"].(string)
	return s
}

func (e *testEnv) do(tb testing.TB, r request) response {
	tb.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(r.method)
	req.SetRequestURI("http://" + testHost + r.path)
	if r.body != "" {
		req.SetBodyString(r.body)
		req.Header.SetContentType("application/json")
	}
	if r.cookie != "" {
		req.Header.SetCookie(CookieName, r.cookie)
	}
	for i := 0; i+1 < len(r.headers); i += 2 {
		req.Header.Add(r.headers[i], r.headers[i+1])
	}
	if err := e.client.DoTimeout(req, resp, 30*time.Second); err != nil { // generous: -race on a loaded 2-core machine
		tb.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	return readResponse(tb, resp)
}

func readResponse(tb testing.TB, resp *fasthttp.Response) response {
	tb.Helper()
	out := response{status: resp.StatusCode(), headers: map[string]string{}, body: append([]byte(nil), resp.Body()...)}
	for k, v := range resp.Header.All() {
		if string(k) == fasthttp.HeaderSetCookie {
			out.cookies = append(out.cookies, string(v))
			continue
		}
		out.headers[string(k)] = string(v)
	}
	if strings.HasPrefix(string(resp.Header.ContentType()), "application/json") {
		if err := json.Unmarshal(out.body, &out.json); err != nil {
			tb.Fatalf("response body %q: %v", out.body, err)
		}
	}
	return out
}

// mustStatus fails the test unless r has the status and error code.
func mustStatus(tb testing.TB, r response, status int, code string) {
	tb.Helper()
	if r.status != status || r.code() != code {
		tb.Fatalf("got %d %q (%s), want %d %q", r.status, r.code(), r.body, status, code)
	}
}

func (e *testEnv) addUser(tb testing.TB, email string, role accounts.Role, plan accounts.Plan, license bool) accounts.User {
	tb.Helper()
	u, err := e.sys.CreateUser(context.Background(), accounts.NewUser{
		Email: email, Password: "password123", Role: role, Plan: plan, LicenseActive: license,
	})
	if err != nil {
		tb.Fatalf("CreateUser(%s) = %v", email, err)
	}
	return u
}

func (e *testEnv) login(tb testing.TB, email string) string {
	tb.Helper()
	_, s, err := e.sys.Login(context.Background(), email, "password123")
	if err != nil {
		tb.Fatalf("Login(%s) = %v", email, err)
	}
	return s.Token
}

// createKey creates a key through the API and returns its id and secret.
func (e *testEnv) createKey(tb testing.TB, cookie, name string) (uuid.UUID, string) {
	tb.Helper()
	r := e.do(tb, request{method: "POST", path: "/api/keys", body: `{"name":"` + name + `"}`, cookie: cookie})
	mustStatus(tb, r, 201, "")
	id, err := uuid.Parse(r.json["id"].(string))
	if err != nil {
		tb.Fatalf("id %v: %v", r.json["id"], err)
	}
	return id, r.json["key"].(string)
}
