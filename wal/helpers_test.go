package wal_test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/wal"
	"gatehouse/wal/waltest"
)

// entry is one replayed record.
type entry struct {
	Seq uint64
	Rec wal.Record
}

// testRecord is the i-th record of a test: types cycle through 1..3.
func testRecord(i int) wal.Record {
	return wal.Record{Type: wal.Type(1 + i%3), Data: fmt.Appendf(nil, "record-%d", i)}
}

// entries returns the entries testRecord(from..to) stored at from..to.
func entries(from, to uint64) []entry {
	var es []entry
	for s := from; s <= to; s++ {
		es = append(es, entry{Seq: s, Rec: testRecord(int(s))})
	}
	return es
}

// appendN appends testRecord(last+1 .. last+n), one Append each, checking
// each returned sequence.
func appendN(tb testing.TB, l *wal.Log, n int) {
	tb.Helper()
	for range n {
		prev, err := l.LastIndex()
		if err != nil {
			tb.Fatalf("LastIndex() = %v", err)
		}
		last, err := l.Append(testRecord(int(prev) + 1))
		if err != nil {
			tb.Fatalf("Append() = %v", err)
		}
		if last != prev+1 {
			tb.Fatalf("Append() = %d, want %d", last, prev+1)
		}
	}
}

// replayAll returns every record after after.
func replayAll(tb testing.TB, l *wal.Log, after uint64) []entry {
	tb.Helper()
	var got []entry
	err := l.Replay(after, func(seq uint64, rec wal.Record) error {
		got = append(got, entry{Seq: seq, Rec: rec})
		return nil
	})
	if err != nil {
		tb.Fatalf("Replay(%d) = %v", after, err)
	}
	return got
}

// checkIndexes fails tb unless FirstIndex and LastIndex are first and last.
func checkIndexes(tb testing.TB, l *wal.Log, first, last uint64) {
	tb.Helper()
	if got, err := l.FirstIndex(); err != nil || got != first {
		tb.Errorf("FirstIndex() = %d, %v, want %d", got, err, first)
	}
	if got, err := l.LastIndex(); err != nil || got != last {
		tb.Errorf("LastIndex() = %d, %v, want %d", got, err, last)
	}
}

// checkEntries fails tb unless the log holds exactly want.
func checkEntries(tb testing.TB, l *wal.Log, want []entry) {
	tb.Helper()
	if diff := cmp.Diff(want, replayAll(tb, l, 0)); diff != "" {
		tb.Errorf("Replay(0) mismatch (-want +got):\n%s", diff)
	}
}

// tempPath returns a wal file path in a new temp dir.
func tempPath(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(tb.TempDir(), "wal.db")
}

// metricValue returns the counter or gauge value, or the histogram sample
// count, of the metric name in reg.
func metricValue(tb testing.TB, reg prometheus.Gatherer, name string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatalf("Gather() = %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		}
		return float64(m.GetHistogram().GetSampleCount())
	}
	tb.Fatalf("metric %s not registered", name)
	return 0
}

// reopen closes l and opens the log at path again.
func reopen(tb testing.TB, l *wal.Log, path string, opts ...waltest.Option) *wal.Log {
	tb.Helper()
	if err := l.Close(); err != nil {
		tb.Fatalf("Close() = %v", err)
	}
	return waltest.Open(tb, append([]waltest.Option{waltest.WithPath(path)}, opts...)...)
}

// mountTmpfs mounts a tmpfs of size (as mount's -o size=) on a new temp
// dir and unmounts it when the test ends. It needs root: elsewhere the
// test is skipped, except under CI=true, where it fails.
func mountTmpfs(tb testing.TB, size string) string {
	tb.Helper()
	dir := tb.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("mount tmpfs (root needed): %v", err)
		}
		tb.Skipf("mount tmpfs (root needed): %v", err)
	}
	tb.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			tb.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
