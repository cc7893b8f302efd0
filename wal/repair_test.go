package wal_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
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

// repairCase damages a log of testRecord(1..10). Open must change nothing
// and Replay must refuse to read past the damage; Repair must replace only
// the bad entries.
type repairCase struct {
	name           string
	truncateBefore uint64 // before damaging; 0: none
	mutate         func(logb, meta *bbolt.Bucket) error
	bad            []uint64 // BadRecord.Index of each bad entry (0: stray key)
	lost           []uint64 // sequences Replay no longer delivers after Repair
	last           uint64   // LastIndex after Repair
	extra          []entry  // records beyond 10 that survive (a valid stray)
}

var repairCases = []repairCase{
	{name: "intact", mutate: func(_, _ *bbolt.Bucket) error { return nil }, last: 10},
	{name: "flipped payload bit in the middle", mutate: editValue(7, func(v []byte) []byte { v[len(v)-1] ^= 1; return v }),
		bad: []uint64{7}, lost: []uint64{7}, last: 10},
	{name: "flipped crc byte", mutate: editValue(3, func(v []byte) []byte { v[2] ^= 0xff; return v }),
		bad: []uint64{3}, lost: []uint64{3}, last: 10},
	{name: "two flipped records", mutate: func(logb, meta *bbolt.Bucket) error {
		if err := editValue(3, func(v []byte) []byte { v[6] ^= 4; return v })(logb, meta); err != nil {
			return err
		}
		return editValue(8, func(v []byte) []byte { v[7] ^= 0x80; return v })(logb, meta)
	}, bad: []uint64{3, 8}, lost: []uint64{3, 8}, last: 10},
	// bbolt commits are atomic: a bad last record is damage too, never a
	// torn write, and is not cut either.
	{name: "short last value", mutate: editValue(10, func(v []byte) []byte { return v[:len(v)-3] }),
		bad: []uint64{10}, lost: []uint64{10}, last: 10},
	{name: "value shorter than header", mutate: editValue(10, func(v []byte) []byte { return v[:4] }),
		bad: []uint64{10}, lost: []uint64{10}, last: 10},
	{name: "empty value", mutate: editValue(8, func([]byte) []byte { return []byte{} }),
		bad: []uint64{8}, lost: []uint64{8}, last: 10},
	{name: "zeroed type", mutate: editValue(5, func(v []byte) []byte { v[1] = 0; return v }),
		bad: []uint64{5}, lost: []uint64{5}, last: 10},
	{name: "type 0 with valid crc", mutate: editValue(5, func(v []byte) []byte { v[1] = 0; return wal.Reseal(5, v) }),
		bad: []uint64{5}, lost: []uint64{5}, last: 10},
	{name: "version 0 with valid crc", mutate: editValue(5, func(v []byte) []byte { v[0] = 0; return wal.Reseal(5, v) }),
		bad: []uint64{5}, lost: []uint64{5}, last: 10},
	{name: "gap: middle key deleted", mutate: func(logb, _ *bbolt.Bucket) error { return logb.Delete(key(5)) },
		bad: []uint64{5}, lost: []uint64{5}, last: 10},
	{name: "record copied to another index", mutate: func(logb, _ *bbolt.Bucket) error {
		return logb.Put(key(8), bytes.Clone(logb.Get(key(3))))
	}, bad: []uint64{8}, lost: []uint64{8}, last: 10},
	// A valid CRC vouches for its key: 12 is kept, 11 is missing.
	{name: "valid record past the end", mutate: func(logb, _ *bbolt.Bucket) error {
		return logb.Put(key(12), wal.EncodeRecord(12, testRecord(12)))
	}, bad: []uint64{11}, lost: []uint64{11}, last: 12, extra: []entry{{Seq: 12, Rec: testRecord(12)}}},
	{name: "bad value past the end", mutate: func(logb, _ *bbolt.Bucket) error {
		return logb.Put(key(12), []byte("junk-junk"))
	}, bad: []uint64{0}, last: 10},
	{name: "key of wrong length", mutate: func(logb, _ *bbolt.Bucket) error {
		return logb.Put([]byte("zz"), []byte("junk"))
	}, bad: []uint64{0}, last: 10},
	{name: "stray key in a log truncated whole", truncateBefore: 11, mutate: func(logb, _ *bbolt.Bucket) error {
		return logb.Put([]byte("zz"), []byte("junk"))
	}, bad: []uint64{0}, last: 10},
	{name: "first record corrupt", mutate: editValue(1, func(v []byte) []byte { v[6] ^= 1; return v }),
		bad: []uint64{1}, lost: []uint64{1}, last: 10},
	{name: "first record corrupt after truncation", truncateBefore: 4,
		mutate: editValue(4, func(v []byte) []byte { v[6] ^= 1; return v }), bad: []uint64{4}, lost: []uint64{4}, last: 10},
	// The meta value has its own CRC and is rebuilt from the log by Open.
	{name: "meta value corrupt", mutate: func(_, meta *bbolt.Bucket) error {
		return meta.Put([]byte("last"), []byte("garbage"))
	}, last: 10},
	{name: "meta value missing", mutate: func(_, meta *bbolt.Bucket) error {
		return meta.Delete([]byte("last"))
	}, last: 10},
	// Meta is written with every batch: records 11..99 were assigned and
	// are gone. Repair numbers on after the last record present.
	{name: "meta ahead of the log", mutate: func(_, meta *bbolt.Bucket) error {
		v := binary.BigEndian.AppendUint64(nil, 99)
		v = binary.BigEndian.AppendUint32(v, crc32.Checksum(v, crc32.MakeTable(crc32.Castagnoli)))
		return meta.Put([]byte("last"), v)
	}, bad: []uint64{11}, last: 10},
}

