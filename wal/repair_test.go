package wal_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/bbolt"

	"gatehouse/wal"
	"gatehouse/wal/waltest"
)

func key(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// writeLog creates a log at path holding testRecord(1..n), truncated before
// truncateBefore (0: not truncated), and closes it.
func writeLog(tb testing.TB, path string, n int, truncateBefore uint64) {
	tb.Helper()
	l := waltest.Open(tb, waltest.WithPath(path))
	appendN(tb, l, n)
	if truncateBefore > 0 {
		mustTruncate(tb, l, truncateBefore)
	}
	if err := l.Close(); err != nil {
		tb.Fatalf("Close() = %v", err)
	}
}

// mutate edits the closed log file at path directly with bbolt.
func mutate(tb testing.TB, path string, fn func(logb, meta *bbolt.Bucket) error) {
	tb.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		tb.Fatalf("bbolt.Open(%s) = %v", path, err)
	}
	defer func() {
		if cerr := db.Close(); cerr != nil {
			tb.Errorf("close %s: %v", path, cerr)
		}
	}()
	err = db.Update(func(tx *bbolt.Tx) error {
		return fn(tx.Bucket([]byte("log")), tx.Bucket([]byte("meta")))
	})
	if err != nil {
		tb.Fatalf("mutate %s: %v", path, err)
	}
}

// editValue replaces the value at seq with edit(a copy of it).
func editValue(seq uint64, edit func([]byte) []byte) func(logb, meta *bbolt.Bucket) error {
	return func(logb, _ *bbolt.Bucket) error {
		return logb.Put(key(seq), edit(bytes.Clone(logb.Get(key(seq)))))
	}
}

// repairCase damages a log of testRecord(1..10) and says what Open must
// leave of it.
type repairCase struct {
	name           string
	truncateBefore uint64 // before damaging; 0: none
	mutate         func(logb, meta *bbolt.Bucket) error
	first, last    uint64  // FirstIndex and LastIndex after repair
	cut            float64 // gatehouse_wal_repaired_records_total
}

var repairCases = []repairCase{
	{name: "intact", mutate: func(_, _ *bbolt.Bucket) error { return nil }, first: 1, last: 10},
	{name: "flipped payload byte", mutate: editValue(7, func(v []byte) []byte { v[len(v)-1] ^= 1; return v }),
		first: 1, last: 6, cut: 4},
	{name: "flipped crc byte", mutate: editValue(3, func(v []byte) []byte { v[2] ^= 0xff; return v }),
		first: 1, last: 2, cut: 8},
	{name: "torn tail value", mutate: editValue(10, func(v []byte) []byte { return v[:len(v)-3] }),
		first: 1, last: 9, cut: 1},
	{name: "value shorter than header", mutate: editValue(10, func(v []byte) []byte { return v[:4] }),
		first: 1, last: 9, cut: 1},
	{name: "empty value", mutate: editValue(8, func([]byte) []byte { return []byte{} }),
		first: 1, last: 7, cut: 3},
	{name: "zeroed type", mutate: editValue(5, func(v []byte) []byte { v[1] = 0; return v }),
		first: 1, last: 4, cut: 6},
	{name: "type 0 with valid crc", mutate: editValue(5, func(v []byte) []byte { v[1] = 0; return wal.Reseal(5, v) }),
		first: 1, last: 4, cut: 6},
	{name: "version 0 with valid crc", mutate: editValue(5, func(v []byte) []byte { v[0] = 0; return wal.Reseal(5, v) }),
		first: 1, last: 4, cut: 6},
	{name: "gap: middle key deleted", mutate: func(logb, _ *bbolt.Bucket) error { return logb.Delete(key(5)) },
		first: 1, last: 4, cut: 5},
	{name: "record copied to another index", mutate: func(logb, _ *bbolt.Bucket) error {
		return logb.Put(key(8), bytes.Clone(logb.Get(key(3))))
	}, first: 1, last: 7, cut: 3},
	{name: "stray key past the end", mutate: func(logb, _ *bbolt.Bucket) error {
		return logb.Put(key(12), wal.EncodeRecord(12, testRecord(12)))
	}, first: 1, last: 10, cut: 1},
	{name: "key of wrong length", mutate: func(logb, _ *bbolt.Bucket) error {
		return logb.Put([]byte("zz"), []byte("junk"))
	}, first: 1, last: 10, cut: 1},
	{name: "first record corrupt", mutate: editValue(1, func(v []byte) []byte { v[6] ^= 1; return v }),
		first: 0, last: 0, cut: 10},
	{name: "first record corrupt after truncation", truncateBefore: 4,
		mutate: editValue(4, func(v []byte) []byte { v[6] ^= 1; return v }), first: 0, last: 3, cut: 7},
	{name: "meta value corrupt", mutate: func(_, meta *bbolt.Bucket) error {
		return meta.Put([]byte("last"), []byte("garbage"))
	}, first: 1, last: 10},
	{name: "meta value missing", mutate: func(_, meta *bbolt.Bucket) error {
		return meta.Delete([]byte("last"))
	}, first: 1, last: 10},
	{name: "meta ahead of the log", mutate: func(_, meta *bbolt.Bucket) error {
		v := binary.BigEndian.AppendUint64(nil, 99)
		v = binary.BigEndian.AppendUint32(v, crc32.Checksum(v, crc32.MakeTable(crc32.Castagnoli)))
		return meta.Put([]byte("last"), v)
	}, first: 1, last: 10},
}

