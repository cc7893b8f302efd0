package httpapi

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The upstream exchange's timeout is kept by one timer wheel instead of a
// deadline per request. fasthttp's HostClient, which the proxy used
// before httpapi/relay, set a write and a read deadline on the connection
// for every request it sent with a timeout: two runtime timers re-armed
// and three clock reads per request, about 1% of the proxy's CPU
// (bench/RESULTS.md, issue 25). The upstream's
// connections (wheelConn) instead note when their exchange is due (one
// clock read), and the wheel's one goroutine ticks every
// wheelTick while any connection is open, interrupting an exchange past
// its due time by setting the connection's real deadline in the past:
// its blocked read or write then fails with a timeout, as with a
// deadline of its own (a timeout: 504).
//
// An exchange is timed from its first byte written (the wait for a free
// connection is bounded apart, by relay.Config.MaxConnWait) to the next
// exchange on the connection: a streamed answer must end within the
// timeout too, as it did with fasthttp's deadlines. The wheel may let an
// exchange run up to a tick longer than the timeout (more if its
// goroutine waits for a CPU), never shorter. A timed-out request is not
// sent again (relay.Pool.Do).

// wheelTick is the wheel's resolution.
const wheelTick = 10 * time.Millisecond

// deadlineWheel times the exchanges of its connections.
type deadlineWheel struct {
	mu      sync.Mutex
	conns   map[*wheelConn]struct{}
	running bool // the ticking goroutine runs (while conns is not empty)
}

// upstreamWheel is the wheel of every upstream connection of the process.
var upstreamWheel = &deadlineWheel{conns: map[*wheelConn]struct{}{}}

// add registers c and starts the ticking goroutine if it was stopped.
func (w *deadlineWheel) add(c *wheelConn) {
	w.mu.Lock()
	w.conns[c] = struct{}{}
	if !w.running {
		w.running = true
		go w.run()
	}
	w.mu.Unlock()
}

// remove forgets c; the goroutine stops at its next tick once none is left.
func (w *deadlineWheel) remove(c *wheelConn) {
	w.mu.Lock()
	delete(w.conns, c)
	w.mu.Unlock()
}

func (w *deadlineWheel) run() {
	t := time.NewTicker(wheelTick)
	defer t.Stop()
	for range t.C {
		if !w.expire(time.Now().UnixNano()) {
			return
		}
	}
}

// expire interrupts every exchange past its due time; it reports whether
// the wheel must keep ticking (any connection is open).
func (w *deadlineWheel) expire(now int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.conns) == 0 {
		w.running = false
		return false
	}
	for c := range w.conns {
		if due := c.due.Load(); due != 0 && due <= now {
			c.interrupt(now)
		}
	}
	return true
}

// pastDeadline is a deadline that has passed.
var pastDeadline = time.Unix(1, 0)

// wheelConn is an upstream connection whose exchanges the wheel times.
type wheelConn struct {
	net.Conn
	w       *deadlineWheel
	timeout int64        // ns
	due     atomic.Int64 // Unix ns at which the exchange times out; 0: none
	mu      sync.Mutex   // orders interrupt against the next exchange's start
	fired   bool         // the real deadline was set in the past
	closed  sync.Once
}

func newWheelConn(c net.Conn, w *deadlineWheel, timeout time.Duration) *wheelConn {
	wc := &wheelConn{Conn: c, w: w, timeout: int64(timeout)}
	w.add(wc)
	return wc
}

// SetWriteDeadline is called by the relay before every request it writes
// (with a zero time): the previous exchange is over, and a deadline the
// wheel set for it is lifted.
func (c *wheelConn) SetWriteDeadline(time.Time) error {
	c.due.Store(0)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fired {
		c.fired = false
		return c.Conn.SetDeadline(time.Time{})
	}
	return nil
}

// SetReadDeadline is a no-op: the wheel times the whole exchange.
func (c *wheelConn) SetReadDeadline(time.Time) error { return nil }

// Write starts the exchange's clock on its first byte.
func (c *wheelConn) Write(p []byte) (int, error) {
	if c.due.Load() == 0 {
		c.due.Store(time.Now().UnixNano() + c.timeout)
	}
	return c.Conn.Write(p)
}

// interrupt makes the exchange's pending and next I/O fail with a
// timeout if it is still past due at now (a new exchange may have started
// since the wheel looked). The wheel calls it with its lock held.
func (c *wheelConn) interrupt(now int64) {
	c.mu.Lock()
	if due := c.due.Load(); due != 0 && due <= now && !c.fired {
		c.fired = true
		_ = c.Conn.SetDeadline(pastDeadline)
	}
	c.mu.Unlock()
}

func (c *wheelConn) Close() error {
	c.closed.Do(func() { c.w.remove(c) })
	return c.Conn.Close()
}