// TestOpenKeepsBadRecordsAndRepairReplacesThem: Open deletes nothing and
// Replay refuses to read past a bad entry with a *CorruptError naming it,
// while a Replay after it (a snapshot covers it) works; Repair copies the
// file first, then replaces only the bad entries, and every intact record
// after them is replayed again.
func TestOpenKeepsBadRecordsAndRepairReplacesThem(t *testing.T) {
	for _, tt := range repairCases {
		t.Run(tt.name, func(t *testing.T) {
			path := tempPath(t)
			writeLog(t, path, 10, tt.truncateBefore)
			mutate(t, path, tt.mutate)
			first := max(tt.truncateBefore, 1)
			keys := keyCount(t, path)

			reg := prometheus.NewPedanticRegistry()
			l := waltest.Open(t, waltest.WithPath(path), waltest.WithRegisterer(reg))
			if got := metricValue(t, reg, "gatehouse_wal_corrupt_records"); got != float64(len(tt.bad)) {
				t.Errorf("gatehouse_wal_corrupt_records = %v, want %d", got, len(tt.bad))
			}
			err := l.Replay(first-1, func(uint64, wal.Record) error { return nil })
			checkCorrupt(t, err, tt.bad)
			if len(tt.bad) > 0 && tt.bad[0] != 0 && tt.bad[len(tt.bad)-1] <= 10 {
				// Records a snapshot covers are not needed: replay after them.
				after := tt.bad[len(tt.bad)-1]
				if diff := cmp.Diff(entries(after+1, 10), replayAll(t, l, after)); diff != "" {
					t.Errorf("Replay(%d) past the bad records mismatch (-want +got):\n%s", after, diff)
				}
			}
			if cerr := l.Close(); cerr != nil {
				t.Fatalf("Close() = %v", cerr)
			}
			if got := keyCount(t, path); got != keys {
				t.Errorf("Open() left %d keys of %d: it must delete nothing", got, keys)
			}
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}

			rep := repair(t, path)
			var gotBad []uint64
			for _, b := range rep.Bad {
				gotBad = append(gotBad, b.Index)
			}
			if diff := cmp.Diff(tt.bad, gotBad); diff != "" {
				t.Errorf("Repair() reported bad indexes mismatch (-want +got):\n%s", diff)
			}
			switch copied, err := os.ReadFile(rep.Backup); {
			case len(tt.bad) == 0 && rep.Backup != "":
				t.Errorf("Repair() of a clean log made a copy %s", rep.Backup)
			case len(tt.bad) > 0 && err != nil:
				t.Errorf("Repair() backup %q: %v", rep.Backup, err)
			case len(tt.bad) > 0 && !bytes.Equal(copied, before):
				t.Errorf("Repair() backup %s differs from the file before repair", rep.Backup)
			}
			if rep.LastIndex != tt.last {
				t.Errorf("Repair().LastIndex = %d, want %d", rep.LastIndex, tt.last)
			}

			reg = prometheus.NewPedanticRegistry()
			l = waltest.Open(t, waltest.WithPath(path), waltest.WithRegisterer(reg))
			if got := metricValue(t, reg, "gatehouse_wal_corrupt_records"); got != 0 {
				t.Errorf("gatehouse_wal_corrupt_records after Repair() = %v, want 0", got)
			}
			var want []entry
			for _, e := range append(entries(first, 10), tt.extra...) {
				if !slices.Contains(tt.lost, e.Seq) {
					want = append(want, e)
				}
			}
			if diff := cmp.Diff(want, replayAll(t, l, first-1)); diff != "" {
				t.Errorf("records after Repair() mismatch (-want +got):\n%s", diff)
			}
			// Numbering continues after the last record, and a second
			// repair finds nothing.
			if got, err := l.Append(testRecord(int(tt.last) + 1)); err != nil || got != tt.last+1 {
				t.Errorf("Append() after Repair() = %d, %v, want %d", got, err, tt.last+1)
			}
			if err := l.Close(); err != nil {
				t.Fatalf("Close() = %v", err)
			}
			if rep := repair(t, path); len(rep.Bad) != 0 || rep.Backup != "" {
				t.Errorf("second Repair() = %+v, want nothing to do", rep)
			}
		})
	}
}

