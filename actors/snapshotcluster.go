package actors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"gatehouse/wal"
	"gatehouse/wal/etcdlog"
)

// Snapshots in cluster mode (docs/cluster.md, "Snapshots").
//
// A snapshot of live actors is not exact at a position of the replicated
// log: a node applies its own records when their append is acknowledged,
// possibly before other nodes' records with lower positions, and applies
// those without the replay watermarks. So a snapshot is built off the
// actors, the way a node restores: the latest snapshot in etcd, decoded
// into a fresh image (and each extension's OfflineImage), plus every
// record of the log after it up to one pinned revision, whose end is the
// snapshot's exact position P. It is then written to etcd in chunks, its
// pointer last (etcdlog.Snapshots), and the log is truncated below the
// snapshot it replaced, not below P: a follower up to one snapshot behind
// keeps following. etcd's history is compacted there too.
//
// One node at a time takes one: the holder of etcd's snapshot lock. Each
// node counts the records its follower saw since the latest snapshot it
// knows of; when they reach Config.SnapshotEvery, or Config.SnapshotInterval
// passed and any came, it tries the lock (without waiting). A node that
// finds it taken, or finds a newer snapshot than it knew once it holds it,
// counts from there instead. Memory: while it runs, the node taking it holds
// a second copy of the state (the decoded snapshot plus the log after it)
// and the encoded payload.

// errSnapshotBusy: another node holds the snapshot lock.
var errSnapshotBusy = errors.New("another node is taking a snapshot")

// clusterSnapshotTimeout bounds one snapshot in cluster mode (reading the
// last one and the log, encoding, writing the chunks).
const clusterSnapshotTimeout = 5 * time.Minute

// clusterSnapshotDue reports whether this node should try to take a
// snapshot now (cluster mode).
// errNotReplicated: an operation of cluster mode on a node that has no
// replicated log.
var errNotReplicated = errors.New("actors: not available in cluster mode")

func (s *System) clusterSnapshotDue(now int64) bool {
	cm := s.cm
	if cm.deps.Snapshots == nil || cm.fatal.Load() != nil {
		return false
	}
	n := cm.sinceSnap.Load()
	if s.cfg.SnapshotEvery > 0 && n >= s.cfg.SnapshotEvery {
		return true
	}
	// The interval: if any record came since the latest snapshot known
	// here. The count is approximate (countFrom zeroes it, forgetting
	// records followed while another node's snapshot was being built), so
	// the applied position decides too; without it the last writes before
	// a quiet spell could stay outside every snapshot
	// (TestSnapshotsTakenByTicker, about one run in seven).
	iv := int64(s.cfg.SnapshotInterval / time.Second)
	return iv > 0 && now-s.lastSnapTime.Load() >= iv && (n > 0 || cm.applied.Load() > cm.snapPos.Load())
}

// snapshotCluster takes a snapshot of the cluster's state into etcd and
// returns its position. Unless force, it takes none when another node
// holds the lock or took one since the last this node knows of (it counts
// from that one instead) and returns 0.
func (s *System) snapshotCluster(ctx context.Context, force bool) (uint64, error) {
	cm := s.cm
	snaps := cm.deps.Snapshots
	if snaps == nil {
		return 0, fmt.Errorf("snapshot: %w (no snapshot store)", errNotReplicated)
	}
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, clusterSnapshotTimeout)
	defer cancel()
	lk, err := snaps.Lock(ctx)
	if errors.Is(err, etcdlog.ErrLocked) {
		if !force {
			s.countFrom(cm.snapPos.Load())
			return 0, nil
		}
		return 0, fmt.Errorf("snapshot: %w", errSnapshotBusy)
	}
	if err != nil {
		return 0, fmt.Errorf("snapshot: %w", err)
	}
	defer lk.Unlock()
	if !force {
		latest, err := snaps.Latest(ctx)
		if err == nil && latest.Pos > cm.snapPos.Load() {
			s.countFrom(latest.Pos) // another node took one meanwhile
			return 0, nil
		}
	}
	start := time.Now()
	pos, payload, base, replayed, err := s.offlineSnapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("snapshot: %w", err)
	}
	built := time.Since(start)
	prev, err := lk.Save(ctx, pos, payload)
	if err != nil {
		return 0, fmt.Errorf("snapshot: %w", err)
	}
	s.countFrom(pos)
	s.lastSnapIdx.Store(pos)
	truncated := 0
	if prev.Pos > 0 {
		// The log after the replaced snapshot stays: a follower up to one
		// snapshot behind keeps following. A failure here is retried by
		// the next snapshot (the cut only moves forward).
		if truncated, err = cm.deps.Snapshots.Log().Truncate(ctx, prev.Pos+1); err == nil {
			err = cm.deps.Snapshots.Log().Compact(ctx, prev.Pos)
		}
		if err != nil {
			s.lg.Warn("cluster snapshot: cut the log below the previous snapshot", "previous", prev.Pos, "err", err)
		}
	}
	s.lg.Info("cluster snapshot taken", "position", pos, "from", base, "replayed_records", replayed, "bytes", len(payload),
		"build", built, "duration", time.Since(start), "log_batches_deleted", truncated, "log_kept_from", prev.Pos)
	return pos, nil
}

