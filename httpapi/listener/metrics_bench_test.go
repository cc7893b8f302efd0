package listener

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// BenchmarkRouteMetrics is the per-request cost of counting an answer.
func BenchmarkRouteMetrics(b *testing.B) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	obs := m.forRoute("api", "/api/keys/validate")
	var rc fasthttp.RequestCtx
	rc.Request.Header.SetMethod(fasthttp.MethodPost)
	rc.Response.SetStatusCode(200)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			obs.record(&rc, time.Millisecond)
		}
	})
}