// checkCorrupt fails t unless err is a *CorruptError listing indexes bad
// (nil bad: err must be nil).
func checkCorrupt(t *testing.T, err error, bad []uint64) {
	t.Helper()
	if len(bad) == 0 {
		if err != nil {
			t.Errorf("Replay() of an intact log = %v", err)
		}
		return
	}
	ce, ok := errors.AsType[*wal.CorruptError](err)
	if !ok || !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("Replay() = %v, want a *wal.CorruptError", err)
	}
	var got []uint64
	for _, b := range ce.Bad {
		got = append(got, b.Index)
	}
	if diff := cmp.Diff(bad, got); diff != "" {
		t.Errorf("Replay() error %q lists indexes (-want +got):\n%s", err, diff)
	}
	names := regexp.MustCompile(fmt.Sprintf(`index(es)? %d\b`, bad[0]))
	if bad[0] != 0 && !names.MatchString(err.Error()) {
		t.Errorf("Replay() error %q does not name index %d", err, bad[0])
	}
}

// repair runs wal.Repair on path and fails tb on an error.
func repair(tb testing.TB, path string) wal.RepairReport {
	tb.Helper()
	cfg := wal.DefaultConfig()
	cfg.Path = path
	rep, err := wal.Repair(cfg, waltest.Logger(tb))
	if err != nil {
		tb.Fatalf("Repair(%s) = %v", path, err)
	}
	return rep
}

// keyCount is the number of keys in the closed log file's log bucket.
func keyCount(tb testing.TB, path string) int {
	tb.Helper()
	var n int
	mutate(tb, path, func(logb, _ *bbolt.Bucket) error {
		n = logb.Stats().KeyN
		return nil
	})
	return n
}

