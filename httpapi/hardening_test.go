package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBadInputChangesNothing (issue 14): a body that is not valid UTF-8
// is 400 and creates nothing; a repeated single-valued parameter is 400;
// answers that carry a full key are not cacheable.
func TestBadInputChangesNothing(t *testing.T) {
	w := newTestEnv(t, withWorld())
	r := w.do(t, request{method: "POST", path: "/api/keys", cookie: w.aliceCk, body: "{\"name\":\"\xff\xfe\"}"})
	mustStatus(t, r, 400, codeInvalidJSON)
	list := w.do(t, request{method: "GET", path: "/api/keys", cookie: w.aliceCk})
	if keys := list.json["keys"].([]any); len(keys) != 0 {
		t.Fatalf("a refused body created %d keys", len(keys))
	}

	id, _ := w.createKey(t, w.aliceCk, "k")
	r = w.do(t, request{method: "GET", path: "/api/keys/" + id.String() + "/usage?days=7&days=8", cookie: w.aliceCk})
	mustStatus(t, r, 400, codeValidation)

	r = w.do(t, request{method: "POST", path: "/api/keys", cookie: w.aliceCk, body: `{"name":"fresh"}`})
	if r.status != 201 || r.headers["Cache-Control"] != "no-store" {
		t.Errorf("create = %d, Cache-Control %q; want 201 and no-store", r.status, r.headers["Cache-Control"])
	}
	r = w.do(t, request{method: "POST", path: "/api/keys/" + id.String() + "/rotate", cookie: w.aliceCk})
	if r.status != 200 || r.headers["Cache-Control"] != "no-store" {
		t.Errorf("rotate = %d, Cache-Control %q; want 200 and no-store", r.status, r.headers["Cache-Control"])
	}
}

// TestProxyDropsHopByHop (issue 14): a client's Connection header never
// reaches the upstream (an intermediary there would drop the headers it
// names: the identity headers gatehouse sets), nor do header names with
// "_" (read as "-" by some servers: a way to smuggle identity headers).
func TestProxyDropsHopByHop(t *testing.T) {
	p := newTestEnv(t, withProxyUpstreams())
	r := p.do(t, request{method: "GET", path: "/api/proxy/echo/v1/x", headers: []string{
		"X-API-Key", p.secret, "Connection", "X-Gatehouse-User-Id, X-Upstream-Token", "X_Gatehouse_User_Id", "evil",
	}})
	if r.status != 202 {
		t.Fatalf("proxied answer = %d %s", r.status, r.body)
	}
	got := p.up.lastRequest().Headers
	for k, v := range got {
		if strings.EqualFold(k, "Connection") && v != "keep-alive" && v != "close" {
			t.Errorf("upstream got Connection: %q", v)
		}
		if strings.Contains(k, "_") {
			t.Errorf("upstream got %s: %q, want headers with _ dropped", k, v)
		}
	}
	if got["X-Gatehouse-User-Id"] != p.alice.ID.String() || got["X-Upstream-Token"] != "s3cret" {
		t.Errorf("identity or credential header missing upstream: %v", got)
	}
}

// TestLoginThrottleAndSessionEnd (issue 14): failed logins back off with
// 429 and Retry-After; a password change ends the user's sessions;
// logout-all ends every session of the caller.
func TestLoginThrottleAndSessionEnd(t *testing.T) {
	w := newTestEnv(t, withWorld())
	login := func(pw string) response {
		return w.do(t, request{method: "POST", path: "/api/auth/login", body: `{"email":"bob@example.com","password":"` + pw + `"}`})
	}
	for range 5 {
		mustStatus(t, login("wrong password"), 401, codeInvalidCreds)
	}
	r := login("password123")
	mustStatus(t, r, 429, codeRateLimited)
	if r.headers["Retry-After"] != "1" {
		t.Errorf("throttled login: Retry-After %q, want 1", r.headers["Retry-After"])
	}
	w.sys.clk.Advance(time.Second)
	mustStatus(t, login("password123"), 200, "")

	// Two sessions of alice; logout-all from one ends both.
	second := w.login(t, "alice@example.com")
	mustStatus(t, w.do(t, request{method: "POST", path: "/api/auth/logout-all", cookie: second, headers: []string{"Origin", "http://" + testHost}}), 200, "")
	for _, ck := range []string{w.aliceCk, second} {
		mustStatus(t, w.do(t, request{method: "GET", path: "/api/auth/me", cookie: ck}), 401, codeUnauthorized)
	}

	// An admin resetting carol's password ends carol's session.
	mustStatus(t, w.do(t, request{method: "PATCH", path: "/api/users/" + w.carol.ID.String(), cookie: w.adminCk,
		headers: []string{"Origin", "http://" + testHost}, body: `{"password":"a new password"}`}), 200, "")
	mustStatus(t, w.do(t, request{method: "GET", path: "/api/auth/me", cookie: w.carolCookie}), 401, codeUnauthorized)
}