// countFrom makes pos the latest snapshot this node knows of: it counts
// the records after it from now on (approximately: those it follows from
// now on).
func (s *System) countFrom(pos uint64) {
	s.cm.snapPos.Store(max(s.cm.snapPos.Load(), pos))
	s.cm.sinceSnap.Store(0)
	s.lastSnapTime.Store(s.clock.Now().Unix())
}

// offlineSnapshot builds the payload of a snapshot at an exact position
// of the log, off the actors: the latest snapshot in etcd (base; 0: none)
// restored into each domain's offline image, then the log after it up to
// the revision Replay pins (pos).
func (s *System) offlineSnapshot(ctx context.Context) (pos uint64, payload []byte, base uint64, replayed int, err error) {
	cm := s.cm
	offs := make([]OfflineImage, len(s.exts))
	for i, x := range s.exts {
		oi, ok := x.(OfflineImager)
		if !ok {
			return 0, nil, 0, 0, fmt.Errorf("extension %s %w", x.Name(), errNoOfflineImage)
		}
		offs[i] = oi.OfflineImage()
	}
	secs, base, err := s.loadClusterSnapshot(ctx)
	if err != nil {
		return 0, nil, 0, 0, err
	}
	for i, x := range s.exts {
		sc := secs[x.Name()]
		if _, streamed := x.(StreamedSection); !streamed && sc != nil {
			sc = bytes.Clone(sc)
		}
		if err := offs[i].Restore(sc); err != nil {
			return 0, nil, 0, 0, fmt.Errorf("extension %s: %w", x.Name(), err)
		}
	}
	pos, err = cm.deps.Log.Replay(ctx, base, func(seq uint64, _ string, r wal.Record) error {
		replayed++
		if r.Type == recBarrier {
			return nil
		}
		for i, x := range s.exts {
			if x.Owns(r.Type) {
				return offs[i].Apply(seq, r)
			}
		}
		return fmt.Errorf("seq %d: unknown record type %d: %w", seq, r.Type, ErrCorrupt)
	})
	if err != nil {
		return 0, nil, 0, 0, fmt.Errorf("replay the log after %d: %w", base, err)
	}
	out := make([]Section, len(s.exts))
	for i, x := range s.exts {
		b, err := offs[i].Section()
		if err != nil {
			return 0, nil, 0, 0, fmt.Errorf("extension %s: %w", x.Name(), err)
		}
		out[i] = Section{Name: x.Name(), Parts: [][]byte{b}}
	}
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, out); err != nil {
		return 0, nil, 0, 0, err
	}
	return pos, buf.Bytes(), base, replayed, nil
}

// loadClusterSnapshot cuts the latest snapshot in etcd into its sections
// (views into its payload) and returns its position; with none (or no
// store), no sections at 0.
func (s *System) loadClusterSnapshot(ctx context.Context) (map[string][]byte, uint64, error) {
	snaps := s.cm.deps.Snapshots
	if snaps == nil {
		return nil, 0, nil
	}
	info, payload, err := snaps.Load(ctx)
	if errors.Is(err, etcdlog.ErrNoSnapshot) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("load the cluster's snapshot: %w", err)
	}
	secs, err := DecodeSnapshot(payload)
	if err != nil {
		return nil, 0, fmt.Errorf("the cluster's snapshot at %d (%d bytes) does not decode: %w", info.Pos, len(payload), err)
	}
	return secs, info.Pos, nil
}

// restoreAttempts bounds how often start-up loads the snapshot again
// because a newer one truncated the log while it read.
const restoreAttempts = 5

// restoreCluster rebuilds the state from etcd: the latest snapshot, then
// every record of the replicated log after it. It returns the image, the
// position the follower continues from and the records replayed.
func (s *System) restoreCluster() (uint64, int, error) {
	defer debug.SetGCPercent(debug.SetGCPercent(restoreGCPercent))
	for attempt := 1; ; attempt++ {
		upTo, replayed, err := s.restoreClusterOnce()
		if errors.Is(err, etcdlog.ErrCompacted) && attempt < restoreAttempts {
			s.lg.Warn("cluster restore: the log was truncated while read (a newer snapshot); loading that one", "err", err)
			continue
		}
		return upTo, replayed, err
	}
}

func (s *System) restoreClusterOnce() (uint64, int, error) {
	ctx := context.Background()
	secs, base, err := s.loadClusterSnapshot(ctx)
	if err == nil {
		err = s.restoreSections(secs)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("restore: %w", err)
	}
	replayed := 0
	upTo, err := s.cm.deps.Log.Replay(ctx, base, func(seq uint64, _ string, r wal.Record) error {
		replayed++
		return s.applyRecord(seq, r)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("restore from the replicated log after %d: %w", base, err)
	}
	s.cm.snapPos.Store(base)
	s.cm.sinceSnap.Store(uint64(replayed))
	s.lg.Info("cluster state restored", "snapshot_position", base, "replayed_records", replayed, "up_to", upTo)
	return upTo, replayed, nil
}

// failCluster records that this node cannot go on following the log
// (it fell behind a truncation): /health says so from now on, and
// ClusterDeps.Fatal (cmd: stop the process, so that a restart restores
// from the snapshot) is called once.
func (s *System) failCluster(err error) {
	if !s.cm.fatal.CompareAndSwap(nil, &err) {
		return
	}
	s.lg.Error("cluster: this node stopped following the replicated log; restart it (it then restores from the cluster's snapshot)", "err", err)
	if f := s.cm.deps.Fatal; f != nil {
		f(err)
	}
}
