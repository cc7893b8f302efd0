package listener

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// Closing a connection that still has unread request bytes makes the
// kernel answer them with a TCP reset, and a reset can destroy the answer
// the client has not read yet: a client sending 8 MB to a 1 MiB limit saw
// "connection reset" instead of the 413. So, like nginx's lingering
// close, every server connection closes in two steps: first the write side
// (the client reads the whole answer and then end-of-stream), then, after
// the client's unread bytes are drained and dropped, the socket.
const (
	// LingerTimeout bounds the second step: a client that keeps sending
	// longer is cut off.
	LingerTimeout = 2 * time.Second
	// lingerMax bounds the bytes drained, whatever the time.
	lingerMax = 64 << 20
)

// gracefulListener hands out gracefulConns for TCP connections, holds
// them to its budget and retries Accept when the process is out of file
// descriptors (limit.go).
type gracefulListener struct {
	net.Listener
	lingering *lingerSet
	conns     *Conns // nil: no caps
	m         connMetrics
	lg        *slog.Logger

	closeOnce      sync.Once
	closed         chan struct{} // closed by Close: ends a retry pause
	refusing       chan struct{} // a slot per refused connection draining
	lastRefusalLog atomic.Int64  // unix seconds
}

// newGracefulListener wraps ln (with its budget, if Conns.Limit marked
// it); m nil: metrics not exported, lg nil: no logs.
func newGracefulListener(ln net.Listener, lingering *lingerSet, m *metrics, name string, lg *slog.Logger) *gracefulListener {
	if m == nil {
		m, _ = newMetrics(prometheus.NewRegistry())
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	g := &gracefulListener{Listener: ln, lingering: lingering, m: m.forListener(name), lg: lg,
		closed: make(chan struct{}), refusing: make(chan struct{}, maxRefusing)}
	if lim, ok := ln.(limited); ok {
		g.Listener, g.conns = lim.Listener, lim.conns
	}
	return g
}

// Accept returns the next connection within the caps; it retries while
// the process is out of file descriptors and refuses (answers and closes)
// connections over a cap.
func (g *gracefulListener) Accept() (net.Conn, error) {
	var pause time.Duration
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			if !fdExhausted(err) {
				return nil, err
			}
			if pause = g.acceptRetry(err, pause); pause == 0 {
				return nil, net.ErrClosed
			}
			continue
		}
		if pause > 0 {
			g.lg.Info("accepting again after running out of file descriptors")
			pause = 0
		}
		tc, ok := c.(*net.TCPConn)
		if !ok {
			return c, nil
		}
		addr := remoteAddr(tc)
		if reason := g.conns.take(addr); reason != "" {
			g.refuse(tc, reason)
			continue
		}
		g.m.open.Inc()
		return &gracefulConn{TCPConn: tc, set: g.lingering, owner: g, addr: addr}, nil
	}
}

// Close closes the listener and ends a retry pause.
func (g *gracefulListener) Close() error {
	g.closeOnce.Do(func() { close(g.closed) })
	return g.Listener.Close()
}

// gracefulConn is a server connection whose Close shuts the write side at
// once and drains the read side in the background before closing.
type gracefulConn struct {
	*net.TCPConn
	set      *lingerSet
	owner    *gracefulListener // nil: not counted
	addr     netip.Addr        // the client's, for owner's budget
	once     sync.Once
	noLinger atomic.Bool
	phase    atomic.Uint64 // phase and its start (timeouts.go)
	reads    atomic.Int32  // reads in progress
}

// Hijacked marks a connection taken over from the server (a WebSocket's):
// its Close is then an ordinary close, which also wakes a goroutine
// blocked reading it.
func Hijacked(conn net.Conn) {
	if c, ok := conn.(*gracefulConn); ok {
		c.noLinger.Store(true)
	}
}

// Close returns at once; the socket closes when the client has stopped
// sending (EOF), after LingerTimeout, or after lingerMax bytes.
func (c *gracefulConn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		if c.noLinger.Load() || c.TCPConn.CloseWrite() != nil { // already broken: nothing to save
			err = c.closeSocket()
			return
		}
		err = nil
		c.set.add()
		go c.linger()
	})
	return err
}

// closeSocket closes the socket and gives its place back to the budget.
func (c *gracefulConn) closeSocket() error {
	err := c.TCPConn.Close()
	if c.owner != nil {
		c.owner.conns.release(c.addr)
		c.owner.m.open.Dec()
	}
	return err
}

func (c *gracefulConn) linger() {
	defer c.set.done()
	_ = c.TCPConn.SetReadDeadline(time.Now().Add(LingerTimeout))
	_, _ = io.CopyN(io.Discard, c.TCPConn, lingerMax)
	_ = c.closeSocket()
}

// lingerSet counts the connections still draining. Unlike a WaitGroup it
// may grow while Shutdown waits: hijacked (WebSocket) connections close
// whenever their handler ends.
type lingerSet struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while n is 0
}

func (s *lingerSet) add() {
	s.mu.Lock()
	if s.n++; s.n == 1 {
		s.idle = make(chan struct{})
	}
	s.mu.Unlock()
}

func (s *lingerSet) done() {
	s.mu.Lock()
	if s.n--; s.n == 0 {
		close(s.idle)
		s.idle = nil
	}
	s.mu.Unlock()
}

// wait returns when no connection is draining, or with ctx's error.
func (s *lingerSet) wait(ctx context.Context) error {
	s.mu.Lock()
	idle := s.idle
	s.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrFraming: the request's length is ambiguous (Content-Length with
// Transfer-Encoding: chunked) or a header is folded over lines
// (obs-fold). Two parsers on the path may read such a request
// differently, the root of request smuggling, so it is refused and its
// connection closed (RFC 9112 §6.1, §5.2). fasthttp accepts both and
// keeps the connection.
var ErrFraming = fmt.Errorf("%w: ambiguous message framing or folded header", ErrMalformed)

// checkFraming reports whether h frames its body unambiguously. The
// common request (no chunked body) costs two vectorised byte searches.
// (fasthttp itself refuses a Transfer-Encoding other than chunked or
// identity, repeated Transfer-Encoding or Content-Length headers, and
// uses the Content-Length when Transfer-Encoding is identity.)
func checkFraming(h *fasthttp.RequestHeader) error {
	raw := h.RawHeaders()
	if bytes.Contains(raw, foldSP) || bytes.Contains(raw, foldHT) {
		return ErrFraming
	}
	if h.ContentLength() == -1 && hasHeaderLine(raw, contentLength) {
		return ErrFraming
	}
	return nil
}

var (
	foldSP        = []byte("\n ")
	foldHT        = []byte("\n\t")
	contentLength = []byte("content-length:")
)

// hasHeaderLine reports whether a line of raw starts with name (lower
// case, with its colon), in any case.
func hasHeaderLine(raw, name []byte) bool {
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if len(line) >= len(name) && bytes.EqualFold(line[:len(name)], name) {
			return true
		}
	}
	return false
}
