// Package actors is gatehouse's engine: one protoactor-go actor system
// whose durable domains plug in as Extensions (actors/keys: API keys;
// actors/accounts: users and sessions; actors/control; actors/gateway),
// every change that must survive a crash going through the write-ahead log
// (package wal, or the replicated log of cluster mode) before it is
// acknowledged. The engine names no domain: it restores each extension
// from its named section of the newest valid snapshot and the records it
// owns after it, starts their actors, ticks them, takes snapshots, flushes
// and stops them, and in cluster mode follows the replicated log and
// routes each record to the extension that owns it (Owns).
//
//	ks, _ := keys.New(keys.DefaultConfig())
//	acc, _ := accounts.New(accounts.DefaultConfig())
//	sys, err := actors.New(actors.DefaultConfig(), actors.Deps{Log: l, Snapshots: st, Sealer: sealer}, ks, acc)
//	if err != nil {
//		return err
//	}
//	defer sys.Close(ctx)
//
// # What the engine gives a domain
//
//   - The Extension seam and its replay rule (extension.go), with optional
//     capabilities: Ticker, Flusher, SnapshotObserver, StreamedSection,
//     OfflineImager and LiveApplier/OwnApplier (cluster mode),
//     ClusterMember (the keys' shard ownership).
//   - ExtensionEnv: the actor system's root, the EventLog (durable on
//     return, or asynchronously with a commit callback), the clock, the
//     Sealer (AES-256-GCM under the master key: no secret is kept in
//     plaintext), props on a pooled dispatcher (dispatcher.go), a shared
//     watchdog for hot paths (no timer per call), cluster-wide entity
//     locks.
//   - Ask, Await and Pool (ask.go): a pooled reply-channel ask every hot
//     path uses; LiveMarks for watermarks of replayed state.
//   - actorstest: real systems for tests, and Conformance, the suite every
//     extension runs.
//
// # WAL record types
//
// Numbers are part of the on-disk format: never reuse or renumber one. A
// binary record's layout never changes (a new layout gets a new type); a
// JSON record carries "v" (absent: 1) and a newer version is refused. Each
// domain pins its own with golden files.
//
//	type   owner                      payload
//	   1   the engine                 none: a snapshot's barrier
//	 2-4   actors/accounts            users and sessions (JSON)
//	10-16  actors/keys                key events and usage (binary; keys/doc.go)
//	64-75  actors/gateway             registry, tenants, runs, budgets (JSON)
//	200-201 actors/control            tokens, services, key service lists
//
// # Snapshots
//
// A snapshot payload is named sections only ("GHIMG\x02", image.go), one
// per extension, in the extensions' order; a payload of version 1
// ("GHIMG\x01", written before the keys and accounts became extensions)
// is cut into the same sections. Snapshot appends a barrier record, then
// captures every extension; see Snapshot for why that cut is consistent.
package actors