// TestProxyRefusesSmuggledPaths (issue 14): path parameters after dot
// segments, double-encoded dots and encoded NULs are 400 INVALID_PATH and
// reach no upstream; an upstream's Set-Cookie never reaches the client.
func TestProxyRefusesSmuggledPaths(t *testing.T) {
	p := newTestEnv(t, withProxyUpstreams())
	for _, path := range []string{
		"/api/proxy/echo/v1/a/..;/admin", "/api/proxy/echo/v1/%252e%252e/admin", "/api/proxy/echo/v1/a%00b",
		"/api/proxy/echo/v1/%252f", "/api/proxy/echo/v1/x/.;/y",
	} {
		r := p.do(t, request{method: "GET", path: path, headers: []string{"X-API-Key", p.secret}})
		mustStatus(t, r, 400, codeInvalidPath)
	}
	r := p.do(t, request{method: "GET", path: "/api/proxy/echo/v1/a;b=1/ok", headers: []string{"X-API-Key", p.secret}})
	if r.status != 202 {
		t.Errorf("a path parameter on a plain segment = %d, want it proxied", r.status)
	}
	if len(r.cookies) != 0 {
		t.Errorf("the upstream's Set-Cookie reached the client: %v", r.cookies)
	}
}

// TestKeyLimitOverHTTP (issue 14): the plan's key limit (100 on standard)
// answers 403 KEY_LIMIT_REACHED and creates nothing.
func TestKeyLimitOverHTTP(t *testing.T) {
	w := newTestEnv(t, withWorld())
	for i := range 100 {
		r := w.do(t, request{method: "POST", path: "/api/keys", cookie: w.aliceCk, body: fmt.Sprintf(`{"name":"k%d"}`, i)})
		mustStatus(t, r, 201, "")
	}
	mustStatus(t, w.do(t, request{method: "POST", path: "/api/keys", cookie: w.aliceCk, body: `{"name":"one too many"}`}), 403, codeKeyLimit)
	if n := len(w.do(t, request{method: "GET", path: "/api/keys", cookie: w.aliceCk}).json["keys"].([]any)); n != 100 {
		t.Errorf("alice holds %d keys, want 100", n)
	}
}

