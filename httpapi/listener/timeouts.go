package listener

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// The read and idle timeouts are kept by the listener, not by fasthttp.
// fasthttp's ReadTimeout and IdleTimeout re-arm the socket's read deadline
// twice per request, a clock read and a runtime timer change each time:
// ~1.5 % of a proxied request's CPU (issue 25). Here a connection records
// which phase it is in and since when, one atomic store per phase change
// (fasthttp's ConnState hook), and counts its reads in progress; a sweeper
// that advances a coarse clock visits the connections a few times per
// timeout and cuts those past their limit by setting their read deadline
// in the past, so the read in progress fails with a timeout, as it would
// have with fasthttp's deadline. The limits are fasthttp's:
//
//   - a new connection: its first request byte within ReadTimeout;
//   - a request, from its first byte: read whole within ReadTimeout. Only
//     reads count: a handler that runs long (a slow upstream, a streamed
//     answer) reads nothing and is not cut, but a request body it streams
//     is read under the same limit;
//   - between requests: the next one's first byte within IdleTimeout.
//
// A limit is kept to within one sweep (an eighth of the shorter timeout,
// at most a second). A hijacked connection (a WebSocket's) is forgotten:
// its handler keeps its own deadlines. Connections that are not TCP (the
// tests' in-memory listeners) have no timeouts.

// Connection phases, in the low bits of gracefulConn.phase; the sweeper's
// tick at the phase's start is in the bits above.
const (
	phaseOff    uint64 = iota // closed or hijacked: not watched
	phaseNew                  // waiting for the first request
	phaseActive               // reading (and serving) a request
	phaseIdle                 // waiting for the next request
	phaseBits   = 2
	phaseMask   = 1<<phaseBits - 1
)

// aLongTimeAgo is a read deadline that has passed: the read in progress
// and every later one fail at once.
var aLongTimeAgo = time.Unix(1, 0)

// timeouts watches a listener's connections.
type timeouts struct {
	read, idle uint64        // limits, in ticks
	tick       time.Duration // the sweeper's period
	now        atomic.Uint64 // ticks since the sweeper started

	mu    sync.Mutex
	conns map[*gracefulConn]struct{}
}

func newTimeouts(read, idle time.Duration) *timeouts {
	tick := min(read, idle) / 8
	tick = max(min(tick, time.Second), time.Millisecond)
	ticks := func(d time.Duration) uint64 { return uint64((d + tick - 1) / tick) }
	return &timeouts{read: ticks(read), idle: ticks(idle), tick: tick, conns: map[*gracefulConn]struct{}{}}
}

// connState is fasthttp's ConnState hook.
func (t *timeouts) connState(nc net.Conn, st fasthttp.ConnState) {
	c, ok := nc.(*gracefulConn)
	if !ok {
		return
	}
	switch st {
	case fasthttp.StateNew:
		c.setPhase(t, phaseNew)
		t.mu.Lock()
		t.conns[c] = struct{}{}
		t.mu.Unlock()
	case fasthttp.StateActive:
		c.setPhase(t, phaseActive)
	case fasthttp.StateIdle:
		c.setPhase(t, phaseIdle)
	case fasthttp.StateHijacked, fasthttp.StateClosed:
		c.setPhase(t, phaseOff)
		t.mu.Lock()
		delete(t.conns, c)
		t.mu.Unlock()
	}
}

// run advances the clock and sweeps every tick until stop is closed.
func (t *timeouts) run(stop <-chan struct{}) {
	tk := time.NewTicker(t.tick)
	defer tk.Stop()
	var due []*gracefulConn
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
		}
		now := t.now.Add(1)
		due = due[:0]
		t.mu.Lock()
		for c := range t.conns {
			if t.overdue(c.phase.Load(), c.reads.Load(), now) {
				due = append(due, c)
			}
		}
		t.mu.Unlock()
		for _, c := range due {
			t.cut(c, now)
		}
		clear(due)
	}
}

// overdue reports whether a connection in phase p (with reads reads in
// progress) is past its limit at tick now.
func (t *timeouts) overdue(p uint64, reads int32, now uint64) bool {
	since := p >> phaseBits
	switch p & phaseMask {
	case phaseNew:
		return now-since > t.read
	case phaseActive:
		return reads > 0 && now-since > t.read
	case phaseIdle:
		return now-since > t.idle
	}
	return false
}

// cut fails c's read in progress, unless its phase ended meanwhile (the
// deadline is then taken back; a read of the new phase that ran into it
// in between fails: a phase that ends in the very sweep that cuts it was
// at its limit anyway).
func (t *timeouts) cut(c *gracefulConn, now uint64) {
	p := c.phase.Load()
	if !t.overdue(p, c.reads.Load(), now) {
		return
	}
	_ = c.TCPConn.SetReadDeadline(aLongTimeAgo)
	if c.phase.Load() != p {
		_ = c.TCPConn.SetReadDeadline(time.Time{})
	}
}

// setPhase records c's phase, starting at the current tick.
func (c *gracefulConn) setPhase(t *timeouts, p uint64) {
	c.phase.Store(t.now.Load()<<phaseBits | p)
}

// Read counts the reads in progress for the sweeper (see timeouts).
func (c *gracefulConn) Read(b []byte) (int, error) {
	c.reads.Add(1)
	n, err := c.TCPConn.Read(b)
	c.reads.Add(-1)
	return n, err
}
