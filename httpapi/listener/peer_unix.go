//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package listener

import (
	"errors"
	"net"
	"syscall"
)

// peekGone returns the check of a socket: a non-blocking one-byte
// MSG_PEEK; nil when conn has no socket.
func peekGone(conn net.Conn) func() bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var buf [1]byte
	return func() bool {
		var n int
		var rerr error
		if err := raw.Control(func(fd uintptr) {
			n, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		}); err != nil {
			return true // closed under us
		}
		switch {
		case rerr == nil:
			return n == 0 // end of stream
		case errors.Is(rerr, syscall.EAGAIN), errors.Is(rerr, syscall.EWOULDBLOCK), errors.Is(rerr, syscall.EINTR):
			return false // nothing to read: still there
		}
		return true // reset, or another failure of the socket
	}
}