func TestRepairOnOpen(t *testing.T) {
	for _, tt := range repairCases {
		t.Run(tt.name, func(t *testing.T) {
			path := tempPath(t)
			writeLog(t, path, 10, tt.truncateBefore)
			mutate(t, path, tt.mutate)

			reg := prometheus.NewPedanticRegistry()
			l := waltest.Open(t, waltest.WithPath(path), waltest.WithRegisterer(reg))
			checkIndexes(t, l, tt.first, tt.last)
			if got := metricValue(t, reg, "gatehouse_wal_repaired_records_total"); got != tt.cut {
				t.Errorf("repaired records = %v, want %v", got, tt.cut)
			}
			var want []entry
			if tt.first != 0 {
				want = entries(tt.first, tt.last)
			}
			if diff := cmp.Diff(want, replayAll(t, l, tt.last-uint64(len(want)))); diff != "" {
				t.Errorf("records after repair mismatch (-want +got):\n%s", diff)
			}
			// Numbering continues right after the last good record, and
			// the repaired log opens clean.
			if got, err := l.Append(testRecord(int(tt.last) + 1)); err != nil || got != tt.last+1 {
				t.Errorf("Append() after repair = %d, %v, want %d", got, err, tt.last+1)
			}
			l = reopen(t, l, path)
			checkIndexes(t, l, max(tt.first, tt.last+1-uint64(len(want))), tt.last+1)
		})
	}
}

func TestRepairRefusesNewerVersion(t *testing.T) {
	path := tempPath(t)
	writeLog(t, path, 10, 0)
	newer := editValue(6, func(v []byte) []byte { v[0] = 2; return wal.Reseal(6, v) })
	mutate(t, path, newer)

	cfg := wal.DefaultConfig()
	cfg.Path = path
	if l, err := wal.Open(cfg, waltest.Logger(t), nil); !errors.Is(err, wal.ErrUnsupportedVersion) {
		if err == nil {
			_ = l.Close()
		}
		t.Fatalf("Open() of a log with a v2 record = %v, want %v", err, wal.ErrUnsupportedVersion)
	}
	// Nothing was cut.
	mutate(t, path, func(logb, _ *bbolt.Bucket) error {
		if n := logb.Stats().KeyN; n != 10 {
			t.Errorf("log holds %d records after the refused Open, want 10", n)
		}
		return nil
	})
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestRepairLogsOneWarning(t *testing.T) {
	path := tempPath(t)
	writeLog(t, path, 10, 0)
	mutate(t, path, editValue(7, func(v []byte) []byte { v[len(v)-1] ^= 1; return v }))

	var out syncBuffer
	cfg := wal.DefaultConfig()
	cfg.Path = path
	l, err := wal.Open(cfg, slog.New(slog.NewTextHandler(&out, nil)), nil)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	got := out.String()
	t.Log(got)
	if n := strings.Count(got, "\n"); n != 1 {
		t.Errorf("Open() logged %d lines, want 1", n)
	}
	for _, want := range []string{"level=WARN", `msg="cut corrupt tail"`, "component=wal", "from=7", "to=10", "records=4", "last_good=6", "err="} {
		if !strings.Contains(got, want) {
			t.Errorf("repair log %q lacks %q", got, want)
		}
	}
	waltest.Check(t, path)
}
