package httpapi

import (
	"context"
	"gatehouse/actors/keys"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/valyala/fasthttp"
)

// stubUpstream is a fasthttp server on loopback that records the last
// request it received. /base/v1/slow waits until the test ends.
type stubUpstream struct {
	addr    string
	release chan struct{}

	mu   sync.Mutex
	last seenRequest
}

type seenRequest struct {
	Method  string
	URI     string
	Host    string
	Body    string
	Headers map[string]string
	Count   map[string]int // how many times each header came
	Cookies map[string]string
}

func newStubUpstream(tb testing.TB) *stubUpstream {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	u := &stubUpstream{addr: ln.Addr().String(), release: make(chan struct{})}
	srv := &fasthttp.Server{Handler: u.handle, DisableHeaderNamesNormalizing: false}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	tb.Cleanup(func() {
		close(u.release)
		if err := srv.Shutdown(); err != nil {
			tb.Errorf("upstream Shutdown() = %v", err)
		}
		if err := <-done; err != nil {
			tb.Errorf("upstream Serve() = %v", err)
		}
	})
	return u
}

func (u *stubUpstream) handle(rc *fasthttp.RequestCtx) {
	seen := seenRequest{
		Method: string(rc.Method()), URI: string(rc.RequestURI()), Host: string(rc.Host()),
		Body: string(rc.PostBody()), Headers: map[string]string{}, Count: map[string]int{}, Cookies: map[string]string{},
	}
	for k, v := range rc.Request.Header.All() {
		seen.Headers[string(k)] = string(v)
		seen.Count[string(k)]++
	}
	for k, v := range rc.Request.Header.Cookies() {
		seen.Cookies[string(k)] = string(v)
	}
	u.mu.Lock()
	u.last = seen
	u.mu.Unlock()
	if strings.HasSuffix(string(rc.Path()), "/slow") {
		select {
		case <-u.release:
		case <-time.After(5 * time.Second):
		}
	}
	rc.Response.Header.Set("X-Upstream", "yes")
	rc.Response.Header.Set("Keep-Alive", "timeout=5")
	rc.Response.Header.Set("X-RateLimit-Limit", "upstream-value")
	rc.Response.Header.Set("Set-Cookie", "upstream_session=1; Path=/")
	rc.SetStatusCode(fasthttp.StatusAccepted)
	rc.SetBodyString("from upstream: " + seen.Method)
}

func (u *stubUpstream) lastRequest() seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.last
}

// closedAddr returns a loopback address nobody listens on.
func closedAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		tb.Fatal(err)
	}
	return addr
}

