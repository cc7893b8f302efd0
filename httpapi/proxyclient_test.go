package httpapi

import (
	"bufio"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"gatehouse/actors/accounts"
)

// TestProxyClientIPHeadersDropped (issue 21): a client's Forwarded and
// X-Real-IP never reach the upstream, whatever their case or count;
// X-Forwarded-For ends with the client's real address.
func TestProxyClientIPHeadersDropped(t *testing.T) {
	p := newTestEnv(t, withProxyUpstreams())
	r := p.do(t, request{method: "GET", path: "/api/proxy/echo/v1/x", headers: []string{
		"X-API-Key", p.secret,
		"Forwarded", "for=203.0.113.9;proto=https", "forwarded", "for=203.0.113.9",
		"X-Real-IP", "203.0.113.9", "x-real-ip", "203.0.113.9",
	}})
	if r.status != 202 {
		t.Fatalf("proxied answer = %d %s", r.status, r.body)
	}
	got := p.up.lastRequest()
	for _, k := range []string{"Forwarded", "X-Real-Ip"} {
		if n := got.Count[k]; n != 0 {
			t.Errorf("upstream got %d %s header(s): %q", n, k, got.Headers[k])
		}
	}
	if xff := got.Headers["X-Forwarded-For"]; xff != clientAddr.IP.String() {
		t.Errorf("upstream X-Forwarded-For = %q, want %q", xff, clientAddr.IP.String())
	}
}

// TestProxyMalformedChunkedBody (issue 21, item 17): a client whose chunked
// body is malformed gets 400 BAD_REQUEST, not a 502 blamed on the
// upstream, and no "upstream failed" warning is logged. The bodies are
// sent over raw TCP, small (read before the upstream is called) and large
// (streamed to it when the error comes).
func TestProxyMalformedChunkedBody(t *testing.T) {
	up := newStubUpstream(t)
	var logs syncBuffer
	e := newTestEnv(t, withoutControl(), withTCP(),
		withLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		withConfig(func(c *Config) {
			c.Services = map[string]Service{"echo": {Upstream: "http://" + up.addr + "/base/", Timeout: 5 * time.Second}}
		}))
	e.addUser(t, "a@example.com", accounts.RoleUser, accounts.PlanStandard, true)
	_, secret := e.createKey(t, e.login(t, "a@example.com"), "chunked")

	big := strings.Repeat("x", 200<<10)
	tests := []struct{ name, body string }{
		{"bad chunk size", "5\r\nhello\r\nzz\r\n"},
		{"no CRLF after the data", "5\r\nhelloXY3\r\nabc\r\n0\r\n\r\n"},
		{"bad size at the start", "g\r\nhello\r\n0\r\n\r\n"},
		{"large body, then a bad size", "32000\r\n" + big + "\r\nnot-hex\r\n"},
		{"large body, then no CRLF", "32000\r\n" + big + "XY0\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := e.dial(t)
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			go func() {
				_, _ = io.WriteString(conn, "POST /api/proxy/echo/v1/upload HTTP/1.1\r\nHost: "+testHost+
					"\r\nX-API-Key: "+secret+"\r\nTransfer-Encoding: chunked\r\n\r\n"+tt.body)
			}()
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(body), `"error":"`+codeBadRequest+`"`) {
				t.Errorf("answer = %d %s, want 400 %s", resp.StatusCode, body, codeBadRequest)
			}
		})
	}
	if strings.Contains(logs.String(), "upstream failed") || strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("a client's broken body was logged as an upstream failure:\n%s", logs.String())
	}
}
