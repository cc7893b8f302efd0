package wal_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"gatehouse/wal"
	"gatehouse/wal/waltest"
)

// asyncResult records what one AppendAsync callback received.
type asyncResult struct {
	calls atomic.Int32
	last  atomic.Uint64
	err   atomic.Pointer[error]
}

func (r *asyncResult) done(wg *sync.WaitGroup) func(uint64, error) {
	return func(last uint64, err error) {
		r.last.Store(last)
		if err != nil {
			r.err.Store(&err)
		}
		if r.calls.Add(1) == 1 {
			wg.Done()
		}
	}
}

func TestAppendAsync(t *testing.T) {
	l := waltest.Open(t, waltest.WithSync())
	const n = 500
	results := make([]asyncResult, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		recs := []wal.Record{testRecord(2*i + 1), testRecord(2*i + 2)}
		l.AppendAsync(recs, results[i].done(&wg))
	}
	wg.Wait()
	for i := range results {
		r := &results[i]
		if err := r.err.Load(); err != nil {
			t.Fatalf("call %d: done(_, %v), want nil error", i, *err)
		}
		// Calls from one goroutine are committed in order, two records each.
		if want := uint64(2*i + 2); r.last.Load() != want {
			t.Errorf("call %d: done(%d, nil), want done(%d, nil)", i, r.last.Load(), want)
		}
	}
	checkEntries(t, l, entries(1, 2*n))
	if err := l.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	for i := range results {
		if c := results[i].calls.Load(); c != 1 {
			t.Errorf("call %d: done called %d times, want 1", i, c)
		}
	}
}

func TestCloseWaitsForAsync(t *testing.T) {
	l := waltest.Open(t)
	const n = 2000
	results := make([]asyncResult, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		l.AppendAsync([]wal.Record{testRecord(i + 1)}, results[i].done(&wg))
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	for i := range results {
		r := &results[i]
		if c, err := r.calls.Load(), r.err.Load(); c != 1 || err != nil || r.last.Load() != uint64(i+1) {
			t.Fatalf("call %d: done called %d times, last %d, err %v; want once, %d, nil", i, c, r.last.Load(), err, i+1)
		}
	}
}

func TestAppendAsyncErrors(t *testing.T) {
	l := waltest.Open(t)
	errDisk := errors.New("disk on fire")
	tests := []struct {
		name    string
		recs    []wal.Record
		hook    func() error
		close   bool
		wantErr error
	}{
		{name: "nil records", recs: nil, wantErr: wal.ErrInvalidRecord},
		{name: "type 0", recs: []wal.Record{{Type: 0}}, wantErr: wal.ErrInvalidRecord},
		{name: "commit fails", recs: []wal.Record{testRecord(1)}, hook: func() error { return errDisk }, wantErr: errDisk},
		{name: "after close", recs: []wal.Record{testRecord(1)}, close: true, wantErr: wal.ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l.SetFaultHook(tt.hook)
			if tt.close {
				if err := l.Close(); err != nil {
					t.Fatalf("Close() = %v", err)
				}
			}
			var r asyncResult
			var wg sync.WaitGroup
			wg.Add(1)
			l.AppendAsync(tt.recs, r.done(&wg))
			wg.Wait()
			err := r.err.Load()
			if err == nil || !errors.Is(*err, tt.wantErr) || r.last.Load() != 0 || r.calls.Load() != 1 {
				t.Errorf("done(%d, %v) called %d times, want done(0, %v) once", r.last.Load(), err, r.calls.Load(), tt.wantErr)
			}
		})
	}
}

func TestAppendAsyncNilDone(t *testing.T) {
	l := waltest.Open(t)
	l.AppendAsync([]wal.Record{testRecord(1)}, nil)
	l.AppendAsync(nil, nil) // invalid: the error has nowhere to go, but no panic
	if last, err := l.Append(testRecord(2)); err != nil || last != 2 {
		t.Errorf("Append() after AppendAsync(_, nil) = %d, %v, want 2", last, err)
	}
}
