// Package actors is gatehouse's core: every API key, user and session lives
// in a protoactor-go actor that serializes its state, and every change that
// must survive a crash goes through the write-ahead log (package wal) before
// it is acknowledged.
//
// # Topology
//
// A fixed set of shard actors (Config.Shards) splits the key space twice:
// shard i owns the keys whose id maps to i (shardOfID) and the directory
// entries (secret hash → key id) of the hashes that map to i (shardOfHash).
// Each key that saw traffic recently has its own key actor, a child of its
// shard, owning its record, sliding-window limiter and usage counters; idle
// ones are passivated by a sweep (no ReceiveTimeout: see ENGINE-NOTES) and
// their state returns to the shard until the next message. Users and
// sessions belong to one accounts actor. A key id is drawn so that it maps to
// the same shard as its first secret, so authorizing a never-rotated key is
// handler → shard → key actor → handler.
//
//	sys, err := actors.New(actors.DefaultConfig(), actors.Deps{Log: l, Snapshots: st, Sealer: sealer})
//	if err != nil {
//		return err
//	}
//	defer sys.Close(ctx)
//	info, secret, err := sys.CreateKey(ctx, actors.NewKey{Owner: user, Name: "ci"})
//	res := sys.Authorize(ctx, []byte(secret)) // res.Err, res.Limit
//
// # Rules
//
//   - Replies travel on buffered channels inside messages; callers bound
//     their wait with ctx, and an actor never blocks on a caller.
//   - Control-plane changes (users, sessions, key create/rotate/revoke/
//     update/delete) are validated by the owning actor, appended with
//     wal.Append (durable on return), applied, then answered. Key creation is
//     appended asynchronously and applied by the shard when the commit
//     notice arrives, so a shard never waits on fsync.
//   - An admitted request is counted at once (the next one must see it) and
//     logged in a keyUsed record at the next flush tick (Config.FlushInterval)
//     with wal.AppendAsync. A crash loses at most that interval.
//   - Replay never applies a record twice: each key carries the sequence of
//     the last control record and of the last usage record it reflects.
//   - Snapshot appends a barrier record, then captures every actor; see
//     Snapshot for why that cut is consistent.
//   - No secret is kept in plaintext: keys are a SHA-256 hash (lookup) plus
//     AES-256-GCM ciphertext under the master key (Sealer); session tokens
//     are SHA-256 hashes; passwords are argon2id hashes.
package actors
