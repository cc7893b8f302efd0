package snapshot

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// fixture is a Store on a temp dir with its own registry and a copy of its logs.
type fixture struct {
	*Store
	dir  string
	reg  *prometheus.Registry
	logs *syncBuffer
}

// newFixture opens a Store with the given Retain on dir, logging to tb.Log.
func newFixture(tb testing.TB, dir string, retain int) *fixture {
	tb.Helper()
	fx := &fixture{dir: dir, reg: prometheus.NewPedanticRegistry(), logs: &syncBuffer{}}
	h := slog.NewTextHandler(io.MultiWriter(testWriter{tb}, fx.logs), &slog.HandlerOptions{Level: slog.LevelDebug})
	s, err := New(Config{Dir: dir, Retain: retain}, slog.New(h), fx.reg)
	if err != nil {
		tb.Fatalf("New(%q, %d) = %v", dir, retain, err)
	}
	fx.Store = s
	return fx
}

// save saves payload at idx and fails the test on error.
func (fx *fixture) save(tb testing.TB, idx uint64, payload []byte) {
	tb.Helper()
	if _, err := fx.Save(idx, writeChunks(payload, 7919)); err != nil {
		tb.Fatalf("Save(%d) = %v", idx, err)
	}
}

// metric returns the value of a counter or gauge, or a histogram's sample count.
func (fx *fixture) metric(tb testing.TB, name string) float64 {
	tb.Helper()
	mfs, err := fx.reg.Gather()
	if err != nil {
		tb.Fatalf("Gather() = %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	tb.Fatalf("metric %s not found", name)
	return 0
}

// dirNames returns the sorted names in dir.
func dirNames(tb testing.TB, dir string) []string {
	tb.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// tempFiles returns the names of the temp files in dir.
func tempFiles(tb testing.TB, dir string) []string {
	tb.Helper()
	var out []string
	for _, n := range dirNames(tb, dir) {
		if strings.HasSuffix(n, tmpExt) {
			out = append(out, n)
		}
	}
	return out
}

// payloadFor returns n pseudo-random bytes determined by idx and n.
func payloadFor(idx uint64, n int) []byte {
	p := make([]byte, n)
	_, _ = rand.NewChaCha8(seed(idx, uint64(n))).Read(p)
	return p
}

func seed(a, b uint64) (s [32]byte) {
	binary.LittleEndian.PutUint64(s[:], a)
	binary.LittleEndian.PutUint64(s[8:], b)
	return s
}

// writeChunks returns a Save write function that writes p in chunks of at
// most chunk bytes.
func writeChunks(p []byte, chunk int) func(io.Writer) error {
	return func(w io.Writer) error {
		for len(p) > 0 {
			n := min(chunk, len(p))
			if _, err := w.Write(p[:n]); err != nil {
				return err
			}
			p = p[n:]
		}
		return nil
	}
}

// encodeV1 builds a version 1 snapshot file straight from the format
// description, independently of Save.
func encodeV1(idx uint64, payload []byte) []byte {
	b := []byte("GHSNAP")
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint64(b, idx)
	b = binary.BigEndian.AppendUint64(b, uint64(len(payload)))
	b = append(b, payload...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

// readSnap returns the bytes of the snapshot file of idx in dir.
func readSnap(tb testing.TB, dir string, idx uint64) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(dir, snapName(idx)))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// testWriter sends log lines to tb.Log (raft's testLoggerAdapter).
type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Helper()
	w.tb.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// count returns how many log lines contain all of subs.
func (s *syncBuffer) count(subs ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for line := range strings.Lines(s.b.String()) {
		ok := true
		for _, sub := range subs {
			ok = ok && strings.Contains(line, sub)
		}
		if ok {
			n++
		}
	}
	return n
}
