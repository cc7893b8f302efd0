package listener

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
	"go.uber.org/goleak"
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
	)
}

func TestBearer(t *testing.T) {
	tests := []struct {
		name, header string // header "" sends none
		token        string
		sent         bool
	}{
		{"absent", "", "", false},
		{"bearer", "Bearer abc", "abc", true},
		{"scheme case", "bEaReR abc", "abc", true},
		{"white space", "Bearer   abc  ", "abc", true},
		{"empty token", "Bearer ", "", true},
		{"only spaces", "Bearer    ", "", true},
		{"basic", "Basic abc", "", true},
		{"no space", "Bearerabc", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h fasthttp.RequestHeader
			if tt.header != "" {
				h.Set("Authorization", tt.header)
			}
			tok, sent := Bearer(&h)
			if string(tok) != tt.token || sent != tt.sent {
				t.Errorf("Bearer(%q) = %q, %v; want %q, %v", tt.header, tok, sent, tt.token, tt.sent)
			}
		})
	}
	var h fasthttp.RequestHeader
	h.Set("Authorization", "Bearer abc")
	if n := testing.AllocsPerRun(100, func() { Bearer(&h) }); n != 0 {
		t.Errorf("Bearer allocates %v times, want 0", n)
	}
}

func TestDecodeObject(t *testing.T) {
	type v struct {
		A int `json:"a"`
	}
	tests := []struct {
		body string
		want error // nil: decoded; errSyntax: a *json.SyntaxError
	}{
		{` {"a":1} `, nil},
		{``, ErrEmptyBody},
		{"  \n", ErrEmptyBody},
		{`[1]`, ErrNotObject},
		{`{"a":1} x`, ErrTrailing},
		{`{"a":1}{}`, ErrTrailing},
		{`{"a":`, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		var got v
		err := DecodeObject([]byte(tt.body), &got)
		if !errors.Is(err, tt.want) || tt.want == nil && got.A != 1 {
			t.Errorf("DecodeObject(%q) = %v (%+v), want %v", tt.body, err, got, tt.want)
		}
	}
	var se *json.SyntaxError
	if err := DecodeObject([]byte(`{"a" 1}`), &v{}); !errors.As(err, &se) {
		t.Errorf("DecodeObject(bad syntax) = %v, want a *json.SyntaxError", err)
	}
	var te *json.UnmarshalTypeError
	if err := DecodeObject([]byte(`{"a":"x"}`), &v{}); !errors.As(err, &te) || te.Field != "a" {
		t.Errorf("DecodeObject(wrong type) = %v, want a *json.UnmarshalTypeError for a", err)
	}
}

func TestServerError(t *testing.T) {
	tests := []struct {
		err, want error
	}{
		{fasthttp.ErrBodyTooLarge, ErrTooLarge},
		{&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, ErrRequestTimeout},
		{errors.New("cannot parse request"), ErrMalformed},
		{ErrPanic, ErrPanic},
		{ErrTooLarge, ErrTooLarge},
	}
	for _, tt := range tests {
		if got := ServerError(tt.err); !errors.Is(got, tt.want) {
			t.Errorf("ServerError(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestListener serves a panicking route, an oversize body and /metrics
// through one Listener.
func TestListener(t *testing.T) {
	var logs bytes.Buffer // written only by handlers the test waits for
	var mu sync.Mutex
	var got []error
	last := func() (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 {
			return 0, nil
		}
		return len(got), got[len(got)-1]
	}
	reg := prometheus.NewRegistry()
	l, err := New(Options{
		Name: "test", Logger: slog.New(slog.NewTextHandler(&logs, nil)), Registerer: reg, MaxRequestBodySize: 16,
		ErrorHandler: func(rc *fasthttp.RequestCtx, err error) {
			mu.Lock()
			got = append(got, ServerError(err))
			mu.Unlock()
			rc.SetStatusCode(599)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRouter()
	r.GET("/boom", l.Wrap("/boom", func(*fasthttp.RequestCtx) { panic("broken invariant") }))
	r.POST("/echo", l.Wrap("/echo", func(rc *fasthttp.RequestCtx) { _ = WriteJSON(rc, 200, map[string]int{"n": len(rc.PostBody())}) }))
	r.GET("/metrics", l.MetricsHandler())
	l.SetHandler(r.Handler)
	ln := fasthttputil.NewInmemoryListener()
	done := make(chan error, 1)
	go func() { done <- l.Serve(ln) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := l.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		<-done
	}()
	c := &fasthttp.HostClient{Addr: "test", Dial: func(string) (net.Conn, error) { return ln.Dial() }}
	defer c.CloseIdleConnections()
	do := func(method, path, body string) (int, string) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.Header.SetMethod(method)
		req.SetRequestURI("http://test" + path)
		req.SetBodyString(body)
		if err := c.Do(req, resp); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp.StatusCode(), string(resp.Body())
	}
	if code, _ := do("GET", "/boom", ""); code != 599 {
		t.Errorf("panic = %d, want 599", code)
	}
	if n, err := last(); n != 1 || !errors.Is(err, ErrPanic) {
		t.Errorf("handler got %d errors, last %v; want 1, ErrPanic", n, err)
	}
	if n := strings.Count(logs.String(), "handler panic"); n != 1 {
		t.Errorf("panic logged %d times, want once:\n%s", n, logs.String())
	}
	if code, body := do("POST", "/echo", "0123456789"); code != 200 || body != `{"n":10}`+"\n" {
		t.Errorf("POST /echo = %d %s", code, body)
	}
	if code, _ := do("POST", "/echo", strings.Repeat("x", 17)); code != 599 {
		t.Errorf("oversize body = %d, want 599", code)
	}
	if _, err := last(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversize body: handler got %v, want ErrTooLarge", err)
	}
	_, metrics := do("GET", "/metrics", "")
	if !strings.Contains(metrics, `gatehouse_http_requests_total{listener="test",method="GET",route="/boom",status="599"} 1`) {
		t.Errorf("metrics lack the panicked request:\n%s", metrics)
	}
	status, header, body := l.Metrics(http.Header{})
	if status != 200 || !strings.HasPrefix(header.Get("Content-Type"), "text/plain") || !bytes.Contains(body, []byte(`route="/echo"`)) {
		t.Errorf("Metrics() = %d %v %.200s", status, header, body)
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"GET / HTTP/1.1\r\nX-API-Key: svc_live_abcdefghijklmnopqrstuvwxyz012345\r\nHost: x\r\n", "GET / HTTP/1.1\r\nX-API-Key: [redacted]\r\nHost: x\r\n"},
		{"authorization:Bearer gateway_0123456789abcdef0123456789abcdef", "authorization:[redacted]"},
		{"Cookie: gh_session=secret; theme=dark\nnext", "Cookie: [redacted]\nnext"},
		{"error near svc_live_AAAA and Bearer tok.en-123", "error near [redacted] and [redacted]"},
		{"nothing to hide", "nothing to hide"},
		{"GET /v1/media/x?token=s3cret-gateway-token&a=1 HTTP/1.1", "GET /v1/media/x?token=[redacted]&a=1 HTTP/1.1"},
	}
	for _, tt := range tests {
		if got := Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCheckFraming(t *testing.T) {
	tests := []struct {
		name, headers string
		bad           bool
	}{
		{"content length", "Content-Length: 3\r\n", false},
		{"chunked", "Transfer-Encoding: chunked\r\n", false},
		{"no body", "", false},
		{"CL and TE", "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n", true},
		{"TE and cl", "Transfer-Encoding: chunked\r\ncontent-LENGTH: 3\r\n", true},
		{"folded TE", "Transfer-Encoding:\r\n chunked\r\n", true},
		{"folded other", "X-A: 1\r\n\t2\r\nContent-Length: 3\r\n", true},
		{"a header named like CL", "X-Content-Length: 3\r\nTransfer-Encoding: chunked\r\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h fasthttp.RequestHeader
			raw := "POST / HTTP/1.1\r\nHost: x\r\n" + tt.headers + "\r\n"
			if err := h.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
				t.Fatalf("fasthttp refused it itself: %v", err)
			}
			err := checkFraming(&h)
			if (err != nil) != tt.bad || err != nil && !errors.Is(err, ErrMalformed) {
				t.Errorf("checkFraming = %v, want refused %v", err, tt.bad)
			}
		})
	}
}
