// Package snapshot stores durable, atomic, checksummed snapshots of the
// actor state, so that start-up loads the newest one and replays only the
// WAL records after it.
//
// The actors package hands over a consistent cut of its state tagged with
// the WAL index it includes; this package writes it, keeps the newest
// cfg.Retain files and, at start, loads the newest valid one, setting aside
// any that fail validation.
//
// # Usage
//
//	s, err := snapshot.New(snapshot.Config{Dir: "data/snap", Retain: 3}, lg, reg)
//	// taking a snapshot of everything up to WAL index n:
//	size, err := s.Save(n, func(w io.Writer) error { return state.Encode(w) })
//	// ... then wal.TruncateBefore(n + 1)
//	// at start:
//	idx, err := s.Load(func(idx uint64, p []byte) error { return state.Decode(p) })
//	if errors.Is(err, snapshot.ErrNoSnapshot) { idx = 0 } // replay the whole WAL
//	// ... then replay the WAL from idx+1
//
// # Directory layout
//
//	%016x.snap         a snapshot, named by its index in 16 lowercase hex digits
//	%016x-*.tmp        a Save in progress; removed by Load (a crash left it)
//	%016x.snap.broken  a snapshot that failed validation; kept for the operator
//
// Save writes the temp file, syncs and closes it, renames it to its final
// name and syncs the directory, so a name ending in .snap always denotes a
// complete file: a crash leaves at most a .tmp file. Other names are ignored.
//
// # File format, version 1
//
// All integers are big-endian. Offsets are in bytes.
//
//	offset  size  field
//	0       6     magic, the ASCII bytes "GHSNAP"
//	6       2     version, uint16, = 1
//	8       8     index, uint64: the WAL index included; equals the index in the file name
//	16      8     length, uint64: the payload length n
//	24      n     payload, opaque to this package (the actors package owns its encoding)
//	24+n    4     crc, uint32: CRC-32C (Castagnoli) of bytes [0, 24+n): header and payload
//
// A file is valid when it is exactly 28+n bytes long, the magic and version
// match, the header index equals the one in the file name, and the CRC
// matches. Anything else is corrupt: the file is renamed to .broken and the
// next older snapshot is tried.
//
// # Version rules
//
//   - Writers always write the current version, 1.
//   - Any change to the header, the trailer or what the CRC covers takes a new
//     version number; a reader may also keep decoding older versions.
//   - A reader treats a version it does not know as corrupt. A downgraded
//     binary therefore sets aside snapshots written by a newer one and falls
//     back to an older snapshot; rename the .broken file back after upgrading
//     again.
//   - The payload's own encoding is versioned inside the payload by its
//     owner; changing it does not change this version.
//
// # Logging and metrics
//
// Load logs, with component=snapshot, each file it sets aside (Warn, once
// per file) or temp file it removes (Info), and the snapshot it loaded
// (Info); Save logs only at Debug. Errors that Save and Load return are not
// logged: the caller logs them. Metrics: gatehouse_snapshot_save_duration_seconds
// and gatehouse_snapshot_load_duration_seconds (successful calls only),
// gatehouse_snapshot_size_bytes and gatehouse_snapshot_broken_total.
//
// # Concurrency and ownership
//
// A Store's methods are safe for concurrent use; they run one at a time.
// Only one Store may use a directory (nothing locks it against another
// process). Save takes no context: disk I/O is synchronous, and callers run
// it off the actor goroutines. The payload passed to Load's function belongs
// to Load: the function must not modify it or keep it after returning.
package snapshot
