package httpapi

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"gatehouse/actors"
	"gatehouse/actors/ratelimit"
)

// BenchmarkProxyHeaders measures the proxy's header work per request, in
// memory: the upstream request built from a typical client request, the
// upstream's answer copied back, and the rate-limit headers set.
func BenchmarkProxyHeaders(b *testing.B) {
	sys := newTestSystem(b, DefaultConfig())
	srv, err := New(DefaultConfig(), sys, sys, nil, prometheus.NewRegistry(), nil)
	if err != nil {
		b.Fatal(err)
	}
	up, err := newUpstream("llm", Service{Upstream: "http://127.0.0.1:1/base", Headers: map[string]string{"X-Upstream-Token": "t"}})
	if err != nil {
		b.Fatal(err)
	}
	var in fasthttp.Request
	in.SetRequestURI("/api/proxy/llm/v1/chat/completions?stream=false")
	in.Header.SetHost("api.test")
	in.Header.Set("User-Agent", "OpenAI/JS 6.30.1")
	in.Header.Set("Accept", "application/json")
	in.Header.Set("Content-Type", "application/json")
	in.Header.Set("X-API-Key", "svc_live_0123456789abcdef0123456789abcdef")
	var rc fasthttp.RequestCtx
	rc.Init(&in, clientAddr, nil)
	var resp fasthttp.Response
	resp.Header.SetContentType("application/json")
	resp.Header.Set("Date", "Sun, 22 Nov 2026 10:00:00 GMT")
	resp.Header.Set("X-Request-Id", "abc")
	resp.SetBody(make([]byte, 1024))
	res := actors.AuthResult{Limit: ratelimit.Decision{Allowed: true, Limit: 1000, Used: 1, Remaining: 999, Reset: 1795345200}}
	suffix := []byte("/v1/chat/completions")
	var req fasthttp.Request
	b.Run("request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			req.Reset()
			buildUpstreamRequest(&req, &rc, up, suffix, res)
		}
	})
	b.Run("response", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rc.Response.Header.Reset()
			copyResponseHeader(&rc, &resp)
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