// TestLargeBodyGets413 (issue 14): a body far over the limit, announced
// by its Content-Length, is answered 413 at once, and a client that
// sends all of it before reading (as curl does) reads that answer, not a
// connection reset: the listener closes gracefully.
func TestLargeBodyGets413(t *testing.T) {
	w := newTestEnv(t, withStream(1<<20))
	body := bytes.Repeat([]byte(" "), 8<<20)
	for i := range 3 {
		conn := w.dial(t)
		start := time.Now()
		sent := make(chan error, 1)
		go func() {
			_, err := fmt.Fprintf(conn, "POST /api/keys HTTP/1.1\r\nHost: %s\r\nCookie: %s=%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
				testHost, CookieName, w.bobCk, len(body))
			if err == nil {
				_, err = conn.Write(body)
			}
			sent <- err
		}()
		if err := <-sent; err != nil {
			t.Fatalf("attempt %d: sending: %v", i, err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("attempt %d: %v, want a 413 answer", i, err)
		}
		got, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != 413 || !bytes.Contains(got, []byte(codeTooLarge)) || !resp.Close {
			t.Fatalf("attempt %d: %d %s (close %v), want 413 and close", i, resp.StatusCode, got, resp.Close)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("attempt %d took %v", i, took)
		}
	}
}

// TestAmbiguousFramingRefused (issue 14): Content-Length beside
// Transfer-Encoding (either order) and a folded header are 400 and the
// connection is closed, on the management API and on the proxy.
func TestAmbiguousFramingRefused(t *testing.T) {
	w := newTestEnv(t, withStream(1<<20))
	tests := []struct{ name, path, headers string }{
		{"CL then TE", "/api/auth/login", "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n"},
		{"TE then CL", "/api/auth/login", "Transfer-Encoding: chunked\r\ncontent-length: 4\r\n"},
		{"TE folded", "/api/proxy/stream/v1/upload", "X-API-Key: " + w.secret + "\r\nTransfer-Encoding:\r\n chunked\r\n"},
		{"other header folded", "/api/proxy/stream/v1/upload", "X-API-Key: " + w.secret + "\r\nX-Note: a\r\n\tb\r\nTransfer-Encoding: chunked\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := w.dial(t)
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\n%s\r\n4\r\n{}{}\r\n0\r\n\r\nGET /health HTTP/1.1\r\nHost: %[2]s\r\n\r\n", tt.path, testHost, tt.headers)
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 400 || !resp.Close || !bytes.Contains(b, []byte(codeBadRequest)) {
				t.Fatalf("= %d %s (close %v), want 400 and close", resp.StatusCode, b, resp.Close)
			}
			if _, err := http.ReadResponse(br, nil); err == nil {
				t.Fatal("a second request was answered on the refused connection")
			}
		})
	}
	if got := w.stream.count(); got != 0 {
		t.Errorf("upstream saw %d requests", got)
	}
}

// TestProxyUpstreamFaults (issue 14): an upstream that refuses
// connections is 502 at once, one that hangs is 504 at the service
// timeout, and a client that goes away mid-stream frees the upstream's
// connection.
func TestProxyUpstreamFaults(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead.Addr().String()
	dead.Close() // nothing listens there any more: connections are refused
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	go func() { // accepts and never answers
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	w := newTestEnv(t, withStream(DefaultMaxProxyBodyBytes), withConfig(func(c *Config) {
		c.Services["dead"] = Service{Upstream: deadURL, Timeout: 10 * time.Second}
		c.Services["hang"] = Service{Upstream: "http://" + hang.Addr().String(), Timeout: 300 * time.Millisecond}
	}))
	get := func(path string) (*http.Response, time.Duration) {
		t.Helper()
		req := w.request(t, "GET", path, nil)
		start := time.Now()
		resp, err := w.hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp, time.Since(start)
	}

	resp, took := get("/api/proxy/dead/v1/x")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || !bytes.Contains(b, []byte(codeUpstreamDown)) || took > 2*time.Second {
		t.Errorf("refusing upstream = %d %s after %v, want 502 at once", resp.StatusCode, b, took)
	}
	resp, took = get("/api/proxy/hang/v1/x")
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 504 || !bytes.Contains(b, []byte(codeUpstreamTimeout)) || took < 250*time.Millisecond || took > 3*time.Second {
		t.Errorf("hanging upstream = %d %s after %v, want 504 at the 300 ms timeout", resp.StatusCode, b, took)
	}

	resp, _ = get("/api/proxy/stream/v1/ticker")
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data:") {
		t.Fatalf("first event = %q, %v", line, err)
	}
	resp.Body.Close() // the client goes away mid-stream
	select {
	case <-w.stream.gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream stream is still held 5 s after its client went away")
	}
}

