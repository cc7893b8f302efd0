package etcdlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"gatehouse/actors/cluster/etcdtest"
	"gatehouse/wal"
)

func payloadOf(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// keysUnder counts etcd's keys under prefix.
func keysUnder(t *testing.T, l *Log, prefix string) int64 {
	t.Helper()
	resp, err := l.cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

func save(t *testing.T, s *Snapshots, pos uint64, payload []byte) SnapshotInfo {
	t.Helper()
	k, err := s.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer k.Unlock()
	prev, err := k.Save(context.Background(), pos, payload)
	if err != nil {
		t.Fatalf("save at %d: %v", pos, err)
	}
	return prev
}

func mustLoad(t *testing.T, s *Snapshots, pos uint64, want []byte) {
	t.Helper()
	info, got, err := s.Load(context.Background())
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if info.Pos != pos || !bytes.Equal(got, want) {
		t.Fatalf("load = snapshot at %d of %d bytes, want at %d of %d", info.Pos, len(got), pos, len(want))
	}
}

// snapshotsOn returns a log on a one-member etcd under /s/wal/ and its
// snapshot store, in chunks of chunk bytes (0: the default).
func snapshotsOn(t *testing.T, chunk int) (*Log, *Snapshots) {
	l := open(t, etcdtest.Start(t, 1), 0, "/s/wal/", "w")
	s := l.Snapshots(2 * time.Second)
	if chunk > 0 {
		s.SetChunk(chunk)
	}
	return l, s
}

// TestSnapshotsChunked: a snapshot comes back whole across many chunks
// (more than one page of reads), replaces the older one (whose chunks
// go), and a position not after the current one is refused.
func TestSnapshotsChunked(t *testing.T) {
	l, s := snapshotsOn(t, 1000)
	ctx := context.Background()
	if _, _, err := s.Load(ctx); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("load from an empty etcd = %v, want ErrNoSnapshot", err)
	}
	for _, tc := range []struct {
		pos  uint64
		size int
	}{{10, 0}, {20, 999}, {30, 1000}, {40, 25_500}} { // empty, one short chunk, one full, 26 chunks (> chunkPage)
		payload := payloadOf(tc.size, tc.pos)
		prev := save(t, s, tc.pos, payload)
		if tc.pos > 10 && prev.Pos != tc.pos-10 {
			t.Fatalf("save at %d replaced the snapshot at %d", tc.pos, prev.Pos)
		}
		mustLoad(t, s, tc.pos, payload)
		chunks := max(1, (tc.size+999)/1000)
		if n := keysUnder(t, l, "/s/wal/snap/"); n != int64(chunks) {
			t.Fatalf("snapshot at %d: %d chunk keys in etcd, want %d (older snapshots deleted)", tc.pos, n, chunks)
		}
	}
	k, err := s.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Save(ctx, 40, []byte("x")); err == nil {
		t.Fatal("a snapshot at the current position was saved")
	}
	k.Unlock()
	mustLoad(t, s, 40, payloadOf(25_500, 40))
}

// TestSnapshotCrashBeforePointer: chunks written without their pointer (a
// crash mid-snapshot) leave the previous snapshot in force; the next
// snapshot deletes them, whether they were for an earlier or a later
// position.
func TestSnapshotCrashBeforePointer(t *testing.T) {
	l, s := snapshotsOn(t, 100)
	ctx := context.Background()
	first := payloadOf(450, 1)
	save(t, s, 100, first)
	for _, pos := range []uint64{150, 900} { // what crashed snapshotters left
		for i := range 3 {
			if _, err := l.cli.Put(ctx, s.chunkDir(pos)+fmt.Sprintf("%06d", i), "half"); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustLoad(t, s, 100, first)
	second := payloadOf(250, 2)
	save(t, s, 200, second)
	mustLoad(t, s, 200, second)
	if n := keysUnder(t, l, "/s/wal/snap/"); n != 3 {
		t.Fatalf("%d chunk keys left, want the 3 of the snapshot in force", n)
	}
}

// TestSnapshotLock: one holder at a time; a holder that lost its lease
// cannot save; a damaged chunk is reported, not loaded.
func TestSnapshotLock(t *testing.T) {
	l, s := snapshotsOn(t, 0)
	ctx := context.Background()
	a, err := s.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lock(ctx); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock = %v, want ErrLocked", err)
	}
	// a's lease ends (a pause longer than its TTL): another node takes
	// the lock, and a's late save is refused.
	if _, err := l.cli.Revoke(ctx, a.sess.Lease()); err != nil {
		t.Fatal(err)
	}
	b, err := s.Lock(ctx)
	if err != nil {
		t.Fatalf("lock after the holder's lease ended: %v", err)
	}
	if _, err := a.Save(ctx, 5, []byte("late")); err == nil {
		t.Fatal("a holder whose lease ended saved a snapshot")
	}
	if _, err := b.Save(ctx, 6, []byte("current")); err != nil {
		t.Fatal(err)
	}
	b.Unlock()
	a.Unlock()
	mustLoad(t, s, 6, []byte("current"))
	if _, err := l.cli.Put(ctx, s.chunkDir(6)+"000000", "curreNt"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Load(ctx); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("load of a damaged snapshot = %v, want ErrCorrupt", err)
	}
}

// TestTruncateAndCompact: a follower from a snapshot's position (the end
// of a revision, as Replay returns) keeps following after the log is
// truncated and etcd compacted there; one from inside the cut (a record
// of a deleted batch: it cannot know it saw the batch's last) gets
// ErrCompacted.
func TestTruncateAndCompact(t *testing.T) {
	c := etcdtest.Start(t, 1)
	l := open(t, c, 0, "/t/wal/", "w")
	ctx := context.Background()
	l.Append(ctx, rec("a"))
	b, err := l.Append(ctx, rec("b1"), rec("b2"))
	if err != nil {
		t.Fatal(err)
	}
	l.Append(ctx, rec("c"))
	cut := Seq(Rev(b), MaxBatch-1)
	if _, err := l.Truncate(ctx, cut+1); err != nil {
		t.Fatal(err)
	}
	if err := l.Compact(ctx, cut); err != nil {
		t.Fatal(err)
	}
	if err := l.Compact(ctx, cut); err != nil { // again: nothing to do
		t.Fatalf("compact twice: %v", err)
	}
	if out := follow(t, l, cut, 1); string(out[0].rec.Data) != "c" {
		t.Fatalf("follow from the cut = %q", out[0].rec.Data)
	}
	for _, after := range []uint64{b - 1, b} {
		err = l.Follow(ctx, after, func(uint64, string, wal.Record) error { return nil })
		if !errors.Is(err, ErrCompacted) {
			t.Fatalf("follow from %d, inside the cut = %v, want ErrCompacted", after, err)
		}
	}
}
