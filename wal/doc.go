// Package wal is gatehouse's write-ahead log: an append-only sequence of
// typed, opaque records stored in one bbolt file.
//
// Control-plane changes are appended with Append, which returns only after
// the records are committed and fsynced; concurrent callers share one commit
// (group commit). Usage counters use AppendAsync, which returns at once and
// reports the commit through a callback. Snapshots (package snapshot) let the
// log be truncated with TruncateBefore; truncation never makes sequence
// numbers go backwards.
//
//	cfg := wal.DefaultConfig()
//	cfg.Path = "data/wal.db"
//	l, err := wal.Open(cfg, lg, reg) // lg, reg may be nil
//	if err != nil {
//		return fmt.Errorf("open log: %w", err)
//	}
//	defer l.Close()
//	last, err := l.Append(wal.Record{Type: typeKeyCreated, Data: payload}) // durable on return
//	err = l.Replay(snapIndex, func(seq uint64, rec wal.Record) error { return state.apply(rec) })
//	err = l.TruncateBefore(snapIndex + 1) // after the snapshot at snapIndex is durable
//
// # Concurrency and ownership
//
// Every method is safe for concurrent use. One writer goroutine owns all
// appends: it takes the first queued call, drains whatever else is queued (up
// to Config.MaxBatch records; a larger single call is committed alone), writes
// them in one bbolt write transaction, fsyncs, and answers every call of the
// batch. When the previous batch answered Append callers, the writer also
// waits briefly (a quarter of the last commit's duration, at most 250µs) for
// them to append again, so closed-loop callers share one commit instead of
// splitting into two alternating halves. Each call's records get consecutive
// sequences and are committed all or nothing; calls from one goroutine are
// committed in call order. If a commit fails, every call in that batch gets
// the error and the sequences are not consumed: the next batch reuses them.
//
// Append keeps no reference to recs after it returns. AppendAsync reads recs
// until its callback runs; the callback runs on the writer goroutine, must not
// block and must not call the Log (it would deadlock the writer). Replay
// reads in short read transactions of at most 1024 records and calls fn
// outside any transaction, so fn may call the Log and may keep rec.Data.
// Close waits for queued appends; afterwards every method returns ErrClosed
// (AppendAsync calls its callback with ErrClosed before returning).
//
// # Corruption: found on Open, repaired offline
//
// Open creates the file if needed (its directory must exist) and verifies
// every record: key length, contiguity of sequences, envelope length, CRC,
// version and type. It deletes nothing. bbolt commits are atomic (data pages
// are fsynced before the meta page that makes them visible, and a kill
// leaves the page cache to the kernel), so a record present in the file was
// committed, and a commit is acknowledged only after it: a bad record, even
// the last one, is bit rot or tampering, never a torn write, and cutting it
// would silently drop acknowledged records. There is no torn tail to cut.
// (Under Config.NoSync, or on a disk that ignores fsync, a power loss can
// leave bbolt's pages themselves inconsistent: that is damage too, reported
// the same way or by bbolt, never cut silently.)
//
// Open logs one Warn listing what it found, sets the
// gatehouse_wal_corrupt_records gauge and remembers the bad entries: a bad
// record, a run of missing sequences (Index..Through; at the end of the log
// when the stored last index is beyond the last record present) and stray
// keys (not 8 bytes, sequence 0, out of order, a nested bucket, or a bad
// value beyond the last index assigned). Replay(after) then returns a
// *CorruptError, which wraps ErrCorrupt and names every bad entry, before
// delivering anything if one of them is > after or is a stray key. Entries
// at or below after (a snapshot covers them) are not needed and do not stop
// Replay; TruncateBefore deletes them and forgets them.
//
// Repair, run with no process holding the file, is the way out: it refuses
// a file whose bbolt pages fail bbolt's own check (a backup is the way back
// then) and one with a newer version's record; otherwise it copies the file
// byte for byte to <path>.bak-<UTC time> (fsynced) and, in one transaction,
// puts a TypeLost record in place of each bad record and each sequence
// missing between two present records, deletes stray keys, and sets the
// stored last index to the last record present (sequences missing at the
// end are dropped: numbering goes on after the last record). No record that
// verifies is deleted or changed. Its report lists every bad entry with
// what the stored bytes still say (type byte, size, payload), for the
// caller to describe. Replay skips TypeLost records.
//
// The stored last index alone is rebuilt by Open when it is unreadable (its
// own CRC fails) or behind the last record present: nothing is lost then.
// If a snapshot at index N is ahead of the log (LastIndex() < N: an older
// wal.db was restored), the caller must call TruncateBefore(LastIndex()+1)
// (every record left is covered by the snapshot) and then SetNext(N) before
// appending; otherwise new records would reuse sequences the snapshot
// already covers.
//
// # On-disk format
//
// The file is a bbolt database with two buckets.
//
// Bucket "log": key = sequence as 8 bytes big-endian (so cursor order is log
// order; sequences start at 1 and are contiguous from the first key to the
// last), value = the record envelope:
//
//	offset size field
//	0      1    version  envelope version, 1
//	1      1    type     Record.Type, never 0
//	2      4    crc      CRC-32C (Castagnoli), big-endian, of
//	                     key(8) || version || type || payload
//	6      n    payload  Record.Data, n >= 0
//
// The CRC covers the sequence, so a record copied to another key fails it.
// bbolt checksums only its meta pages; the CRC catches bit rot in records.
//
// Type 255 (TypeLost) is reserved: only Repair writes it, in place of a
// record it could not keep, with a 13-byte payload: the original value's
// type byte (1), its length (4, big-endian) and the repair time in Unix
// seconds (8, big-endian). A build from before TypeLost does not know it
// and fails the replay of a repaired log: repair with the build that runs.
//
// Bucket "meta": key "last" = the last sequence ever assigned as 8 bytes
// big-endian, followed by the CRC-32C (Castagnoli) of those 8 bytes,
// big-endian (12 bytes in all). It is written in the same transaction as
// every batch and survives TruncateBefore. A missing key means 0.
//
// # Version rules
//
// Every version, present and future, keeps byte 0 as the version and bytes
// 2..5 as the CRC-32C of key || byte 0 || byte 1 || bytes 6.., so any reader
// can tell corruption (bad CRC) from a newer version (good CRC, unknown
// version). Version 0 is never written and is corrupt. A reader rejects
// versions it does not know with ErrUnsupportedVersion and never repairs them.
// A new version is introduced by bumping recordVersion, keeping the decoder
// for every older version, and adding a golden file
// testdata/record_vN.golden; existing golden files never change.
package wal
