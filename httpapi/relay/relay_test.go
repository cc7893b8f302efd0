package relay

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// script is one scripted answer: the bytes the upstream writes, and
// whether it closes the connection after them.
type script struct {
	answer string
	close  bool
}

// seen is a request as the scripted upstream read it.
type seen struct {
	conn int // which connection (1 = first accepted)
	req  *http.Request
	body string
}

// scriptedUpstream is a loopback listener that answers each request it
// reads (parsed by net/http, another implementation) with the next
// script, byte for byte.
type scriptedUpstream struct {
	addr    string
	answers chan script
	seen    chan seen
	conns   atomic.Int32
}

func newScripted(t *testing.T) *scriptedUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &scriptedUpstream{addr: ln.Addr().String(), answers: make(chan script, 16), seen: make(chan seen, 16)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := int(u.conns.Add(1))
			t.Cleanup(func() { c.Close() })
			go u.serve(c, n)
		}
	}()
	return u
}

func (u *scriptedUpstream) serve(c net.Conn, n int) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, _ := io.ReadAll(req.Body)
		u.seen <- seen{conn: n, req: req, body: string(body)}
		s := <-u.answers
		if _, err := io.WriteString(c, s.answer); err != nil || s.close {
			return
		}
	}
}

func (u *scriptedUpstream) pool(maxConns int) *Pool {
	return u.poolWith(Config{MaxConns: maxConns, MaxConnWait: 200 * time.Millisecond})
}

