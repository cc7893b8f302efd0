package bench

import (
	"bufio"
	"bytes"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"gatehouse/httpapi"
)

// The in-process proxy benchmarks run client, proxy and stub upstream in
// one process over loopback TCP, so that one CPU profile shows all of
// the proxy's costs:
//
//	go test ./bench -run '^$' -bench 'Proxy' -cpuprofile cpu.prof
//	go tool pprof -top -focus 'httpapi|actors' bench.test cpu.prof
//
// The side-by-side figures come from cmd/benchsuite, where each server
// has its own process.

// BenchmarkProxyGatehouse: GET through gatehouse's handler (real actor
// system, one hot key) to the stub, 64 client goroutines.
func BenchmarkProxyGatehouse(b *testing.B) {
	addr, secrets := serveGatehouse(b, 1, serveLoopback(b, Upstream(JSONBody(1024))))
	benchClient(b, addr, ProxyRequest(string(secrets[0])))
}

// BenchmarkProxyBareHop is the same through the bare fasthttp hop.
func BenchmarkProxyBareHop(b *testing.B) {
	up := serveLoopback(b, Upstream(JSONBody(1024)))
	hop := serveLoopback(b, BareHop(up))
	benchClient(b, hop, ProxyRequest("none"))
}

// serveGatehouse serves gatehouse's handler (real actor system with keys
// keys, NewSystem) on loopback, its service ServiceName proxying to the
// upstream at host:port; it returns its address and the keys' secrets.
func serveGatehouse(tb testing.TB, keys int, upstream string) (string, [][]byte) {
	tb.Helper()
	sys, secrets := NewSystem(tb, keys)
	cfg := httpapi.DefaultConfig()
	cfg.Services = map[string]httpapi.Service{ServiceName: {Upstream: "http://" + upstream}}
	srv, err := httpapi.New(cfg, sys.Keys, sys.Accounts, nil, prometheus.NewRegistry(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := listenLoopback()
	if err != nil {
		tb.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Shutdown(tb.Context()) })
	return ln.Addr().String(), secrets
}

func serveLoopback(tb testing.TB, h fasthttp.RequestHandler) string {
	tb.Helper()
	ln, err := listenLoopback()
	if err != nil {
		tb.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: h, NoDefaultServerHeader: true}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

// benchClient sends raw, a GET, to addr from 64 goroutines.
func benchClient(b *testing.B, addr string, raw []byte) {
	b.Helper()
	c := &fasthttp.HostClient{Addr: addr, MaxConns: 128, Dial: func(a string) (net.Conn, error) { return net.Dial("tcp", a) }}
	var tmpl fasthttp.Request
	if err := tmpl.Read(bufio.NewReader(bytes.NewReader(raw))); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(32)
	cpu0 := selfCPU()
	defer func() {
		// CPU time per request of the whole process (client, proxy and
		// stub alike): steadier than wall time on a shared machine.
		b.ReportMetric(float64(selfCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	}()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var req fasthttp.Request
		var resp fasthttp.Response
		tmpl.CopyTo(&req)
		for pb.Next() {
			if err := c.Do(&req, &resp); err != nil || resp.StatusCode() != 200 {
				b.Errorf("Do = %d, %v", resp.StatusCode(), err)
				return
			}
		}
	})
}
