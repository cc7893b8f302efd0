package httpapi

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"gatehouse/actors/accounts"
)

func TestRouting(t *testing.T) {
	e := newTestEnv(t)
	tests := []struct {
		name   string
		method string
		path   string
		status int
		code   string
	}{
		{"health", "GET", "/health", 200, ""},
		{"unknown route", "GET", "/nope", 404, codeNotFound},
		{"trailing slash is not redirected", "GET", "/health/", 404, codeNotFound},
		{"wrong method", "DELETE", "/health", 405, codeMethodNotAllowed},
		{"wrong method on keys", "PUT", "/api/keys", 405, codeMethodNotAllowed},
		{"validate is not a key id", "GET", "/api/keys/validate", 401, codeUnauthorized},
		{"proxy root without slash", "GET", "/api/proxy", 404, codeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(t, request{method: tt.method, path: tt.path})
			mustStatus(t, r, tt.status, tt.code)
		})
	}
	r := e.do(t, request{method: "GET", path: "/health"})
	if diff := cmp.Diff(map[string]any{"status": "ok"}, r.json); diff != "" {
		t.Errorf("GET /health body (-want +got):\n%s", diff)
	}
	r = e.do(t, request{method: "DELETE", path: "/health"})
	if r.headers["Allow"] == "" {
		t.Errorf("405 without Allow header: %v", r.headers)
	}
}

// TestMetrics: /metrics on the API listener answers admins only
// (issue 14: it reveals traffic), with the listener's route series.
func TestMetrics(t *testing.T) {
	e := newTestEnv(t, withWorld())
	e.do(t, request{method: "GET", path: "/health"})
	e.do(t, request{method: "GET", path: "/api/keys/" + strings.Repeat("a", 36)})
	e.do(t, request{method: "GET", path: "/missing"})
	mustStatus(t, e.do(t, request{method: "GET", path: "/metrics"}), 401, codeUnauthorized)
	mustStatus(t, e.do(t, request{method: "GET", path: "/metrics", cookie: e.aliceCk}), 403, codeForbidden)
	r := e.do(t, request{method: "GET", path: "/metrics", cookie: e.adminCk})
	if r.status != 200 {
		t.Fatalf("GET /metrics = %d", r.status)
	}
	body := string(r.body)
	for _, want := range []string{
		`gatehouse_http_requests_total{listener="api",method="GET",route="/health",status="200"} 1`,
		`gatehouse_http_requests_total{listener="api",method="GET",route="/api/keys/{id}",status="401"} 1`,
		`gatehouse_http_requests_total{listener="api",method="GET",route="unmatched",status="404"} 1`,
		`gatehouse_http_request_duration_seconds_count{listener="api",route="/health"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /metrics lacks %s\n%s", want, body)
		}
	}
}

func TestHealthServer(t *testing.T) {
	// The health server shares the API server's collectors.
	e := newTestEnv(t, withoutControl(), withoutServing(), withHealthServer("gateway", true)).health
	mustStatus(t, e.do(t, request{method: "GET", path: "/health"}), 200, "")
	mustStatus(t, e.do(t, request{method: "GET", path: "/api/keys"}), 404, codeNotFound)
	r := e.do(t, request{method: "GET", path: "/metrics"})
	if !strings.Contains(string(r.body), `listener="gateway",method="GET",route="/health",status="200"`) {
		t.Errorf("gateway metrics missing:\n%s", r.body)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	tests := []struct {
		name string
		edit func(*Config)
		want string // substring of the error, "" for none
	}{
		{"default", func(*Config) {}, ""},
		{"port", func(c *Config) { c.Port = 70000 }, "port"},
		{"body", func(c *Config) { c.MaxBodyBytes = 0 }, "max_body_bytes"},
		{"timeout", func(c *Config) { c.RequestTimeout = 0 }, "request_timeout"},
		{"grace", func(c *Config) { c.GracePeriod = -1 }, "grace_period"},
		{"listener", func(c *Config) { c.Listener = "" }, "listener"},
		{"service ok", func(c *Config) { c.Services = map[string]Service{"llm": {Upstream: "https://api.example.com/base/"}} }, ""},
		{"service scheme", func(c *Config) { c.Services = map[string]Service{"llm": {Upstream: "ftp://x"}} }, "services.llm.upstream"},
		{"service host", func(c *Config) { c.Services = map[string]Service{"llm": {Upstream: "http:///x"}} }, "services.llm.upstream"},
		{"service query", func(c *Config) { c.Services = map[string]Service{"llm": {Upstream: "http://x/?a=1"}} }, "services.llm.upstream"},
		{"service name", func(c *Config) { c.Services = map[string]Service{"a/b": {Upstream: "http://x"}} }, "services."},
		{"service timeout", func(c *Config) { c.Services = map[string]Service{"s": {Upstream: "http://x", Timeout: -1}} }, "services.s.timeout"},
		{"service header", func(c *Config) {
			c.Services = map[string]Service{"s": {Upstream: "http://x", Headers: map[string]string{"Bad Name": "v"}}}
		}, "services.s.headers"},
		{"service header value", func(c *Config) {
			c.Services = map[string]Service{"s": {Upstream: "http://x", Headers: map[string]string{"X-A": "a\r\nb"}}}
		}, "services.s.headers.X-A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate() = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}

// TestShutdownDrains checks that Shutdown waits for a request in flight.
func TestShutdownDrains(t *testing.T) {
	var blocking *blockingUsers
	srv := newTestEnv(t, withoutControl(), withWallClock(), withoutServing(), withUserService(func(sys *testSystem) UserService {
		blocking = &blockingUsers{testSystem: sys, entered: make(chan struct{}), release: make(chan struct{})}
		return blocking
	})).srv
	ln := fasthttputil.NewInmemoryListener()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	c := &fasthttp.HostClient{Addr: testHost, Dial: func(string) (net.Conn, error) { return ln.Dial() }}
	defer c.CloseIdleConnections()
	got := make(chan int, 1)
	go func() {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		req.SetRequestURI("http://" + testHost + "/api/auth/me")
		req.Header.SetCookie(CookieName, "x")
		_ = c.Do(req, resp)
		got <- resp.StatusCode()
	}()
	<-blocking.entered
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shut <- srv.Shutdown(ctx)
	}()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown() = %v before the request finished", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(blocking.release)
	if code := <-got; code != 401 {
		t.Errorf("in-flight request = %d, want 401", code)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown() = %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve() = %v", err)
	}
}

// blockingUsers holds Authenticate until release is closed.
type blockingUsers struct {
	*testSystem
	entered chan struct{}
	release chan struct{}
}

func (b *blockingUsers) Authenticate(ctx context.Context, token string) (accounts.User, error) {
	close(b.entered)
	<-b.release
	return b.testSystem.Authenticate(ctx, token)
}
