// Package keys is the key-management service's domain, an actors.Extension:
// API keys (svc_live_...), each owned by a key actor that serializes its
// sliding 1-hour limiter window, its usage counts and its state
// transitions; the shard actors that own the key actors, the secrets'
// directory (SHA-256 of a secret -> key id, open addressing) and the idle
// keys; the records 10..16, the "keys" section of snapshots (decoded on
// every core) and, in cluster mode, the ownership of the cluster's key
// shards and the forwarding of admissions (keycluster.go).
//
// Authorize is the proxy's hot path: a pooled message delivered directly
// to the shard's inline mailbox (mailbox.go), no allocation, no goroutine
// hand-off when uncontended. docs/architecture.md has the message flow.
//
// # Topology
//
// A fixed set of shard actors (Config.Shards) splits the key space twice:
// shard i owns the keys whose id maps to i (shardOfID) and the directory
// entries (secret hash → key id) of the hashes that map to i (shardOfHash).
// Each key that saw traffic recently has its own key actor, a child of its
// shard, owning its record, sliding-window limiter and usage counters; idle
// ones are passivated by a sweep (no ReceiveTimeout: see ENGINE-NOTES) and
// their state returns to the shard until the next message. A key id is drawn so that it maps to
// the same shard as its first secret, so authorizing a never-rotated key is
// handler → shard → key actor → handler. Shards and key actors run inline
// on the goroutine that sends to them (inlineProps, mailbox.go) and so must never
// block; WAL commit callbacks reach them through the courier.
//
//	ks, _ := keys.New(keys.DefaultConfig())
//	acc, _ := accounts.New(accounts.DefaultConfig())
//	sys, err := actors.New(actors.DefaultConfig(), actors.Deps{Log: l, Snapshots: st, Sealer: sealer}, ks, acc)
//	if err != nil {
//		return err
//	}
//	defer sys.Close(ctx)
//	info, secret, err := ks.CreateKey(ctx, keys.NewKey{Owner: acc.KeyOwner(user), Name: "ci"})
//	res := ks.Authorize(ctx, []byte(secret)) // res.Err, res.Limit
//
// # State and apply
//
// applyKey(state, seq, event) is the one pure, deterministic transition
// that live actors and restore (snapshot, then WAL replay) both call, so
// the two cannot drift (a property test drives random commands and
// compares the live state with both kinds of restore; the conformance
// suite, actorstest.Conformance, checks the Extension rules): it returns
// the key's next state (nil once deleted) and the directory effects
// (secret hashes to add or drop), which the live path delivers to the
// directory shards (Service.publish) and restore to the image's tables.
// The home shard applies creations, the key actor everything else.
//
// Usage is the one batched exception: the key actor counts an admitted
// request at once (the next request must see it) and logs the deltas at
// the next flush; what it holds is the durable state plus those pending
// deltas, which durableCopy takes out for snapshots.
//
// # WAL record types
//
// Numbers are part of the on-disk format: never reuse or renumber one. A
// binary record's layout never changes (a new layout gets a new type); a
// JSON record carries "v" (absent: 1) and a newer version is refused.
// testdata/NNN_name.golden pins each (go test ./actors/keys -run Golden -update).
//
//	type  name             payload                                           applied by
//	  10  key created      binary keyRecord (id, owner, name, preview, hash,
//	                       sealed secret, limit, times)                      home shard
//	  11  key rotated      id, preview, new hash, new sealed secret, at,
//	                       grace end                                         key actor
//	  12  key revoked      id, at                                            key actor
//	  13  key deleted      16-byte id                                        key actor, then shard
//	  14  key updated      id, name, rate limit, expires_at (new values)     key actor
//	  15  key used         id, (second, count) pairs, seconds delta-encoded  key actor (live:
//	                                                                         watermark only;
//	                                                                         written by flushNow)
//	  16  keys used        count, then that many key-used payloads: one      each key's actor
//	                       shard's usage flush                               (watermark only)
//
// # Rules
//
//   - Replies travel on buffered channels inside messages; callers bound
//     their wait with ctx, and an actor never blocks on a caller.
//   - Control-plane changes (key create/rotate/revoke/update/delete) are
//     validated by the owning actor, made durable, applied, then answered.
//     Key events are appended with AppendAsync and applied by the shard (creation) or the key actor when
//     the commit notice arrives, so neither ever waits on fsync.
//   - An admitted request is counted at once (the next one must see it) and
//     logged at the next flush tick (Config.FlushInterval): each key actor
//     with usage hands it to its shard (usagePart), which appends the
//     usage of all of them as one keysUsed record with wal.AppendAsync
//     (one WAL write per shard, not per key) and passes the commit notice
//     back to each. A crash loses at most that interval.
//   - Replay is exact (the rule on Extension): a snapshot's copies may
//     reflect records after its barrier, and replaying those changes
//     nothing. Each key carries the sequence of the last control record
//     and of the last usage record it reflects, and skips records at or
//     below them.
//   - A snapshot captures every shard and live key actor through the
//     courier, after the barrier (actors.System.Snapshot says why that
//     cut is consistent); the section is written in the parts the shards
//     returned (actors.StreamedSection), and restored on every core.
//   - No secret is kept in plaintext: keys are a SHA-256 hash (lookup) plus
//     AES-256-GCM ciphertext under the master key (actors.Sealer).
package keys
