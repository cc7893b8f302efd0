package etcdlog

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"gatehouse/wal"
)

// fakeAppender numbers records as Log does (Seq of a revision per batch)
// and blocks while gate is held, so appends queue up behind a batch.
type fakeAppender struct {
	mu      sync.Mutex
	rev     int64
	batches [][]wal.Record
	gate    sync.Mutex
	fail    error
	entered chan struct{} // told when an Append starts (nil: not)
}

func (f *fakeAppender) Append(_ context.Context, recs ...wal.Record) (uint64, error) {
	f.mu.Lock()
	entered := f.entered
	f.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
	}
	f.gate.Lock()
	defer f.gate.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return 0, f.fail
	}
	f.rev++
	f.batches = append(f.batches, recs)
	return Seq(f.rev, len(recs)-1), nil
}

var errUnavailableTest = errors.New("unavailable")

// TestWriterBatches: appends queued behind a batch in flight go as one
// batch, each acknowledged with the sequence number of its own last
// record, in order; Written follows; a failure wraps the unavailable
// error and acknowledges nothing; Close fails what is queued.
func TestWriterBatches(t *testing.T) {
	f := &fakeAppender{}
	w := NewWriter(f, time.Second, errUnavailableTest)
	defer w.Close()
	if _, err := w.Append(wal.Record{Type: 1}); err != nil {
		t.Fatal(err)
	}
	f.gate.Lock() // the next batch waits: the three below queue behind it
	f.mu.Lock()
	f.entered = make(chan struct{}, 1)
	f.mu.Unlock()
	first := make(chan uint64, 1)
	w.AppendAsync([]wal.Record{{Type: 2}}, func(last uint64, err error) { first <- last })
	<-f.entered // the writer took it and waits in Append
	f.mu.Lock()
	f.entered = nil
	f.mu.Unlock()
	type ack struct {
		i    int
		last uint64
		err  error
	}
	acks := make(chan ack, 3)
	for i, n := range []int{2, 1, 3} {
		recs := make([]wal.Record, n)
		w.AppendAsync(recs, func(last uint64, err error) { acks <- ack{i, last, err} })
	}
	f.gate.Unlock()
	<-first
	var got []ack
	for range 3 {
		got = append(got, <-acks)
	}
	f.mu.Lock()
	nb := len(f.batches)
	f.mu.Unlock()
	if nb != 3 {
		t.Errorf("%d batches, want 3 (one, one, then the three queued together)", nb)
	}
	for i, want := range []uint64{Seq(3, 1), Seq(3, 2), Seq(3, 5)} {
		if got[i].i != i || got[i].last != want || got[i].err != nil {
			t.Errorf("ack %d = %+v, want request %d at %d", i, got[i], i, want)
		}
	}
	if w.Written() != Seq(3, 5) {
		t.Errorf("Written = %d, want %d", w.Written(), Seq(3, 5))
	}
	f.mu.Lock()
	f.fail = errors.New("etcd down")
	f.mu.Unlock()
	if _, err := w.Append(wal.Record{}); !errors.Is(err, errUnavailableTest) {
		t.Errorf("a failed append = %v, want it to wrap the unavailable error", err)
	}
	if w.Written() != Seq(3, 5) {
		t.Errorf("Written moved on a failure: %d", w.Written())
	}
	w.Close()
	if _, err := w.Append(wal.Record{}); !errors.Is(err, errUnavailableTest) {
		t.Errorf("an append after Close = %v", err)
	}
}
