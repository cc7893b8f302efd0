package blob

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"gatehouse/wal/waltest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a Store on a temp dir with its own registry, logging to tb.
type fixture struct {
	*Store
	dir string
	reg *prometheus.Registry
}

// newFixture opens a Store on dir (a new temp dir if empty), fsync on.
func newFixture(tb testing.TB, dir string) *fixture {
	tb.Helper()
	return openFixture(tb, Config{Dir: dir})
}

// newFastFixture opens a Store on a new temp dir with NoSync, for tests
// that do not depend on fsync (no test can observe it short of a power
// cut) and would otherwise spend most of their time in it.
func newFastFixture(tb testing.TB) *fixture {
	tb.Helper()
	return openFixture(tb, Config{NoSync: true})
}

func openFixture(tb testing.TB, cfg Config) *fixture {
	tb.Helper()
	if cfg.Dir == "" {
		cfg.Dir = tb.TempDir()
	}
	fx := &fixture{dir: cfg.Dir, reg: prometheus.NewPedanticRegistry()}
	s, err := New(cfg, waltest.Logger(tb), fx.reg)
	if err != nil {
		tb.Fatalf("New(%+v) = %v", cfg, err)
	}
	fx.Store = s
	return fx
}

// put stores b, checks the returned ref and size, and releases the hold.
func (fx *fixture) put(tb testing.TB, b []byte) Ref {
	tb.Helper()
	ref := fx.putHeld(tb, b)
	fx.Release(ref)
	return ref
}

// putHeld stores b and checks the returned ref and size; the hold stays.
func (fx *fixture) putHeld(tb testing.TB, b []byte) Ref {
	tb.Helper()
	ref, size, err := fx.Put(bytes.NewReader(b), 32<<20)
	if err != nil {
		tb.Fatalf("Put(%d bytes) = %v", len(b), err)
	}
	if want := Ref(sha256.Sum256(b)); ref != want || size != int64(len(b)) {
		tb.Fatalf("Put(%d bytes) = %s, %d, want %s, %d", len(b), ref, size, want, len(b))
	}
	return ref
}

// file returns the path of ref's blob.
func (fx *fixture) file(ref Ref) string {
	_, f := fx.path(ref)
	return f
}

// metric returns the value of a counter or gauge (the series with the given
// result label for gatehouse_blob_puts_total), or a histogram's count.
func (fx *fixture) metric(tb testing.TB, name, result string) float64 {
	tb.Helper()
	mfs, err := fx.reg.Gather()
	if err != nil {
		tb.Fatalf("Gather() = %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) > 0 && m.GetLabel()[0].GetValue() != result {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	tb.Fatalf("metric %s{result=%q} not found", name, result)
	return 0
}

// readAll reads the whole blob through a Reader.
func readAll(s *Store, ref Ref) ([]byte, error) {
	r, err := s.Open(ref)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// files returns the paths, relative to dir, of the regular files under it.
func files(tb testing.TB, dir string) []string {
	tb.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		out = append(out, rel)
		return err
	})
	if err != nil {
		tb.Fatalf("walk %s: %v", dir, err)
	}
	return out
}

// tempFiles returns the names in dir's temp directory.
func tempFiles(tb testing.TB, dir string) []string {
	tb.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, tmpDir))
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// payload returns n pseudo-random bytes determined by seed and n.
func payload(seed uint64, n int) []byte {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	binary.LittleEndian.PutUint64(s[8:], uint64(n))
	p := make([]byte, n)
	_, _ = rand.NewChaCha8(s).Read(p)
	return p
}