func TestProxyErrors(t *testing.T) {
	p := newTestEnv(t, withProxyUpstreams())
	revokedID, revoked := p.createKey(t, p.aliceCk, "revoked")
	mustStatus(t, p.do(t, request{method: "POST", path: "/api/keys/" + revokedID.String() + "/revoke", cookie: p.aliceCk}), 200, "")
	_, expiring := p.createKey(t, p.aliceCk, "expiring")
	soon := p.sys.clk.Now().Add(time.Minute)
	if _, err := p.sys.UpdateKey(context.Background(), p.keyIDOf(t, expiring), keyPatchExpiry(soon)); err != nil {
		t.Fatal(err)
	}
	p.sys.clk.Advance(2 * time.Minute)
	key := []string{"X-API-Key", p.secret}
	tests := []struct {
		name    string
		path    string
		headers []string
		status  int
		code    string
	}{
		{"unknown service", "/api/proxy/nope/v1/x", key, 404, codeUnknownService},
		{"unknown service without key", "/api/proxy/nope/v1/x", nil, 404, codeUnknownService},
		{"no v1", "/api/proxy/echo/v2/x", key, 400, codeInvalidPath},
		{"no version", "/api/proxy/echo/x", key, 400, codeInvalidPath},
		{"service only", "/api/proxy/echo", key, 400, codeInvalidPath},
		{"v1 without slash", "/api/proxy/echo/v1", key, 400, codeInvalidPath},
		{"empty service", "/api/proxy//v1/x", key, 400, codeInvalidPath},
		{"dot dot", "/api/proxy/echo/v1/../../admin", key, 400, codeInvalidPath},
		{"encoded dot dot", "/api/proxy/echo/v1/%2e%2E/admin", key, 400, codeInvalidPath},
		{"missing key", "/api/proxy/echo/v1/x", nil, 401, codeMissingKey},
		{"empty bearer", "/api/proxy/echo/v1/x", []string{"Authorization", "Bearer "}, 401, codeMissingKey},
		{"invalid key", "/api/proxy/echo/v1/x", []string{"X-API-Key", "svc_live_x"}, 401, codeInvalidKey},
		{"revoked key", "/api/proxy/echo/v1/x", []string{"Authorization", "Bearer " + revoked}, 401, codeKeyRevoked},
		{"expired key", "/api/proxy/echo/v1/x", []string{"X-API-Key", expiring}, 401, codeKeyExpired},
		{"body too large", "/api/proxy/echo/v1/x", key, 413, codeTooLarge},
		{"upstream down", "/api/proxy/down/v1/x", key, 502, codeUpstreamDown},
		{"upstream timeout", "/api/proxy/echo/v1/slow", key, 504, codeUpstreamTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := request{method: "POST", path: tt.path, headers: tt.headers}
			if tt.status == 413 {
				req.body = strings.Repeat("x", 300)
			}
			r := p.do(t, req)
			mustStatus(t, r, tt.status, tt.code)
			if msg, _ := r.json["message"].(string); msg == "" || strings.Contains(msg, p.secret) {
				t.Errorf("message %q: empty or leaks the key", msg)
			}
			admitted := tt.status == 502 || tt.status == 504
			if _, has := r.headers["X-Ratelimit-Limit"]; has != admitted {
				t.Errorf("X-RateLimit-Limit present = %v, want %v: %v", has, admitted, r.headers)
			}
		})
	}
	// The two admitted requests that failed upstream still count.
	u, err := p.sys.KeyUsage(context.Background(), p.keyIDOf(t, p.secret), 1)
	if err != nil || u.Total != 2 {
		t.Errorf("usage after upstream failures = %+v, %v; want 2", u, err)
	}
}

func TestProxyForwards(t *testing.T) {
	p := newTestEnv(t, withProxyUpstreams())
	r := p.do(t, request{
		method: "PUT", path: "/api/proxy/echo/v1/items/42%2Fx?q=1&r=%20", body: `{"a":1}`, cookie: p.aliceCk,
		headers: []string{
			"X-API-Key", p.secret, "Authorization", "Bearer other", "Connection", "X-Hop",
			"X-Hop", "1", "Keep-Alive", "timeout=1", "Proxy-Authorization", "Basic x", "X-Custom", "kept",
			"X-Upstream-Token", "client-value", "X-Forwarded-For", "10.0.0.1", "Cookie", "theme=dark; " + CookieName + "=" + p.aliceCk,
		},
	})
	if r.status != 202 || string(r.body) != "from upstream: PUT" {
		t.Fatalf("proxied answer = %d %q", r.status, r.body)
	}
	if r.headers["X-Upstream"] != "yes" || r.headers["Keep-Alive"] != "" {
		t.Errorf("response headers: %v", r.headers)
	}
	got := p.up.lastRequest()
	wantHeaders := map[string]string{
		"X-Custom":            "kept",
		"X-Upstream-Token":    "s3cret",
		"X-Forwarded-For":     "10.0.0.1, 192.0.2.7",
		"X-Forwarded-Host":    testHost,
		"X-Forwarded-Proto":   "http",
		"X-Gatehouse-User-Id": p.alice.ID.String(),
		"X-Gatehouse-Key-Id":  p.keyID,
	}
	for k, v := range wantHeaders {
		if got.Headers[k] != v {
			t.Errorf("upstream header %s = %q, want %q", k, got.Headers[k], v)
		}
	}
	for _, k := range []string{"X-Api-Key", "Authorization", "X-Hop", "Keep-Alive", "Proxy-Authorization"} {
		if v, ok := got.Headers[k]; ok {
			t.Errorf("upstream got %s: %q, want it stripped", k, v)
		}
	}
	want := seenRequest{Method: "PUT", URI: "/base/v1/items/42%2Fx?q=1&r=%20", Host: p.up.addr, Body: `{"a":1}`,
		Cookies: map[string]string{"theme": "dark"}}
	got.Headers, got.Count = nil, nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("upstream request (-want +got):\n%s", diff)
	}
}

