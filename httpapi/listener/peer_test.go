package listener

import (
	"context"
	"errors"
	"net"
	"runtime"
	"testing"
	"time"
)

// tcpPair returns the server side (as the listener hands it out) and the
// client side of a loopback connection.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	gl := newGracefulListener(ln, &lingerSet{}, nil, "test", nil)
	if client, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if server, err = gl.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.(*gracefulConn).TCPConn.Close() })
	return server, client
}

func TestWatchPeer(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no peek on", runtime.GOOS)
	}
	t.Run("client closes", func(t *testing.T) {
		server, client := tcpPair(t)
		ctx, stop := WatchPeer(server, 10*time.Millisecond)
		defer stop()
		select {
		case <-ctx.Done():
			t.Fatalf("WatchPeer ended while the client was there: %v", context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
		client.Close()
		select {
		case <-ctx.Done():
			if !errors.Is(context.Cause(ctx), ErrPeerGone) {
				t.Errorf("cause = %v, want ErrPeerGone", context.Cause(ctx))
			}
		case <-time.After(2 * time.Second):
			t.Fatal("WatchPeer did not notice the client closing")
		}
	})
	t.Run("pending bytes", func(t *testing.T) {
		// Bytes waiting (a pipelined request) read as a client still
		// there, and are not consumed.
		server, client := tcpPair(t)
		ctx, stop := WatchPeer(server, 10*time.Millisecond)
		if _, err := client.Write([]byte("GET / HTTP/1.1\r\n")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		stop()
		if !errors.Is(context.Cause(ctx), context.Canceled) {
			t.Errorf("cause = %v, want context.Canceled (from stop)", context.Cause(ctx))
		}
		buf := make([]byte, 64)
		if n, _ := server.Read(buf); string(buf[:n]) != "GET / HTTP/1.1\r\n" {
			t.Errorf("server read %q after the watch, want the bytes untouched", buf[:n])
		}
	})
	t.Run("stop", func(t *testing.T) {
		server, _ := tcpPair(t)
		ctx, stop := WatchPeer(server, time.Millisecond)
		stop()
		stop() // idempotent
		if !errors.Is(context.Cause(ctx), context.Canceled) {
			t.Errorf("cause after stop = %v, want context.Canceled", context.Cause(ctx))
		}
	})
	t.Run("no socket", func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		ctx, stop := WatchPeer(a, time.Millisecond)
		b.Close()
		time.Sleep(20 * time.Millisecond)
		if ctx.Err() != nil {
			t.Errorf("a pipe's watch ended before stop: %v", ctx.Err())
		}
		stop()
	})
}
