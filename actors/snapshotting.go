package actors

import (
	"context"
	"fmt"
	"io"
	"time"

	"gatehouse/wal"
)

// captureTimeout bounds how long a snapshot waits for the actors' copies.
const captureTimeout = 30 * time.Second

// Snapshot takes a consistent cut of all actor state, writes it through the
// snapshot store and truncates the WAL below it. It returns the snapshot's
// index.
//
// Consistency: a barrier record is appended first; its index is the
// snapshot's. Every record at or below it is already applied by its owner,
// or (for asynchronous appends: key events and usage) its commit notice was
// posted to the courier before the barrier's Append returned, hence ahead
// of the shards' capture requests, which go through the courier too; so the
// captured state reflects every record up to the index. Records after it may be reflected too; the
// per-key watermarks make their replay a no-op.
func (s *System) Snapshot() (uint64, error) {
	if s.cm != nil {
		return s.snapshotCluster(context.Background(), true)
	}
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	start := time.Now()
	for _, x := range s.exts {
		if o, ok := x.(SnapshotObserver); ok {
			o.BeforeBarrier()
		}
	}
	idx, err := s.log.Append(wal.Record{Type: recBarrier})
	if err != nil {
		return 0, fmt.Errorf("snapshot barrier: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), captureTimeout)
	defer cancel()
	secs, err := s.captureSections(ctx)
	if err != nil {
		return 0, err
	}
	size, err := s.snaps.Save(idx, func(w io.Writer) error { return WriteSnapshot(w, secs) })
	if err != nil {
		return 0, fmt.Errorf("snapshot save: %w", err)
	}
	if err := s.log.TruncateBefore(idx + 1); err != nil {
		return 0, fmt.Errorf("snapshot truncate wal: %w", err)
	}
	s.lastSnapIdx.Store(idx)
	s.lastSnapTime.Store(s.clock.Now().Unix())
	s.lg.Info("snapshot taken", "index", idx, "bytes", size, "duration", time.Since(start))
	for _, x := range s.exts {
		if o, ok := x.(SnapshotObserver); ok {
			if err := o.AfterSnapshot(idx); err != nil {
				s.lg.Warn("after snapshot", "extension", x.Name(), "index", idx, "err", err)
			}
		}
	}
	return idx, nil
}
