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
// # Repair on Open
//
// Open creates the file if needed (its directory must exist) and verifies
// every record: key length, contiguity of sequences, envelope length, CRC,
// version and type. At the first bad record it deletes that record and every
// later one, logs one Warn with the cut range and counts the records in
// gatehouse_wal_repaired_records_total. Numbering then continues right after
// the last good record (LastIndex goes back to it), so the log stays
// contiguous. After Open every record in the log is valid. A record with a
// valid CRC but a version newer than this build's makes Open fail with
// ErrUnsupportedVersion and changes nothing.
//
// If a snapshot at index N is ahead of the repaired log (LastIndex() < N),
// the caller must call TruncateBefore(LastIndex()+1) (every record left is
// covered by the snapshot) and then SetNext(N) before appending; otherwise
// new records would reuse sequences the snapshot already covers.
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
// versions it does not know with ErrUnsupportedVersion and never cuts them.
// A new version is introduced by bumping recordVersion, keeping the decoder
// for every older version, and adding a golden file
// testdata/record_vN.golden; existing golden files never change.
package wal
