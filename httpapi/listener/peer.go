package listener

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// ErrPeerGone is the cause of a WatchPeer context that ended because the
// client closed or reset its connection.
var ErrPeerGone = errors.New("listener: client went away")

// PeerCheckInterval is how often WatchPeer looks at a connection.
const PeerCheckInterval = 100 * time.Millisecond

// WatchPeer returns a context that ends, with cause ErrPeerGone, once the
// client of conn has closed or reset the connection, and stop, which
// ends the watch (and the context, with cause context.Canceled) and
// returns when the watch's goroutine has. fasthttp tells a handler
// nothing of a client that leaves while it works; this is how a handler
// that waits long (an agent run answered in one piece) notices it.
//
// Every interval it peeks at the socket without reading: a
// non-blocking recv(MSG_PEEK) of one byte (Unix). End-of-stream or a
// reset means gone; pending bytes (a pipelined request) or none mean
// still there (so a client that pipelined a request is not watched
// past it: its departure is noticed when the answer is written). It
// never reads, never sets deadlines, and so never
// disturbs the server's own use of conn. A client that half-closes its
// sending side while it waits for the answer reads as gone, as nginx
// sees it. Where the socket cannot be peeked at (another OS, an
// in-memory listener), the context ends only with stop.
//
// Call stop before the handler returns: conn belongs to the server after
// that.
func WatchPeer(conn net.Conn, interval time.Duration) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	peek := peeker(conn)
	if peek == nil {
		return ctx, func() { cancel(context.Canceled) }
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				if peek() {
					cancel(ErrPeerGone)
					return
				}
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			close(quit)
			<-done
			cancel(context.Canceled)
		})
	}
}

// peeker returns conn's check (true: the peer is gone), nil when conn's
// socket cannot be reached.
func peeker(conn net.Conn) func() bool {
	for { // a *tls.Conn: its socket (a close_notify is pending bytes, so such a close is missed)
		u, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		conn = u.NetConn()
	}
	return peekGone(conn)
}
