package httpapi

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gatehouse/httpapi/relay"
)

// TestDeadlineWheel: the upstream client without per-request deadlines
// (proxydeadline.go). A connection left idle past its last exchange's due
// time serves the next exchange; an exchange past the timeout fails with
// a timeout (504) after the timeout, not before; the wheel
// stops ticking once no connection is open.
func TestDeadlineWheel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ports := make(chan string, 16)
	srv := &fasthttp.Server{Handler: func(rc *fasthttp.RequestCtx) {
		ports <- rc.RemoteAddr().String()
		if string(rc.Path()) == "/slow" {
			time.Sleep(600 * time.Millisecond)
		}
		rc.SetBodyString("ok")
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })

	const timeout = 150 * time.Millisecond
	up, err := newUpstream("t", Service{Upstream: "http://" + ln.Addr().String(), Timeout: timeout, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (time.Duration, error) {
		req := relay.Request{Head: []byte("GET " + path + " HTTP/1.1\r\nHost: t\r\n"), Idempotent: true}
		var resp relay.Response
		start := time.Now()
		err := up.pool.Do(&req, &resp)
		if err == nil { // read the body to its end
			_, err = io.Copy(io.Discard, &resp)
			resp.Release()
		}
		return time.Since(start), err
	}
	if _, err := get("/"); err != nil {
		t.Fatal(err)
	}
	first := <-ports
	time.Sleep(3 * timeout) // idle well past the exchange's due time
	if _, err := get("/"); err != nil {
		t.Fatalf("the idle connection's next exchange: %v", err)
	}
	if again := <-ports; again != first {
		t.Errorf("second exchange came from %s, want the kept-alive %s", again, first)
	}
	took, err := get("/slow")
	if ue := (&upstreamError{up: up, err: err}); err == nil || !ue.timeout() {
		t.Fatalf("slow exchange: %v after %v, want a timeout (504)", err, took)
	}
	if took < timeout || took > timeout+time.Second/4 {
		t.Errorf("slow exchange timed out after %v, want %v (+ a tick)", took, timeout)
	}
	<-ports
	if _, err := get("/"); err != nil {
		t.Fatalf("after a timeout: %v", err)
	}
	<-ports
	up.pool.CloseIdle()
	upstreamWheel.mu.Lock()
	for c := range upstreamWheel.conns {
		if c.RemoteAddr().String() == ln.Addr().String() {
			t.Errorf("a closed connection to %s is still on the wheel", ln.Addr())
		}
	}
	upstreamWheel.mu.Unlock()
}

// TestDeadlineWheelStops: the wheel's goroutine runs only while a
// connection is open, and interrupts a blocked read past its due time.
func TestDeadlineWheelStops(t *testing.T) {
	w := &deadlineWheel{conns: map[*wheelConn]struct{}{}}
	a, b := net.Pipe()
	defer b.Close()
	c := newWheelConn(a, w, 30*time.Millisecond)
	go func() { _, _ = b.Read(make([]byte, 1)) }()
	// The exchange's clock starts at its first byte, inside Write, which
	// on a pipe returns only once the reader ran (milliseconds later on a
	// loaded machine): time it from before the Write.
	start := time.Now()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 1)) // nothing comes: the wheel interrupts it
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("blocked read = %v, want a timeout", err)
	}
	if took := time.Since(start); took < 30*time.Millisecond || took > time.Second {
		t.Errorf("interrupted after %v, want 30 ms + up to two ticks", took)
	}
	_ = c.Close()
	deadline := time.Now().Add(2 * time.Second)
	for {
		w.mu.Lock()
		running := w.running
		w.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("wheel still ticking with no connection open")
		}
		time.Sleep(wheelTick)
	}
}
