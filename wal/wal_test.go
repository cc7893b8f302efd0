package wal_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/wal"
	"gatehouse/wal/waltest"
)

func TestOpenErrors(t *testing.T) {
	valid := wal.DefaultConfig()
	valid.Path = tempPath(t)
	tests := []struct {
		name string
		edit func(*wal.Config)
		want error // nil: only check that Open fails
	}{
		{name: "invalid config", edit: func(c *wal.Config) { c.MaxBatch = 0 }},
		{name: "missing parent dir", edit: func(c *wal.Config) {
			c.Path = filepath.Join(t.TempDir(), "missing", "wal.db")
		}, want: fs.ErrNotExist},
		{name: "path is a directory", edit: func(c *wal.Config) { c.Path = t.TempDir() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid
			tt.edit(&cfg)
			l, err := wal.Open(cfg, nil, nil)
			if err == nil {
				_ = l.Close()
				t.Fatalf("Open(%+v) = nil error, want an error", cfg)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Open(%+v) = %v, want %v", cfg, err, tt.want)
			}
		})
	}
}

func TestOpenLockedFileTimesOut(t *testing.T) {
	path := tempPath(t)
	waltest.Open(t, waltest.WithPath(path))
	cfg := wal.DefaultConfig()
	cfg.Path, cfg.OpenTimeout = path, 50*time.Millisecond
	start := time.Now()
	if l, err := wal.Open(cfg, nil, nil); err == nil {
		_ = l.Close()
		t.Fatalf("second Open(%s) = nil error, want a lock timeout", path)
	} else {
		t.Logf("second Open: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("second Open took %v, want about %v", d, cfg.OpenTimeout)
	}
}

func TestAppendReplayRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte{0xab}, 64<<10) // spans overflow pages
	tests := []struct {
		name  string
		calls [][]wal.Record
	}{
		{name: "one record", calls: [][]wal.Record{{{Type: 1, Data: []byte("a")}}}},
		{name: "empty payload", calls: [][]wal.Record{{{Type: 7}}}},
		{name: "type 254, the highest a caller may use", calls: [][]wal.Record{{{Type: 254, Data: []byte{0}}}}},
		{name: "several per call", calls: [][]wal.Record{
			{{Type: 1, Data: []byte("a")}, {Type: 2, Data: []byte("b")}},
			{{Type: 3, Data: []byte("c")}},
			{{Type: 1, Data: []byte("d")}, {Type: 1, Data: []byte("e")}, {Type: 2, Data: nil}},
		}},
		{name: "64 KiB payload", calls: [][]wal.Record{{{Type: 1, Data: big}}, {{Type: 2, Data: []byte("x")}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := waltest.Open(t)
			var want []entry
			for _, recs := range tt.calls {
				last, err := l.Append(recs...)
				if err != nil {
					t.Fatalf("Append(%d records) = %v", len(recs), err)
				}
				if wantLast := uint64(len(want) + len(recs)); last != wantLast {
					t.Errorf("Append(%d records) = %d, want %d", len(recs), last, wantLast)
				}
				for _, r := range recs {
					want = append(want, entry{Seq: uint64(len(want) + 1), Rec: r})
				}
			}
			checkEntries(t, l, want)
			checkIndexes(t, l, 1, uint64(len(want)))
		})
	}
}

func TestReplayAfter(t *testing.T) {
	l := waltest.Open(t)
	appendN(t, l, 10)
	tests := []struct {
		after uint64
		want  []entry
	}{
		{after: 0, want: entries(1, 10)},
		{after: 3, want: entries(4, 10)},
		{after: 9, want: entries(10, 10)},
		{after: 10, want: nil},
		{after: 20, want: nil},
		{after: ^uint64(0), want: nil},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, replayAll(t, l, tt.after)); diff != "" {
			t.Errorf("Replay(%d) mismatch (-want +got):\n%s", tt.after, diff)
		}
	}
}

func TestReplayManyChunks(t *testing.T) {
	l := waltest.Open(t)
	const n = 2500 // more than two read chunks
	recs := make([]wal.Record, n)
	for i := range recs {
		recs[i] = testRecord(i + 1)
	}
	if _, err := l.Append(recs...); err != nil {
		t.Fatalf("Append(%d records) = %v", n, err)
	}
	checkEntries(t, l, entries(1, n))
}

