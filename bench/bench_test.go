package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	for i := 1; i <= 10000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	tests := []struct {
		q    float64
		want time.Duration
	}{{0.5, 5000 * time.Microsecond}, {0.99, 9900 * time.Microsecond}, {0.999, 9990 * time.Microsecond}, {1, 10 * time.Millisecond}}
	for _, tt := range tests {
		got := h.Quantile(tt.q)
		if d := got - tt.want; d < -tt.want/64 || d > tt.want/64 {
			t.Errorf("Quantile(%v) = %v, want %v ± 1/64", tt.q, got, tt.want)
		}
	}
	var small Histogram
	small.Record(7)
	if got := small.Quantile(0.5); got != 7 {
		t.Errorf("Quantile of one 7 ns sample = %v", got)
	}
	if h.Count() != 10000 || h.Max() != 10*time.Millisecond {
		t.Errorf("Count, Max = %d, %v", h.Count(), h.Max())
	}
}

func TestParseResponse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		n       int // -1: all of in
		status  int
		closing bool
		err     bool
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcNEXT", 41, 200, false, false},
		{"incomplete body", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nab", 0, 200, false, false},
		{"incomplete header", "HTTP/1.1 200 OK\r\nContent-Len", 0, 0, false, false},
		{"chunked", "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\n\r\n", -1, 201, false, false},
		{"chunked incomplete", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", 0, 200, false, false},
		{"close", "HTTP/1.1 429 Too Many Requests\r\nconnection: close\r\ncontent-length: 0\r\n\r\n", -1, 429, true, false},
		{"no length", "HTTP/1.1 200 OK\r\n\r\nabc", 0, 200, true, true},
		{"garbage", "SSH-2.0\r\n\r\n", 0, 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.n == -1 {
				tt.n = len(tt.in)
			}
			n, status, closing, err := parseResponse([]byte(tt.in))
			if n != tt.n || status != tt.status || closing != tt.closing || (err != nil) != tt.err {
				t.Errorf("parseResponse = %d, %d, %v, %v; want %d, %d, %v, err %v", n, status, closing, err, tt.n, tt.status, tt.closing, tt.err)
			}
		})
	}
}

// TestRunSpreadsRequests loads a counting server briefly and checks that
// every request of the list was sent, about equally often.
func TestRunSpreadsRequests(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	addr := serveLoopback(t, func(rc *fasthttp.RequestCtx) {
		mu.Lock()
		seen[string(rc.Request.Header.Peek("X-API-Key"))]++
		mu.Unlock()
		rc.SetBody(JSONBody(100))
	})
	var reqs [][]byte
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		reqs = append(reqs, ProxyRequest(k))
	}
	res, err := Run(context.Background(), Load{Addr: addr, Requests: reqs, Conns: 4, Warmup: 50 * time.Millisecond, Duration: 300 * time.Millisecond, Status: 200})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.Requests < 50 || res.Latency.Count() != uint64(res.Requests) {
		t.Fatalf("Run = %d requests, %d errors (%v)", res.Requests, res.Errors, res.FirstErr)
	}
	mu.Lock()
	defer mu.Unlock()
	lo, hi := 1<<30, 0
	for _, n := range seen {
		lo, hi = min(lo, n), max(hi, n)
	}
	if len(seen) != 5 || hi > 2*lo+8 {
		t.Errorf("requests per key = %v, want all five about equally", seen)
	}
	if _, err := Run(context.Background(), Load{Addr: addr, Requests: reqs, Conns: 1, Duration: 100 * time.Millisecond, Status: 201}); err == nil {
		t.Error("Run with the wrong expected status succeeded")
	}
}

func TestNginxConfig(t *testing.T) {
	conf := NginxConfig("/tmp/x", "127.0.0.1:8081", "127.0.0.1:9000")
	for _, want := range []string{"daemon off;", "server 127.0.0.1:9000;", "keepalive 128;", "listen 127.0.0.1:8081", `proxy_set_header Connection "";`, "proxy_http_version 1.1;", "pid /tmp/x/nginx.pid;"} {
		if !strings.Contains(conf, want) {
			t.Errorf("config lacks %q:\n%s", want, conf)
		}
	}
}

func TestAppendResultsKeepsSections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "RESULTS.md")
	if err := os.WriteFile(path, []byte("# Benchmark results\n\n## core\n\nfigures\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := AppendResults(path, "## proxy\n\ntable\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if want := "# Benchmark results\n\n## core\n\nfigures\n\n## proxy\n\ntable\n"; string(b) != want {
		t.Errorf("file = %q, want %q", b, want)
	}
}

func TestReport(t *testing.T) {
	round := func(rps float64, lat time.Duration) *Result {
		r := &Result{Requests: int64(rps), Elapsed: time.Second}
		for range 100 {
			r.Latency.Record(lat)
		}
		return r
	}
	s := &Suite{cfg: DefaultConfig(), Nginx: "nginx/1.22.1", HAProxy: "HAProxy 2.6.12"}
	for _, x := range []struct {
		kind string
		rps  float64
		cpu  time.Duration // per round; the second round is 5/4 of it
		keys int
	}{
		{KindDirect, 100000, time.Second, 1}, {KindBare, 40000, time.Second, 1}, {KindNginx, 30000, time.Second, 1},
		{KindGateway, 36000, 1800 * time.Millisecond, 1}, {KindNginxLua, 35000, 1400 * time.Millisecond, 1}, {KindHAProxy, 30000, 1500 * time.Millisecond, 1},
		{KindGateway, 30000, 1500 * time.Millisecond, 2}, {KindNginxLua, 29000, 1740 * time.Millisecond, 2}, {KindHAProxy, 29000, 1595 * time.Millisecond, 2},
		{KindFixed, 100000, time.Second, 1}, {KindValidate, 90000, time.Second, 1},
	} {
		s.Targets = append(s.Targets, &Target{Name: fmt.Sprintf("%s %d", x.kind, x.keys), Kind: x.kind,
			Rounds:   []*Result{round(x.rps, time.Millisecond), round(x.rps, time.Millisecond)},
			RoundCPU: []time.Duration{x.cpu, x.cpu * 5 / 4}, Latency: round(x.rps/10, 100*time.Microsecond),
			Requests: make([][]byte, x.keys), Wrk: []float64{x.rps * 1.1}})
	}
	out := s.Report(Meta{Date: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), Command: "make bench"})
	for _, want := range []string{
		"## 2026-11-22 10:00 UTC", "HAProxy 2.6.12",
		"| gatehouse 1 | 36,000 | 36,000–36,000 | 1000 µs | 1000 µs | 1000 µs | 50.0 µs |", "| 0.90 | 1.20 | 39,600 | 0.90 | 0 |",
		// CPU/req: 50 µs vs 40 and 50; req/s vs 35,000 and 30,000.
		"| gatehouse 1 | 50.0 µs | 40.0 µs | 50.0 µs | 1.25 | 1.00 | 1.03 | 1.20 |",
		"| gatehouse 2 | 50.0 µs | 60.0 µs | 55.0 µs | 0.83 | 0.91 | 1.03 | 1.03 |",
		"✘ gatehouse 1: CPU/req 1.25× the better peer's (target ≤ 1.0); ✔ req/s 1.03× nginx+Lua, 1.20× HAProxy",
		"✔ gatehouse 2: CPU/req 0.91× the better peer's",
		"✔ gatehouse 1: p99 1.00× the bare hop's (target ≤ 1.5); ✔ 0.90× the bare hop's req/s (target ≥ 0.90)",
		"✔ validate: 0.90× the bare fixed-body handler",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
