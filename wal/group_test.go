package wal_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/wal"
	"gatehouse/wal/waltest"
)

// concurrentAppend runs writers goroutines doing perWriter single-record
// Appends each and returns, per sequence, the payload its Append sent.
func concurrentAppend(tb testing.TB, l *wal.Log, writers, perWriter int) map[uint64][]byte {
	tb.Helper()
	var (
		mu   sync.Mutex
		sent = make(map[uint64][]byte, writers*perWriter)
		wg   sync.WaitGroup
	)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				data := fmt.Appendf(nil, "writer-%d-%d", w, i)
				seq, err := l.Append(wal.Record{Type: 1, Data: data})
				if err != nil {
					tb.Errorf("Append() = %v", err)
					return
				}
				mu.Lock()
				if prev, dup := sent[seq]; dup {
					tb.Errorf("Append() = %d twice: %q and %q", seq, prev, data)
				}
				sent[seq] = data
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return sent
}

func TestGroupCommit(t *testing.T) {
	const writers, perWriter = 64, 100
	reg := prometheus.NewPedanticRegistry()
	l := waltest.Open(t, waltest.WithSync(), waltest.WithRegisterer(reg))
	sent := concurrentAppend(t, l, writers, perWriter)

	seqs := slices.Sorted(func(yield func(uint64) bool) {
		for s := range sent {
			if !yield(s) {
				return
			}
		}
	})
	const n = writers * perWriter
	if len(seqs) != n || seqs[0] != 1 || seqs[len(seqs)-1] != n {
		t.Fatalf("acknowledged %d sequences %d..%d, want %d sequences 1..%d", len(seqs), seqs[0], seqs[len(seqs)-1], n, n)
	}
	got := replayAll(t, l, 0)
	if len(got) != n {
		t.Fatalf("Replay(0) returned %d records, want %d", len(got), n)
	}
	for _, e := range got {
		if !bytes.Equal(e.Rec.Data, sent[e.Seq]) {
			t.Errorf("record %d = %q, want %q", e.Seq, e.Rec.Data, sent[e.Seq])
		}
	}
	commits := l.Commits()
	if commits >= n {
		t.Errorf("Commits() = %d for %d records, want fewer commits than records", commits, n)
	}
	if got := metricValue(t, reg, "gatehouse_wal_batch_records"); got != float64(commits) {
		t.Errorf("batch histogram count = %v, want Commits() = %d", got, commits)
	}
	t.Logf("%d records in %d commits (%.1f records/commit)", n, commits, float64(n)/float64(commits))
}

func TestMaxBatch(t *testing.T) {
	const maxBatch = 4
	reg := prometheus.NewPedanticRegistry()
	l := waltest.Open(t, waltest.WithRegisterer(reg), waltest.WithConfig(func(c *wal.Config) { c.MaxBatch = maxBatch }))
	sent := concurrentAppend(t, l, 16, 50)
	if len(sent) != 800 {
		t.Fatalf("acknowledged %d sequences, want 800", len(sent))
	}
	// One call larger than MaxBatch is committed whole, in a batch of its own.
	recs := make([]wal.Record, 10)
	for i := range recs {
		recs[i] = testRecord(801 + i)
	}
	if last, err := l.Append(recs...); err != nil || last != 810 {
		t.Fatalf("Append(10 records) = %d, %v, want 810", last, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "gatehouse_wal_batch_records" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == maxBatch && b.GetCumulativeCount() != h.GetSampleCount()-1 {
				t.Errorf("%d of %d batches had <= %d records, want all but the oversized one",
					b.GetCumulativeCount(), h.GetSampleCount(), maxBatch)
			}
		}
	}
}

func TestCloseDuringAppends(t *testing.T) {
	path := tempPath(t)
	l := waltest.Open(t, waltest.WithPath(path))
	var (
		mu    sync.Mutex
		acked []uint64
		wg    sync.WaitGroup
	)
	for range 16 {
		wg.Go(func() {
			for {
				seq, err := l.Append(testRecord(1))
				if errors.Is(err, wal.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Append() = %v, want success or ErrClosed", err)
					return
				}
				mu.Lock()
				acked = append(acked, seq)
				mu.Unlock()
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	if err := l.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	wg.Wait()
	l = waltest.Open(t, waltest.WithPath(path))
	last, err := l.LastIndex()
	if err != nil {
		t.Fatalf("LastIndex() = %v", err)
	}
	if uint64(len(acked)) != last {
		t.Errorf("%d Appends acknowledged before Close, log holds %d", len(acked), last)
	}
}

func TestTruncateReplayDuringAppends(t *testing.T) {
	l := waltest.Open(t)
	appendN(t, l, 10)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := l.Append(testRecord(1)); err != nil {
					t.Errorf("Append() = %v", err)
					return
				}
			}
		})
	}
	for range 50 {
		last, err := l.LastIndex()
		if err != nil {
			t.Fatalf("LastIndex() = %v", err)
		}
		mustTruncate(t, l, last-5)
		first, err := l.FirstIndex()
		if err != nil {
			t.Fatalf("FirstIndex() = %v", err)
		}
		prev := first - 1
		err = l.Replay(prev, func(seq uint64, _ wal.Record) error {
			if seq != prev+1 {
				return fmt.Errorf("index %d after %d", seq, prev)
			}
			prev = seq
			return nil
		})
		// A truncation racing with the replay may delete what it was about
		// to read; that must surface as ErrCompacted, never as a gap.
		if err != nil && !errors.Is(err, wal.ErrCompacted) {
			t.Fatalf("Replay(%d) = %v", first-1, err)
		}
	}
	close(stop)
	wg.Wait()
}
