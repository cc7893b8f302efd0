package httpapi

import (
	"context"
	"gatehouse/actors/keys"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// BenchmarkProxyExchange is one whole proxied request, in process: the
// test client over the in-memory listener, gatehouse (auth, limit, the
// upstream exchange) and a fasthttp upstream on loopback TCP. Besides
// ns/op (wall time, the three taking turns) it reports the process's
// CPU time per request (user+system, getrusage): the client's and the
// upstream's share is the same whatever gatehouse does, so a change to
// the proxy path shows as a change of cpu-ns/op. It uses only helpers
// older than httpapi/relay, so that it can be run on a commit before it
// and alternated with the one after.
func BenchmarkProxyExchange(b *testing.B) {
	p := newTestEnv(b, withProxyUpstreams())
	limit := int64(1e9)
	if _, err := p.sys.UpdateKey(context.Background(), p.keyIDOf(b, p.secret), keys.KeyPatch{RateLimit: &limit}); err != nil {
		b.Fatal(err)
	}
	for _, method := range []string{"GET", "POST"} {
		b.Run(method, func(b *testing.B) {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI("http://" + testHost + "/api/proxy/echo/v1/chat/completions?stream=false")
			req.Header.SetMethod(method)
			req.Header.Set("X-API-Key", p.secret)
			req.Header.Set("User-Agent", "OpenAI/JS 6.30.1")
			req.Header.Set("Accept", "application/json")
			if method == "POST" {
				req.Header.SetContentType("application/json")
				req.SetBodyString(`{"model":"m","messages":[]}`)
			}
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				if err := p.client.DoTimeout(req, resp, 10*time.Second); err != nil || resp.StatusCode() != 202 {
					b.Fatalf("= %d %v", resp.StatusCode(), err)
				}
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's user+system CPU time so far, in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
