package listener

import (
	"bufio"
	"context"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// serveLimited serves a Listener answering 200 on ln; it is shut down at
// cleanup.
func serveLimited(t *testing.T, ln net.Listener, reg *prometheus.Registry) {
	t.Helper()
	l, err := New(Options{Name: "test", Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	l.SetHandler(func(rc *fasthttp.RequestCtx) { rc.SetStatusCode(fasthttp.StatusOK) })
	done := make(chan error, 1)
	go func() { done <- l.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := l.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown() = %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve() = %v, want nil", err)
		}
	})
}

// dialFrom connects from the loopback address from.
func dialFrom(t *testing.T, from string, addr net.Addr) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// statusOf sends a GET on c and returns the answer's status code ("" if
// none came within a second).
func statusOf(c net.Conn) string {
	_ = c.SetDeadline(time.Now().Add(time.Second))
	_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	line, _ := bufio.NewReader(c).ReadString('\n')
	if len(line) < 12 {
		return ""
	}
	return line[9:12]
}

// TestConnsBudget: one budget over two listeners; beyond the per-address
// cap 429, beyond the total 503, each answered and closed, counted; a
// closed connection gives its place back.
func TestConnsBudget(t *testing.T) {
	b := NewConns(3, 2)
	reg := prometheus.NewRegistry()
	var lns [2]net.Listener
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		serveLimited(t, b.Limit(ln), reg)
	}
	var held []net.Conn
	for _, tt := range []struct {
		name, from string
		ln         int
		want       string
	}{
		{"first of 127.0.0.1", "127.0.0.1", 0, "200"},
		{"second of 127.0.0.1, other listener", "127.0.0.1", 1, "200"},
		{"third of 127.0.0.1", "127.0.0.1", 0, "429"},
		{"first of 127.0.0.2", "127.0.0.2", 1, "200"},
		{"first of 127.0.0.3, server full", "127.0.0.3", 0, "503"},
	} {
		c := dialFrom(t, tt.from, lns[tt.ln].Addr())
		if got := statusOf(c); got != tt.want {
			t.Errorf("%s: status %q, want %q", tt.name, got, tt.want)
		}
		held = append(held, c)
	}
	if got := metricSum(t, reg, "gatehouse_http_connections_open", nil); got != 3 {
		t.Errorf("connections open = %v, want 3", got)
	}
	for reason, want := range map[string]float64{refusedPerAddr: 1, refusedTotal: 1} {
		if got := refusedCount(t, reg, reason); got != want {
			t.Errorf("refused{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	held[0].Close()
	c := dialFrom(t, "127.0.0.3", lns[0].Addr())
	var got string
	deadline := time.Now().Add(3 * time.Second)
	for got = statusOf(c); got != "200" && time.Now().Before(deadline); got = statusOf(c) {
		c = dialFrom(t, "127.0.0.3", lns[0].Addr())
	}
	if got != "200" {
		t.Errorf("after a close: status %q, want 200", got)
	}
}

func refusedCount(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	return metricSum(t, reg, "gatehouse_http_connections_refused_total", map[string]string{"reason": reason})
}

// metricSum sums the samples of family name whose labels include want.
func metricSum(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := want[lp.GetName()]; ok && v != lp.GetValue() {
					continue metrics
				}
			}
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}

// emfileListener fails its first n Accepts as accept4 does when the
// process is out of file descriptors.
type emfileListener struct {
	net.Listener
	n atomic.Int32
}

func (e *emfileListener) Accept() (net.Conn, error) {
	if e.n.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return e.Listener.Accept()
}

// TestAcceptRetriesEMFILE: EMFILE pauses accepting instead of ending
// Serve (fasthttp returns on it: issue 31).
func TestAcceptRetriesEMFILE(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &emfileListener{Listener: ln}
	e.n.Store(4)
	reg := prometheus.NewRegistry()
	serveLimited(t, e, reg)
	if got := statusOf(dialFrom(t, "127.0.0.1", ln.Addr())); got != "200" {
		t.Fatalf("status %q after EMFILE, want 200", got)
	}
	if got := metricSum(t, reg, "gatehouse_http_accept_retries_total", nil); got != 4 {
		t.Errorf("accept retries = %v, want 4", got)
	}
}