// TestRepairReportsWhatWasLost: the report of a record whose payload bit
// flipped carries its index, its stored type and size and its payload as
// stored, and the record in its place is a TypeLost one that Replay skips.
func TestRepairReportsWhatWasLost(t *testing.T) {
	path := tempPath(t)
	writeLog(t, path, 10, 0)
	rec := testRecord(6)
	mutate(t, path, editValue(6, func(v []byte) []byte { v[8] ^= 0x10; return v }))

	rep := repair(t, path)
	if len(rep.Bad) != 1 {
		t.Fatalf("Repair().Bad = %+v, want one record", rep.Bad)
	}
	b := rep.Bad[0]
	flipped := bytes.Clone(rec.Data)
	flipped[2] ^= 0x10
	want := wal.BadRecord{Index: 6, Through: 6, Type: rec.Type, Size: 6 + len(rec.Data), Payload: flipped}
	if diff := cmp.Diff(want, b, cmpopts.IgnoreFields(wal.BadRecord{}, "Reason"), cmpopts.IgnoreUnexported(wal.BadRecord{})); diff != "" {
		t.Errorf("Repair().Bad[0] mismatch (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(b.Reason, "crc ") || strings.Contains(b.String(), string(flipped)) {
		t.Errorf("BadRecord.String() = %q: want the crc mismatch, never the payload", b)
	}
	var lost []byte
	mutate(t, path, func(logb, _ *bbolt.Bucket) error {
		lost = bytes.Clone(logb.Get(key(6)))
		return nil
	})
	got, err := wal.DecodeRecord(6, lost)
	if err != nil || got.Type != wal.TypeLost || len(got.Data) != 13 || got.Data[0] != byte(rec.Type) ||
		binary.BigEndian.Uint32(got.Data[1:]) != uint32(want.Size) {
		t.Errorf("record at 6 after Repair() = %+v, %v; want a TypeLost record naming type %d, %d bytes", got, err, rec.Type, want.Size)
	}
}

// TestTruncateForgetsCoveredCorruption: once a snapshot's TruncateBefore
// deleted the bad record, Replay no longer refuses, without a repair.
func TestTruncateForgetsCoveredCorruption(t *testing.T) {
	path := tempPath(t)
	writeLog(t, path, 10, 0)
	mutate(t, path, editValue(3, func(v []byte) []byte { v[7] ^= 1; return v }))
	reg := prometheus.NewPedanticRegistry()
	l := waltest.Open(t, waltest.WithPath(path), waltest.WithRegisterer(reg))
	checkCorrupt(t, l.Replay(0, func(uint64, wal.Record) error { return nil }), []uint64{3})
	mustTruncate(t, l, 5)
	if got := metricValue(t, reg, "gatehouse_wal_corrupt_records"); got != 0 {
		t.Errorf("gatehouse_wal_corrupt_records after truncating the bad record = %v, want 0", got)
	}
	if diff := cmp.Diff(entries(5, 10), replayAll(t, l, 4)); diff != "" {
		t.Errorf("Replay(4) mismatch (-want +got):\n%s", diff)
	}
}

func TestRepairRefuses(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(logb, meta *bbolt.Bucket) error
		hold   bool // a Log holds the file open
		want   string
	}{
		{name: "newer version", mutate: editValue(6, func(v []byte) []byte { v[0] = 2; return wal.Reseal(6, v) }),
			want: wal.ErrUnsupportedVersion.Error()},
		{name: "file in use", mutate: editValue(6, func(v []byte) []byte { v[7] ^= 1; return v }), hold: true,
			want: "is a server using it?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tempPath(t)
			writeLog(t, path, 10, 0)
			mutate(t, path, tt.mutate)
			if tt.hold {
				waltest.Open(t, waltest.WithPath(path))
			}
			cfg := wal.DefaultConfig()
			cfg.Path, cfg.OpenTimeout = path, 50*time.Millisecond
			rep, err := wal.Repair(cfg, waltest.Logger(t))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Repair() = %+v, %v, want an error containing %q", rep, err, tt.want)
			}
			if matches, _ := filepath.Glob(path + ".bak-*"); len(matches) != 0 {
				t.Errorf("refused Repair() left copies %v", matches)
			}
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
	if n := keyCount(t, path); n != 10 {
		t.Errorf("log holds %d records after the refused Open, want 10", n)
	}
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

func TestOpenLogsOneWarning(t *testing.T) {
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
	for _, want := range []string{"level=WARN", "component=wal", "bad=1", `first="index 7 (type 2, `} {
		if !strings.Contains(got, want) {
			t.Errorf("Open() log %q lacks %q", got, want)
		}
	}
	waltest.Check(t, path)
}