func TestReplayFnError(t *testing.T) {
	l := waltest.Open(t)
	appendN(t, l, 10)
	errStop := errors.New("stop")
	var seen []uint64
	err := l.Replay(0, func(seq uint64, _ wal.Record) error {
		seen = append(seen, seq)
		if seq == 5 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Errorf("Replay(0) = %v, want %v", err, errStop)
	}
	if diff := cmp.Diff([]uint64{1, 2, 3, 4, 5}, seen); diff != "" {
		t.Errorf("Replay(0) called fn for (-want +got):\n%s", diff)
	}
}

func TestReplayCompacted(t *testing.T) {
	l := waltest.Open(t)
	appendN(t, l, 10)
	if err := l.TruncateBefore(5); err != nil {
		t.Fatalf("TruncateBefore(5) = %v", err)
	}
	for _, after := range []uint64{0, 3} {
		if err := l.Replay(after, func(uint64, wal.Record) error { return nil }); !errors.Is(err, wal.ErrCompacted) {
			t.Errorf("Replay(%d) after TruncateBefore(5) = %v, want %v", after, err, wal.ErrCompacted)
		}
	}
	if diff := cmp.Diff(entries(5, 10), replayAll(t, l, 4)); diff != "" {
		t.Errorf("Replay(4) mismatch (-want +got):\n%s", diff)
	}
	if err := l.TruncateBefore(11); err != nil {
		t.Fatalf("TruncateBefore(11) = %v", err)
	}
	if err := l.Replay(9, func(uint64, wal.Record) error { return nil }); !errors.Is(err, wal.ErrCompacted) {
		t.Errorf("Replay(9) of an emptied log = %v, want %v", err, wal.ErrCompacted)
	}
	if got := replayAll(t, l, 10); len(got) != 0 {
		t.Errorf("Replay(10) of an emptied log = %v, want nothing", got)
	}
}

func TestIndexesThroughTruncation(t *testing.T) {
	path := tempPath(t)
	l := waltest.Open(t, waltest.WithPath(path))
	type step struct {
		name        string
		do          func()
		first, last uint64
	}
	steps := []step{
		{name: "fresh", do: func() {}, first: 0, last: 0},
		{name: "append 10", do: func() { appendN(t, l, 10) }, first: 1, last: 10},
		{name: "truncate before 1", do: func() { mustTruncate(t, l, 1) }, first: 1, last: 10},
		{name: "truncate before 4", do: func() { mustTruncate(t, l, 4) }, first: 4, last: 10},
		{name: "truncate before 3 again", do: func() { mustTruncate(t, l, 3) }, first: 4, last: 10},
		{name: "reopen", do: func() { l = reopen(t, l, path) }, first: 4, last: 10},
		{name: "truncate all", do: func() { mustTruncate(t, l, 11) }, first: 0, last: 10},
		{name: "reopen empty", do: func() { l = reopen(t, l, path) }, first: 0, last: 10},
		{name: "append after empty", do: func() { appendN(t, l, 2) }, first: 11, last: 12},
		{name: "reopen again", do: func() { l = reopen(t, l, path) }, first: 11, last: 12},
	}
	for _, s := range steps {
		s.do()
		t.Logf("after %s", s.name)
		checkIndexes(t, l, s.first, s.last)
	}
	if diff := cmp.Diff(entries(11, 12), replayAll(t, l, 10)); diff != "" {
		t.Errorf("Replay(10) mismatch (-want +got):\n%s", diff)
	}
}

func mustTruncate(tb testing.TB, l *wal.Log, seq uint64) {
	tb.Helper()
	if err := l.TruncateBefore(seq); err != nil {
		tb.Fatalf("TruncateBefore(%d) = %v", seq, err)
	}
}

func TestTruncateBeyondLast(t *testing.T) {
	l := waltest.Open(t)
	appendN(t, l, 3)
	if err := l.TruncateBefore(5); !errors.Is(err, wal.ErrOutOfRange) {
		t.Errorf("TruncateBefore(5) with last 3 = %v, want %v", err, wal.ErrOutOfRange)
	}
	checkIndexes(t, l, 1, 3)
}

func TestSetNext(t *testing.T) {
	tests := []struct {
		name     string
		before   func(tb testing.TB, l *wal.Log)
		idx      uint64
		wantErr  error
		wantNext uint64
	}{
		{name: "fresh log", before: func(testing.TB, *wal.Log) {}, idx: 100, wantNext: 101},
		{name: "fresh log zero", before: func(testing.TB, *wal.Log) {}, idx: 0, wantNext: 1},
		{name: "emptied log, higher", before: func(tb testing.TB, l *wal.Log) {
			tb.Helper()
			appendN(tb, l, 5)
			mustTruncate(tb, l, 6)
		}, idx: 50, wantNext: 51},
		{name: "emptied log, lower never goes back", before: func(tb testing.TB, l *wal.Log) {
			tb.Helper()
			appendN(tb, l, 5)
			mustTruncate(tb, l, 6)
		}, idx: 2, wantNext: 6},
		{name: "log with records", before: func(tb testing.TB, l *wal.Log) {
			tb.Helper()
			appendN(tb, l, 5)
		}, idx: 50, wantErr: wal.ErrNotEmpty, wantNext: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tempPath(t)
			l := waltest.Open(t, waltest.WithPath(path))
			tt.before(t, l)
			if err := l.SetNext(tt.idx); !errors.Is(err, tt.wantErr) {
				t.Fatalf("SetNext(%d) = %v, want %v", tt.idx, err, tt.wantErr)
			}
			l = reopen(t, l, path) // the floor is durable
			if got, err := l.Append(testRecord(1)); err != nil || got != tt.wantNext {
				t.Errorf("Append() after SetNext(%d) = %d, %v, want %d", tt.idx, got, err, tt.wantNext)
			}
		})
	}
}