func TestProxyRateLimit(t *testing.T) {
	p := newTestEnv(t, withProxyUpstreams())
	ctx := context.Background()
	limit := int64(2)
	if _, err := p.sys.UpdateKey(ctx, p.keyIDOf(t, p.secret), keys.KeyPatch{RateLimit: &limit}); err != nil {
		t.Fatal(err)
	}
	now := p.sys.clk.Now().Unix()
	req := request{method: "POST", path: "/api/proxy/echo/v1/x", headers: []string{"X-API-Key", p.secret}}
	for i, remaining := range []string{"1", "0"} {
		r := p.do(t, req)
		if r.status != 202 {
			t.Fatalf("request %d = %d %s", i, r.status, r.body)
		}
		want := map[string]string{
			"X-Ratelimit-Limit": "2", "X-Ratelimit-Remaining": remaining, "X-Ratelimit-Reset": strconv.FormatInt(now+3600, 10),
			"Ratelimit-Policy": `"hourly";q=2;w=3600`, "Ratelimit": `"hourly";r=` + remaining + `;t=3600`,
		}
		for k, v := range want {
			if r.headers[k] != v {
				t.Errorf("request %d: %s = %q, want %q", i, k, r.headers[k], v)
			}
		}
	}
	p.sys.clk.Advance(10 * time.Minute)
	r := p.do(t, req)
	mustStatus(t, r, 429, codeRateLimited)
	retry := int64(3600 - 600)
	if diff := cmp.Diff(map[string]any{"error": codeRateLimited, "retryAfter": float64(retry)}, r.json); diff != "" {
		t.Errorf("429 body (-want +got):\n%s", diff)
	}
	reset, _ := strconv.ParseInt(r.headers["X-Ratelimit-Reset"], 10, 64)
	if r.headers["Retry-After"] != strconv.FormatInt(retry, 10) || r.headers["X-Ratelimit-Remaining"] != "0" ||
		reset-p.sys.clk.Now().Unix() != retry || r.headers["Ratelimit"] != `"hourly";r=0;t=`+strconv.FormatInt(retry, 10) {
		t.Errorf("429 headers disagree: %v", r.headers)
	}
}

// TestProxyUpstreamRateLimitHeadersReplaced (issue 25): an upstream's own
// rate-limit headers do not reach the client beside gatehouse's: the
// answer carries each of the five once, with gatehouse's value.
func TestProxyUpstreamRateLimitHeadersReplaced(t *testing.T) {
	p := newTestEnv(t, withProxyUpstreams())
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + testHost + "/api/proxy/echo/v1/x")
	req.Header.Set("X-API-Key", p.secret)
	resp.Header.DisableNormalizing() // the names as sent
	if err := p.client.DoTimeout(req, resp, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode() != 202 {
		t.Fatalf("proxied answer = %d %s", resp.StatusCode(), resp.Body())
	}
	seen := map[string][]string{}
	for k, v := range resp.Header.All() {
		seen[strings.ToLower(string(k))] = append(seen[strings.ToLower(string(k))], string(k)+": "+string(v))
	}
	for _, name := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit-Policy", "RateLimit"} {
		got := seen[strings.ToLower(name)]
		if len(got) != 1 || strings.Contains(got[0], "upstream-value") {
			t.Errorf("%s lines = %q, want one of gatehouse's", name, got)
		}
	}
}
