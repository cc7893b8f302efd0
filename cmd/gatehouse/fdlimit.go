package main

import (
	"log/slog"
	"math"
)

// Every connection a listener holds is a file descriptor, and so is
// everything else the process opens: the WAL and snapshot files, the blob
// store's files, the connections to upstreams, to MCP servers and to etcd.
// So the connection caps (server.max_conns, server.max_conns_per_ip) stay
// below the fd limit, with room for the rest:
//
//   - fdReserve descriptors for the files and the fixed connections (WAL,
//     snapshots, logs, etcd, the cluster listener), the refused connections
//     draining (listener.maxRefusing per listener) included;
//   - then one descriptor per client connection for its upstream (a
//     proxied request holds one while it runs): half of what is left goes
//     to client connections.
//
// The per-address cap defaults to half of the total: one client (or one
// NAT) cannot take every connection. Behind a reverse proxy, where every
// client shares the proxy's address, set it to max_conns.
const fdReserve = 64

// connCaps are the caps a process applies to its listeners' connections.
type connCaps struct {
	max, perIP int
	fdLimit    uint64 // the soft RLIMIT_NOFILE after raiseFDLimit; 0: unknown
}

// deriveConnCaps fills the caps cfg leaves at 0 from the fd limit (0:
// unknown, then a cap left at 0 stays off).
func deriveConnCaps(maxConns, perIP int, fdLimit uint64) connCaps {
	c := connCaps{max: maxConns, perIP: perIP, fdLimit: fdLimit}
	if c.max == 0 && fdLimit > 0 {
		usable := min(fdLimit, math.MaxInt32)
		c.max = max(int(usable)-fdReserve, 2) / 2
	}
	if c.perIP == 0 && c.max > 0 {
		c.perIP = max(c.max/2, 1)
	}
	if c.max > 0 {
		c.perIP = min(c.perIP, c.max)
	}
	return c
}

// logConnCaps logs the fd limit and the caps once at start, and warns when
// a configured cap does not fit in the limit (accepting then pauses at the
// limit instead of refusing at the cap).
func logConnCaps(lg *slog.Logger, c connCaps, raised bool, err error) {
	if err != nil {
		lg.Warn("file descriptor limit not raised", "err", err)
	}
	lg.Info("connection caps", "fd_limit", c.fdLimit, "fd_limit_raised", raised, "max_conns", c.max, "max_conns_per_ip", c.perIP)
	if c.fdLimit > 0 && uint64(c.max)+fdReserve > c.fdLimit {
		lg.Warn("server.max_conns does not fit in the file descriptor limit: at the limit accepting pauses instead of refusing",
			"max_conns", c.max, "fd_limit", c.fdLimit, "fd_reserve", fdReserve)
	}
}
