//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package listener

import "net"

// peekGone: no portable peek here; WatchPeer's context ends with stop.
func peekGone(net.Conn) func() bool { return nil }