func TestAppendInvalid(t *testing.T) {
	l := waltest.Open(t)
	tests := []struct {
		name string
		recs []wal.Record
	}{
		{name: "no records", recs: nil},
		{name: "type 0", recs: []wal.Record{{Type: 0, Data: []byte("x")}}},
		{name: "type 0 after a valid one", recs: []wal.Record{{Type: 1}, {Type: 0}}},
		{name: "TypeLost, reserved for Repair", recs: []wal.Record{{Type: wal.TypeLost, Data: []byte("x")}}},
	}
	for _, tt := range tests {
		if got, err := l.Append(tt.recs...); !errors.Is(err, wal.ErrInvalidRecord) || got != 0 {
			t.Errorf("%s: Append() = %d, %v, want 0, %v", tt.name, got, err, wal.ErrInvalidRecord)
		}
	}
	checkIndexes(t, l, 0, 0)
}

func TestClose(t *testing.T) {
	l := waltest.Open(t)
	appendN(t, l, 3)
	if err := l.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	calls := map[string]func() error{
		"Close":       l.Close,
		"Append":      func() error { _, err := l.Append(testRecord(1)); return err },
		"Replay":      func() error { return l.Replay(0, func(uint64, wal.Record) error { return nil }) },
		"FirstIndex":  func() error { _, err := l.FirstIndex(); return err },
		"LastIndex":   func() error { _, err := l.LastIndex(); return err },
		"Truncate":    func() error { return l.TruncateBefore(2) },
		"SetNext":     func() error { return l.SetNext(10) },
		"AppendAsync": func() error { return appendAsyncErr(l) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, wal.ErrClosed) {
			t.Errorf("%s after Close = %v, want %v", name, err, wal.ErrClosed)
		}
	}
}

// appendAsyncErr returns the error AppendAsync reports before returning, or
// an error if done was not called synchronously.
func appendAsyncErr(l *wal.Log) error {
	got := errors.New("done not called before AppendAsync returned")
	l.AppendAsync([]wal.Record{testRecord(1)}, func(_ uint64, err error) { got = err })
	return got
}

