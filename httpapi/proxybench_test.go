package httpapi

import (
	"bufio"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gatehouse/actors/keys"
	"gatehouse/actors/ratelimit"
	"gatehouse/httpapi/relay"
)

// BenchmarkProxyHeaders measures the proxy's header work per request, in
// memory: the upstream request built from a typical client request, the
// upstream's answer copied back, and the rate-limit headers set.
func BenchmarkProxyHeaders(b *testing.B) {
	srv := newTestEnv(b, withoutControl(), withLogger(nil), withWallClock(), withoutServing()).srv
	up, err := newUpstream("llm", Service{Upstream: "http://127.0.0.1:1/base", Headers: map[string]string{"X-Upstream-Token": "t"}})
	if err != nil {
		b.Fatal(err)
	}
	var in fasthttp.Request
	raw := "POST /api/proxy/llm/v1/chat/completions?stream=false HTTP/1.1\r\nHost: api.test\r\n" +
		"User-Agent: OpenAI/JS 6.30.1\r\nAccept: application/json\r\nContent-Type: application/json\r\n" +
		"X-API-Key: svc_live_0123456789abcdef0123456789abcdef\r\nContent-Length: 2\r\n\r\n{}"
	if err := in.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		b.Fatal(err)
	}
	var rc fasthttp.RequestCtx
	rc.Init(&in, clientAddr, nil)
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Sun, 22 Nov 2026 10:00:00 GMT\r\n" +
		"X-Request-Id: abc\r\nContent-Length: 1024\r\n\r\n")
	res := keys.AuthResult{Limit: ratelimit.Decision{Allowed: true, Limit: 1000, Used: 1, Remaining: 999, Reset: 1795345200}}
	suffix := []byte("/v1/chat/completions")
	head := make([]byte, 0, 1024)
	b.Run("request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			head = appendUpstreamHead(head[:0], &rc, up, suffix, res)
		}
	})
	b.Run("response", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rc.Response.Header.Reset()
			h, _, err := relay.ParseHead(answer, false)
			if err != nil {
				b.Fatal(err)
			}
			copyResponseHeader(&rc, &h)
			srv.setLimitHeaders(&rc.Response.Header, res.Limit)
		}
	})
	b.Run("limit-headers", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			srv.setLimitHeaders(&rc.Response.Header, res.Limit)
		}
	})
}
