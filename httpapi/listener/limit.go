package listener

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Every TCP connection a listener holds is a file descriptor of the
// process. When the process runs out of them, accept4 fails with EMFILE
// (or ENFILE, the system's table) and fasthttp's Serve returns, which
// stopped the listener and, through cmd/gatehouse, the process (issue 31:
// ~1,016 idle keep-alive connections from one client at a limit of
// 1,024). So:
//
//   - Accept retries EMFILE and ENFILE (and ENOBUFS, ENOMEM) after a pause
//     that doubles from 5 ms to 1 s, as net/http's Server.Serve does; the
//     connections waiting meanwhile stay in the kernel's backlog.
//   - A Conns budget, shared by the listeners of one process, caps the
//     connections open (MaxConns) and those from one client address
//     (MaxPerAddr) below the limit. A connection over a cap is accepted,
//     answered and closed (refuse), instead of being left in the
//     backlog, where its client would wait without an answer.

// Accept's pauses after running out of file descriptors.
const (
	acceptRetryFirst = 5 * time.Millisecond
	acceptRetryMax   = time.Second
)

// A refused connection gets its answer once its request has begun to
// arrive (or after refuseLinger without one), within refuseWriteTimeout;
// then its unread request bytes are drained (so that closing does not
// reset the answer away) for at most refuseLinger, by at most maxRefusing
// goroutines per listener: beyond them a refused connection is answered
// at once and closed after dropping only what has arrived already.
const (
	refuseWriteTimeout = 100 * time.Millisecond
	refuseLinger       = 250 * time.Millisecond
	refuseDrainMax     = 64 << 10
	maxRefusing        = 32
)

// Refusal reasons, the "reason" label of
// gatehouse_http_connections_refused_total.
const (
	refusedTotal   = "max_conns"
	refusedPerAddr = "max_conns_per_ip"
)

// The answers to a refused connection: 503 when the process is at its
// connection cap, 429 when the client's address is at its own. They are
// plain text, the same on every listener: the connection is refused
// before any request is read.
var (
	refuseTotalResponse   = refusal("503 Service Unavailable", "too many connections to the server; try again later\n")
	refusePerAddrResponse = refusal("429 Too Many Requests", "too many connections from your address; close some or try again later\n")
)

func refusal(status, body string) []byte {
	return []byte("HTTP/1.1 " + status + "\r\nConnection: close\r\nRetry-After: 1\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// Conns is a connection budget: at most max TCP connections open, at most
// perAddr of them from one client address (IPv4, or IPv6 in full). Give
// the same Conns to every listener of a process (Limit): they draw on the
// same file descriptors. It is safe for concurrent use.
type Conns struct {
	max, perAddr int

	mu     sync.Mutex
	open   int
	byAddr map[netip.Addr]int
}

// NewConns returns a budget of max connections, perAddr per client
// address; 0 leaves that cap off.
func NewConns(maxConns, perAddr int) *Conns {
	return &Conns{max: maxConns, perAddr: perAddr, byAddr: map[netip.Addr]int{}}
}

// Limit returns ln, marked so that Listener.Serve holds its connections
// to b. Served otherwise, it is ln.
func (b *Conns) Limit(ln net.Listener) net.Listener { return limited{Listener: ln, conns: b} }

// limited is a net.Listener carrying its budget to Serve.
type limited struct {
	net.Listener
	conns *Conns
}

// take counts a connection from a, or returns why it is refused.
func (b *Conns) take(a netip.Addr) string {
	if b == nil {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.max > 0 && b.open >= b.max {
		return refusedTotal
	}
	if b.perAddr > 0 && b.byAddr[a] >= b.perAddr {
		return refusedPerAddr
	}
	b.open++
	b.byAddr[a]++
	return ""
}

// openNow returns the connections counted (0 for a nil budget).
func (b *Conns) openNow() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open
}

// release uncounts a connection from a that take counted.
func (b *Conns) release(a netip.Addr) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.open--
	if n := b.byAddr[a] - 1; n > 0 {
		b.byAddr[a] = n
	} else {
		delete(b.byAddr, a)
	}
	b.mu.Unlock()
}

// fdExhausted reports whether an Accept error means the process or the
// system is out of file descriptors (or socket buffers) for now.
func fdExhausted(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// acceptRetry waits before Accept is tried again after err, the pause
// doubling from the last (0: the first); it returns the pause, or 0 if
// the listener was closed meanwhile.
func (g *gracefulListener) acceptRetry(err error, last time.Duration) time.Duration {
	d := min(max(2*last, acceptRetryFirst), acceptRetryMax)
	g.m.retries.Inc()
	if last == 0 {
		g.lg.Warn("out of file descriptors: accepting again after a pause", "err", err, "open_conns", g.conns.openNow())
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return d
	case <-g.closed:
		return 0
	}
}

// refuse answers a connection over a cap and closes it.
func (g *gracefulListener) refuse(c *net.TCPConn, reason string) {
	g.m.refused.WithLabelValues(reason).Inc()
	if now := time.Now().Unix(); g.lastRefusalLog.Load()+60 <= now { // at most one line a minute
		g.lastRefusalLog.Store(now)
		g.lg.Warn("connection refused over a cap", "reason", reason, "remote", c.RemoteAddr().String())
	}
	resp := refuseTotalResponse
	if reason == refusedPerAddr {
		resp = refusePerAddrResponse
	}
	select {
	case g.refusing <- struct{}{}:
	default: // too many refusing: answer at once, drop what has arrived (a deadline already past would read nothing), close
		_ = c.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
		_, _ = c.Write(resp)
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		_, _ = io.CopyN(io.Discard, c, refuseDrainMax)
		_ = c.Close()
		return
	}
	g.lingering.add()
	go func() {
		defer func() { <-g.refusing; g.lingering.done() }()
		// The answer goes out once the request has begun to arrive
		// (or after refuseLinger): an HTTP client that gets an answer
		// before it has sent its request takes it for an unsolicited
		// one and drops the connection without reading it (Go's
		// net/http does: "readLoopPeekFailLocked", seen in CI).
		_ = c.SetReadDeadline(time.Now().Add(refuseLinger))
		var first [1]byte
		n, _ := c.Read(first[:])
		_ = c.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
		_, _ = c.Write(resp)
		_ = c.CloseWrite()
		if n > 0 {
			_ = c.SetReadDeadline(time.Now().Add(refuseLinger))
			_, _ = io.CopyN(io.Discard, c, refuseDrainMax)
		}
		_ = c.Close()
	}()
}

// remoteAddr is c's client address, the key of the per-address cap.
func remoteAddr(c *net.TCPConn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}