// TestFailStop: a commit that fails (an injected disk error) is not
// acknowledged, and the log then refuses every write, even once the disk
// works again, until it is reopened; what was acknowledged before is
// there after the reopen and numbering goes on from it.
func TestFailStop(t *testing.T) {
	path := tempPath(t)
	reg := prometheus.NewPedanticRegistry()
	l := waltest.Open(t, waltest.WithPath(path), waltest.WithRegisterer(reg))
	appendN(t, l, 2)
	errDisk := errors.New("fsync: input/output error")
	l.SetFaultHook(func() error { return errDisk })
	if got, err := l.Append(testRecord(3)); !errors.Is(err, errDisk) || !errors.Is(err, wal.ErrFailed) || got != 0 {
		t.Errorf("Append() with failing commit = %d, %v, want 0, ErrFailed and the disk's error", got, err)
	}
	l.SetFaultHook(nil) // the disk "recovers": the log must not trust it
	if got, err := l.Append(testRecord(3)); !errors.Is(err, wal.ErrFailed) || got != 0 {
		t.Errorf("Append() after a failed commit = %d, %v, want ErrFailed", got, err)
	}
	if err := appendAsyncErr(l); !errors.Is(err, wal.ErrFailed) {
		t.Errorf("AppendAsync() after a failed commit = %v, want ErrFailed", err)
	}
	if err := l.TruncateBefore(2); !errors.Is(err, wal.ErrFailed) {
		t.Errorf("TruncateBefore() after a failed commit = %v, want ErrFailed", err)
	}
	if err := l.Err(); !errors.Is(err, errDisk) {
		t.Errorf("Err() = %v, want the first failure", err)
	}
	if v := metricValue(t, reg, "gatehouse_wal_failed"); v != 1 {
		t.Errorf("gatehouse_wal_failed = %v, want 1", v)
	}
	checkEntries(t, l, entries(1, 2)) // reads still work
	l = reopen(t, l, path)
	if l.Err() != nil {
		t.Fatalf("Err() after reopen = %v", l.Err())
	}
	if got, err := l.Append(testRecord(3)); err != nil || got != 3 {
		t.Errorf("Append() after reopen = %d, %v, want 3", got, err)
	}
	checkEntries(t, l, entries(1, 3))
}

// TestFullDisk fills a real, small filesystem (a 4 MiB tmpfs the test
// mounts; root only) with appends: the append that does not fit fails
// with ErrFailed, nothing after it is accepted even once space is freed,
// and every acknowledged record is there after a reopen.
func TestFullDisk(t *testing.T) {
	dir := mountTmpfs(t, "4m")
	path := filepath.Join(dir, "wal.db")
	l := waltest.Open(t, waltest.WithPath(path), waltest.WithSync())
	payload := bytes.Repeat([]byte{0xAB}, 256<<10)
	var acked uint64
	var failure error
	for i := 0; i < 64 && failure == nil; i++ {
		last, err := l.Append(wal.Record{Type: 1, Data: payload})
		if err != nil {
			failure = err
			break
		}
		acked = last
	}
	if !errors.Is(failure, wal.ErrFailed) || !errors.Is(failure, syscall.ENOSPC) {
		t.Fatalf("after %d appends: %v, want ErrFailed wrapping ENOSPC", acked, failure)
	}
	if acked == 0 {
		t.Fatal("nothing fitted on the filesystem")
	}
	// Free space: the log still refuses (its pages may be half written).
	if err := os.WriteFile(filepath.Join(dir, "spare"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(testRecord(1)); !errors.Is(err, wal.ErrFailed) {
		t.Errorf("Append() after ENOSPC = %v, want ErrFailed", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	l = waltest.Open(t, waltest.WithPath(path))
	var n uint64
	if err := l.Replay(0, func(seq uint64, r wal.Record) error {
		n++
		if seq != n || !bytes.Equal(r.Data, payload) {
			return fmt.Errorf("record %d: %d bytes", seq, len(r.Data))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != acked {
		t.Errorf("reopened log holds %d records, want the %d acknowledged", n, acked)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	path := tempPath(t)
	l := waltest.Open(t, waltest.WithPath(path), waltest.WithRegisterer(reg))
	if _, err := l.Append(testRecord(1), testRecord(2)); err != nil {
		t.Fatalf("Append() = %v", err)
	}
	appendN(t, l, 1)
	want := map[string]float64{
		"gatehouse_wal_appended_records_total":  3,
		"gatehouse_wal_batch_records":           2,
		"gatehouse_wal_commit_duration_seconds": 2,
		"gatehouse_wal_corrupt_records":         0,
	}
	for name, v := range want {
		if got := metricValue(t, reg, name); got != v {
			t.Errorf("metric %s = %v, want %v", name, got, v)
		}
	}
	// Close unregisters, so the same registry takes a reopened log.
	reopen(t, l, path, waltest.WithRegisterer(reg))
	if got := metricValue(t, reg, "gatehouse_wal_appended_records_total"); got != 0 {
		t.Errorf("appended after reopen = %v, want 0", got)
	}
	// A second log on the same registry fails instead of sharing metrics.
	cfg := wal.DefaultConfig()
	cfg.Path = tempPath(t)
	if l2, err := wal.Open(cfg, nil, reg); err == nil {
		_ = l2.Close()
		t.Errorf("Open() of a second log on the same registry = nil error, want a registration error")
	}
}
