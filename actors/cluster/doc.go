// Package cluster is gatehouse's membership and shard ownership on etcd,
// and the quota arithmetic that keeps a key's limit exact when its owner
// changes.
//
// # Membership and ownership
//
// A Node registers under an etcd lease (Config.TTL) at
// {prefix}/members/{node-id} with the address the other nodes reach it at.
// The key space is cut into Config.Shards virtual shards; the desired owner
// of a shard is chosen by rendezvous hashing over the live members, but
// ownership is an etcd fact: a node owns shard s once its transaction
//
//	If CreateRevision({prefix}/shards/s) == 0 Then Put(node-id, WithLease)
//
// succeeds. The key's CreateRevision is the owner's epoch. Every write an
// owner makes for a shard is fenced on that epoch (Node.Commit), so a
// paused or partitioned ex-owner cannot write after a successor took over.
//
// A node keeps its own lease alive (KeepAliveOnce every TTL/3) and tracks a
// local deadline, the time it sent the last acknowledged keepalive plus the
// TTL the server granted, on the monotonic clock. Node.Owns answers false
// once the deadline has passed, before etcd could have expired the lease,
// so an owner never admits from a reservation its successor may already
// have counted. On lease loss the node demotes itself: it drops every
// shard at once (Handler.Released) and registers again with a new lease.
// It does not exit.
//
// # Quota
//
// Only a key's owner admits. It keeps the exact sliding window in memory
// (ratelimit.Window) and admits only from tokens it has reserved: before a
// key's reserved balance runs dry the owner commits a Quota record (the
// window summarized to minutes plus the tokens reserved and not yet spent)
// with a fenced transaction, then spends from it. A successor rebuilds the
// window from the record and counts every outstanding token as admitted at
// its takeover, so no crash or pause can over-admit; it under-admits by at
// most one reservation chunk (max(1, limit/100)) per ownership change, plus
// what the minute rounding of the summary holds back (an admission counted
// at the end of its minute leaves the window up to 59 s late).
package cluster