// TestDiskFailure (issue 14): once a WAL commit fails, nothing more is
// acknowledged: every change answers 503 UNAVAILABLE (even when the disk
// "recovers": the log is fail-stop until restart) and /health fails; the
// proxy goes on serving the existing key, counting its usage in memory.
// After a restart everything acknowledged before the fault is there.
func TestDiskFailure(t *testing.T) {
	p := newTestEnv(t, withProxyUpstreams())
	key := []string{"X-API-Key", p.secret}
	mustStatus(t, p.do(t, request{method: "GET", path: "/api/proxy/echo/v1/x", headers: key}), 202, "")
	ctx := context.Background()
	if err := p.sys.FlushUsage(ctx); err != nil {
		t.Fatal(err)
	}

	p.sys.node.Log.SetFaultHook(func() error { return syscall.EIO })
	mustStatus(t, p.do(t, request{method: "POST", path: "/api/keys", cookie: p.aliceCk, body: `{"name":"lost"}`}), 503, codeUnavailable)
	p.sys.node.Log.SetFaultHook(nil) // the disk works again: the log must not trust it
	for _, r := range []request{
		{method: "POST", path: "/api/keys", cookie: p.aliceCk, body: `{"name":"lost"}`},
		{method: "POST", path: "/api/keys/" + p.keyID + "/rotate", cookie: p.aliceCk},
		{method: "POST", path: "/api/auth/logout-all", cookie: p.bobCk},
		{method: "PATCH", path: "/api/users/" + p.bob.ID.String(), cookie: p.adminCk, body: `{"plan":"premium"}`},
	} {
		mustStatus(t, p.do(t, r), 503, codeUnavailable)
	}
	if r := p.do(t, request{method: "GET", path: "/health"}); r.status != 503 {
		t.Errorf("/health = %d %s, want 503", r.status, r.body)
	}
	for range 3 {
		mustStatus(t, p.do(t, request{method: "GET", path: "/api/proxy/echo/v1/x", headers: key}), 202, "")
	}
	if err := p.sys.FlushUsage(ctx); err != nil { // fails inside: held in memory
		t.Fatal(err)
	}
	r := p.do(t, request{method: "GET", path: "/api/keys/" + p.keyID + "/usage", cookie: p.aliceCk})
	mustStatus(t, r, 200, "")
	if total := r.json["totalUsageCount"]; total != 4.0 {
		t.Errorf("usage during the fault = %v, want 4 (held in memory)", total)
	}

	sys := p.sys.node.Restart()
	keys, err := sys.ListKeys(ctx, p.alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0].Name != "proxy" || !keys[0].RotatedAt.IsZero() {
		t.Errorf("keys after restart = %+v, want only the acknowledged, unrotated \"proxy\"", keys)
	}
	u, err := sys.KeyUsage(ctx, keys[0].ID, 1)
	if err != nil || u.Total != 1 {
		t.Errorf("usage after restart = %+v, %v; want the 1 request flushed before the fault", u, err)
	}
	if err := sys.Health(); err != nil {
		t.Errorf("Health() after restart = %v", err)
	}
}

// TestProxyIdentityHeadersNotSpoofable: whatever identity or forwarding
// headers a client sends, once or repeated, the upstream sees exactly
// gatehouse's own.
func TestProxyIdentityHeadersNotSpoofable(t *testing.T) {
	p := newTestEnv(t, withProxyUpstreams())
	evil := "00000000-0000-4000-8000-00000000e411"
	r := p.do(t, request{method: "GET", path: "/api/proxy/echo/v1/x", headers: []string{
		"X-API-Key", p.secret,
		"X-Gatehouse-User-Id", evil, "X-Gatehouse-User-Id", evil,
		"X-Gatehouse-Key-Id", evil, "X-Gatehouse-Key-Id", evil,
		"X-Forwarded-Host", "evil.example", "X-Forwarded-Host", "evil.example",
		"X-Forwarded-Proto", "https", "X-Forwarded-Proto", "https",
		"X-Upstream-Token", "forged", "X-Upstream-Token", "forged",
	}})
	if r.status != 202 {
		t.Fatalf("proxied answer = %d %s", r.status, r.body)
	}
	got := p.up.lastRequest().Headers
	want := map[string]string{
		"X-Gatehouse-User-Id": p.alice.ID.String(),
		"X-Gatehouse-Key-Id":  p.keyID,
		"X-Forwarded-Host":    testHost,
		"X-Forwarded-Proto":   "http",
		"X-Upstream-Token":    "s3cret",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("upstream %s = %q, want %q", k, got[k], v)
		}
	}
	if n := p.up.lastRequest().Count; n["X-Gatehouse-User-Id"] != 1 || n["X-Gatehouse-Key-Id"] != 1 || n["X-Forwarded-Host"] != 1 || n["X-Upstream-Token"] != 1 {
		t.Errorf("upstream header counts %v, want each once", n)
	}
}