// emptyExchange sends one GET through p to u, answered 200 with no body,
// and releases the answer: its connection goes back to p idle.
func (u *scriptedUpstream) emptyExchange(t *testing.T, p *Pool) {
	t.Helper()
	u.answers <- script{answer: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"}
	var resp Response
	if err := p.Do(get("/"), &resp); err != nil {
		t.Fatal(err)
	}
	<-u.seen
	resp.Release()
}

// poolWith is a pool of connections to u configured as cfg (its Dial set).
func (u *scriptedUpstream) poolWith(cfg Config) *Pool {
	cfg.Dial = func() (net.Conn, error) { return net.DialTimeout("tcp", u.addr, time.Second) }
	return New(cfg)
}

func get(path string) *Request {
	return &Request{Head: []byte("GET " + path + " HTTP/1.1\r\nHost: up\r\n"), Idempotent: true}
}

// TestFraming: each way an answer's body is framed, read through the
// relay from a real connection; the connection goes back to the pool
// only when the framing let the body end without the upstream closing.
func TestFraming(t *testing.T) {
	tests := []struct {
		name     string
		isHead   bool
		answer   string
		status   int
		body     string
		length   int64 // Head.ContentLength
		reused   bool  // the next exchange rides the same connection
		wantErr  error // from Do
		readErr  error // from reading the body
		wantLine string
	}{
		{name: "content-length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhello", status: 200, body: "hello", length: 5, reused: true, wantLine: "X-A: 1"},
		{name: "chunked, extensions and trailer", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n", status: 200, body: "hello world", length: -1, reused: true},
		{name: "chunked, upper-case hex", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n", status: 200, body: "0123456789", length: -1, reused: true},
		{name: "until close", answer: "HTTP/1.1 200 OK\r\nX-A: 1\r\n\r\nto the end", status: 200, body: "to the end", length: -1},
		{name: "bare LF lines", answer: "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", status: 200, body: "ok", length: 2, reused: true},
		{name: "interim answers skipped", answer: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok", status: 201, body: "ok", length: 2, reused: true},
		{name: "HEAD keeps its length, has no body", isHead: true, answer: "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n", status: 200, length: 100000, reused: true},
		{name: "204 without body", answer: "HTTP/1.1 204 No Content\r\n\r\n", status: 204, length: -1, reused: true},
		{name: "304 with a length, no body", answer: "HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n", status: 304, length: 50, reused: true},
		{name: "HTTP/1.0", answer: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", status: 200, body: "ok", length: 2},
		{name: "HTTP/1.0 keep-alive", answer: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", status: 200, body: "ok", length: 2, reused: true},
		{name: "Connection: close", answer: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", status: 200, body: "ok", length: 2},
		{name: "length and chunked: chunked wins, not reused", answer: "HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", status: 200, body: "ok", length: -1},
		{name: "repeated equal lengths", answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2, 2\r\n\r\nok", status: 200, body: "ok", length: 2, reused: true},
		{name: "differing lengths", answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok", wantErr: ErrMalformed},
		{name: "bad status line", answer: "HTTP/2 200 OK\r\n\r\n", wantErr: ErrMalformed},
		{name: "folded header", answer: "HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 0\r\n\r\n", wantErr: ErrMalformed},
		{name: "space before colon", answer: "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n", wantErr: ErrMalformed},
		{name: "unasked upgrade", answer: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", wantErr: ErrMalformed},
		{name: "body cut short", answer: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", status: 200, body: "hello", length: 10, readErr: io.ErrUnexpectedEOF},
		{name: "bad chunk size", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n", status: 200, length: -1, readErr: ErrMalformed},
		{name: "chunk without CRLF", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXY0\r\n\r\n", status: 200, body: "ok", length: -1, readErr: ErrMalformed},
		{name: "chunked cut short", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", status: 200, body: "hel", length: -1, readErr: io.ErrUnexpectedEOF},
		{name: "nothing at all", answer: "", wantErr: io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newScripted(t)
			p := u.pool(0)
			defer p.CloseIdle()
			req := get("/x")
			req.IsHead = tt.isHead
			req.Idempotent = false // each error once
			// An answer that is not complete ends with the upstream closing.
			u.answers <- script{answer: tt.answer, close: tt.wantErr != nil || tt.readErr != nil || !tt.reused}
			var resp Response
			err := p.Do(req, &resp)
			first := <-u.seen
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Do = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != tt.status || resp.ContentLength != tt.length {
				t.Errorf("status %d length %d, want %d %d", resp.Status, resp.ContentLength, tt.status, tt.length)
			}
			if tt.wantLine != "" && !bytes.Contains(resp.Lines, []byte(tt.wantLine)) {
				t.Errorf("header lines %q lack %q", resp.Lines, tt.wantLine)
			}
			body, err := io.ReadAll(&resp)
			resp.Release()
			if string(body) != tt.body || !errors.Is(err, tt.readErr) && (tt.readErr != nil || err != nil) {
				t.Fatalf("body %q, %v; want %q, %v", body, err, tt.body, tt.readErr)
			}
			if tt.readErr != nil {
				return
			}
			u.answers <- script{answer: "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext"}
			if err := p.Do(get("/next"), &resp); err != nil {
				t.Fatal(err)
			}
			body, err = io.ReadAll(&resp)
			resp.Release()
			second := <-u.seen
			if string(body) != "next" || err != nil {
				t.Fatalf("next body %q, %v", body, err)
			}
			if reused := second.conn == first.conn; reused != tt.reused {
				t.Errorf("next exchange on connection %d after %d: reused %v, want %v", second.conn, first.conn, reused, tt.reused)
			}
		})
	}
}

// TestRequestFraming: what the upstream reads of each kind of request
// body.
func TestRequestFraming(t *testing.T) {
	big := strings.Repeat("y", 100<<10)
	tests := []struct {
		name    string
		req     Request
		length  int64
		chunked bool
		body    string
	}{
		{"no body", Request{}, 0, false, ""},
		{"empty body with length", Request{SendLength: true}, 0, false, ""},
		{"buffered", Request{Body: []byte("hello")}, 5, false, "hello"},
		{"stream with length", Request{BodyStream: strings.NewReader(big), BodyLen: int64(len(big))}, int64(len(big)), false, big},
		{"stream chunked", Request{BodyStream: strings.NewReader(big), BodyLen: -1}, -1, true, big},
		{"empty stream chunked", Request{BodyStream: strings.NewReader(""), BodyLen: -1}, -1, true, ""},
	}
	u := newScripted(t)
	p := u.pool(1)
	defer p.CloseIdle()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req
			req.Head = []byte("POST /up HTTP/1.1\r\nHost: up\r\nX-Keep: a b\r\n")
			u.answers <- script{answer: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"}
			var resp Response
			if err := p.Do(&req, &resp); err != nil {
				t.Fatal(err)
			}
			resp.Release()
			s := <-u.seen
			chunked := len(s.req.TransferEncoding) > 0
			if s.req.ContentLength != tt.length || chunked != tt.chunked || s.body != tt.body || s.req.Header.Get("X-Keep") != "a b" {
				t.Errorf("upstream read length %d chunked %v body %d bytes, headers %v", s.req.ContentLength, chunked, len(s.body), s.req.Header)
			}
		})
	}
}

// TestRetry: an idempotent request whose kept-alive connection the
// upstream closed meanwhile is sent again on a new one; any other
// request fails, as does a stream (it cannot be read twice).
func TestRetry(t *testing.T) {
	for _, tc := range []struct {
		name  string
		req   func() *Request
		retry bool
	}{
		{"GET", func() *Request { return get("/r") }, true},
		{"POST", func() *Request { return &Request{Head: []byte("POST /r HTTP/1.1\r\nHost: up\r\n"), SendLength: true} }, false},
		{"GET with a stream", func() *Request {
			r := get("/r")
			r.BodyStream, r.BodyLen = strings.NewReader("x"), 1
			return r
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newScripted(t)
			p := u.pool(0)
			defer p.CloseIdle()
			// The first exchange's connection is closed right after it, as
			// an upstream's idle timeout would.
			u.answers <- script{answer: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", close: true}
			var resp Response
			if err := p.Do(get("/first"), &resp); err != nil {
				t.Fatal(err)
			}
			resp.Release()
			<-u.seen
			time.Sleep(50 * time.Millisecond) // the close reaches us
			u.answers <- script{answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"}
			err := p.Do(tc.req(), &resp)
			if tc.retry {
				if err != nil {
					t.Fatalf("retried request = %v", err)
				}
				resp.Release()
				if s := <-u.seen; s.conn != 2 {
					t.Errorf("answered on connection %d, want a new one", s.conn)
				}
				return
			}
			if err == nil {
				resp.Release()
				t.Fatal("a request that may not be sent twice was retried")
			}
			<-u.answers
		})
	}
}

// TestMaxConns: with every connection busy, a request waits up to
// MaxConnWait for one, then fails with ErrNoFreeConns; a connection
// released meanwhile serves it.
func TestMaxConns(t *testing.T) {
	u := newScripted(t)
	p := u.pool(1)
	defer p.CloseIdle()
	u.answers <- script{answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"}
	var busy Response
	if err := p.Do(get("/a"), &busy); err != nil {
		t.Fatal(err)
	}
	<-u.seen
	start := time.Now()
	var resp Response
	if err := p.Do(get("/b"), &resp); !errors.Is(err, ErrNoFreeConns) || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("with the only connection busy: %v after %v, want ErrNoFreeConns after 200ms", err, time.Since(start))
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = io.Copy(io.Discard, &busy)
		busy.Release()
	}()
	u.answers <- script{answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"}
	if err := p.Do(get("/c"), &resp); err != nil {
		t.Fatalf("after the connection came back: %v", err)
	}
	resp.Release()
	if s := <-u.seen; s.conn != 1 {
		t.Errorf("served on connection %d, want the released 1", s.conn)
	}
}

// TestBuffered: a small answer's whole body is handed over from the
// read buffer, and Skip leaves the connection ready for the next one.
func TestBuffered(t *testing.T) {
	u := newScripted(t)
	p := u.pool(1)
	defer p.CloseIdle()
	for range 2 {
		u.answers <- script{answer: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"}
		var resp Response
		if err := p.Do(get("/"), &resp); err != nil {
			t.Fatal(err)
		}
		<-u.seen
		var b []byte
		for b == nil { // the body may come in a later packet
			if b = resp.Buffered(); b == nil {
				time.Sleep(time.Millisecond)
				_, _ = resp.c.br.Peek(5)
			}
		}
		if string(b) != "hello" {
			t.Fatalf("Buffered = %q", b)
		}
		resp.Skip()
		resp.Release()
	}
	if n := u.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestIdleConnectionsClosed: a connection idle past IdleTimeout is closed
// without a request coming (the sweeper), and one released after Close
// is closed rather than kept.
func TestIdleConnectionsClosed(t *testing.T) {
	u := newScripted(t)
	p := u.poolWith(Config{MaxConnWait: time.Second, IdleTimeout: 50 * time.Millisecond})
	u.emptyExchange(t, p)
	deadline := time.Now().Add(2 * time.Second)
	for len(p.sem) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(p.sem); n != 0 {
		t.Fatalf("%d connections open after the idle timeout", n)
	}

	u.answers <- script{answer: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"}
	var resp Response
	if err := p.Do(get("/"), &resp); err != nil {
		t.Fatal(err)
	}
	<-u.seen
	p.Close()
	resp.Release()
	if n := len(p.sem); n != 0 {
		t.Errorf("%d connections open after Close and the exchange's end", n)
	}
}

// TestCloseStopsTheSweeper: Close ends the sweeper at once, not at its
// next tick (a quarter of IdleTimeout): a closed pool leaves no goroutine.
func TestCloseStopsTheSweeper(t *testing.T) {
	u := newScripted(t)
	p := u.poolWith(Config{MaxConnWait: time.Second, IdleTimeout: time.Hour})
	u.emptyExchange(t, p)
	if !p.sweeper.Load() {
		t.Fatal("no sweeper runs with an idle connection open")
	}
	p.Close()
	deadline := time.Now().Add(time.Second)
	for p.sweeper.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if p.sweeper.Load() || len(p.sem) != 0 {
		t.Fatalf("after Close: sweeper running %v, %d connections open", p.sweeper.Load(), len(p.sem))
	}
}
