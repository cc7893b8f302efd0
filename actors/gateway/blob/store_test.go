package blob

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"gatehouse/actors/actorstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(Config{Dir: dir}, nil)
	if err != nil {
		t.Fatalf("Open(%s) = %v", dir, err)
	}
	return s
}

func put(t *testing.T, s *Store, b []byte) Ref {
	t.Helper()
	ref, size, err := s.Put(bytes.NewReader(b), 1<<20)
	if err != nil {
		t.Fatalf("Put(%d bytes) = %v", len(b), err)
	}
	if size != int64(len(b)) || ref != Ref(sha256.Sum256(b)) {
		t.Fatalf("Put(%d bytes) = %s, %d; want the SHA-256 and the length", len(b), ref, size)
	}
	s.Release(ref)
	return ref
}

func readAll(s *Store, ref Ref) ([]byte, error) {
	r, err := s.Open(ref)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func TestPutOpen(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"small", []byte("hello")},
		{"a MiB", bytes.Repeat([]byte("0123456789abcdef"), 1<<16)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, t.TempDir())
			ref := put(t, s, tt.data)
			got, err := readAll(s, ref)
			if err != nil || !bytes.Equal(got, tt.data) {
				t.Fatalf("read back %d bytes, %v; want %d bytes", len(got), err, len(tt.data))
			}
			if n, err := s.Stat(ref); err != nil || n != int64(len(tt.data)) {
				t.Errorf("Stat = %d, %v", n, err)
			}
			again := put(t, s, tt.data) // idempotent
			if again != ref {
				t.Errorf("second Put = %s, want %s", again, ref)
			}
			if err := s.Verify(ref); err != nil {
				t.Errorf("Verify = %v", err)
			}
		})
	}
}

func TestPutTooLarge(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	src := &countingReader{r: bytes.NewReader(make([]byte, 10<<20))}
	_, _, err := s.Put(src, 1000)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Put(10 MiB, limit 1000) = %v, want ErrTooLarge", err)
	}
	if src.n > 1000+32<<10 { // io.Copy's buffer is the most it may overshoot by
		t.Errorf("Put read %d bytes of a source over the limit", src.n)
	}
	if n := countFiles(t, dir); n != 0 {
		t.Errorf("%d files left after a refused Put", n)
	}
	if _, _, err := s.Put(bytes.NewReader(make([]byte, 1000)), 1000); err != nil {
		t.Errorf("Put(exactly the limit) = %v", err)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestReadErrors(t *testing.T) {
	s := open(t, t.TempDir())
	ref := put(t, s, []byte("the original bytes"))
	if _, err := readAll(s, Ref{1}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Open(absent) = %v, want ErrNotFound", err)
	}
	if _, err := s.Stat(Ref{1}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stat(absent) = %v, want ErrNotFound", err)
	}
	_, file := s.path(ref)
	for _, damage := range []string{"the 0riginal bytes", "the original", ""} {
		if err := os.WriteFile(file, []byte(damage), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := readAll(s, ref); !errors.Is(err, ErrCorrupt) {
			t.Errorf("read of a blob damaged to %q = %v, want ErrCorrupt", damage, err)
		}
		if err := s.Verify(ref); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Verify(damaged to %q) = %v, want ErrCorrupt", damage, err)
		}
	}
	// Putting the bytes again repairs the damaged copy.
	put(t, s, []byte("the original bytes"))
	if err := s.Verify(ref); err != nil {
		t.Errorf("Verify after a re-Put = %v", err)
	}
}

func TestOpenRemovesTempFiles(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	ref := put(t, s, []byte("kept"))
	for _, name := range []string{"put-1", "put-2"} {
		if err := os.WriteFile(filepath.Join(dir, "tmp", name), []byte("torn"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s = open(t, dir)
	if ents, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(ents) != 0 {
		t.Errorf("Open left %d temp files", len(ents))
	}
	if err := s.Verify(ref); err != nil {
		t.Errorf("Verify(kept) = %v", err)
	}
}

// TestCrashBeforeRename: a Put interrupted between its write and its
// rename leaves only a temp file, which the next Open removes.
func TestCrashBeforeRename(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	snapshotDir := t.TempDir()
	testHookBeforeRename = func() { actorstest.CopyDir(t, dir, snapshotDir) }
	defer func() { testHookBeforeRename = nil }()
	ref := put(t, s, []byte("interrupted"))
	testHookBeforeRename = nil
	if got := countFiles(t, filepath.Join(snapshotDir, "tmp")); got != 1 {
		t.Fatalf("the crash image holds %d temp files, want 1", got)
	}
	after := open(t, snapshotDir)
	if got := countFiles(t, snapshotDir); got != 0 {
		t.Errorf("after Open the crash image holds %d files, want 0", got)
	}
	if err := after.Verify(ref); !errors.Is(err, ErrNotFound) {
		t.Errorf("Verify(never installed) = %v, want ErrNotFound", err)
	}
}

func TestCollect(t *testing.T) {
	s := open(t, t.TempDir())
	kept := put(t, s, []byte("named by a record"))
	orphan := put(t, s, []byte("named by nothing"))

	// held: Put before the cut, record appended after the barrier, so not
	// in keep; Release comes after the cut.
	held, _, err := s.Put(strings.NewReader("record after the barrier"), 100)
	if err != nil {
		t.Fatal(err)
	}
	cut := s.Cut()
	s.Release(held)
	late := put(t, s, []byte("put after the cut"))

	keep := func(r Ref) bool { return r == kept }
	n, err := s.Collect(cut, keep)
	if err != nil || n != 1 {
		t.Fatalf("Collect = %d, %v; want 1 (the orphan)", n, err)
	}
	for _, r := range []Ref{kept, held, late} {
		if err := s.Verify(r); err != nil {
			t.Errorf("Verify(%s) after Collect = %v", r, err)
		}
	}
	if err := s.Verify(orphan); !errors.Is(err, ErrNotFound) {
		t.Errorf("orphan after Collect: %v, want ErrNotFound", err)
	}

	// At the next snapshot nothing names held or late any more: they go.
	n, err = s.Collect(s.Cut(), keep)
	if err != nil || n != 2 {
		t.Fatalf("second Collect = %d, %v; want 2", n, err)
	}

	// A blob still held is never collected, whatever the cut.
	h, _, err := s.Put(strings.NewReader("still held"), 100)
	if err != nil {
		t.Fatal(err)
	}
	s.Cut()
	if n, _ := s.Collect(s.Cut(), keep); n != 0 {
		t.Errorf("Collect removed %d blobs while one is held", n)
	}
	s.Release(h)
}

// TestCollectRace: blobs put and released concurrently with cuts and
// collections survive exactly as the rule says: one whose record "lands"
// after a barrier (released after the cut) is never removed by that
// collection.
func TestCollectRace(t *testing.T) {
	s := open(t, t.TempDir())
	var mu sync.Mutex
	records := map[Ref]bool{} // the "WAL": refs named by an appended record
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				ref, _, err := s.Put(strings.NewReader(strings.Repeat("x", w*100+i+1)), 1<<20)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				records[ref] = true
				mu.Unlock()
				s.Release(ref)
			}
		}()
	}
	for range 20 {
		cut := s.Cut()
		mu.Lock() // the snapshot: every record appended before this point
		snap := map[Ref]bool{}
		for r := range records {
			snap[r] = true
		}
		mu.Unlock()
		if _, err := s.Collect(cut, func(r Ref) bool { return snap[r] }); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for r := range records {
		if err := s.Verify(r); err != nil {
			t.Errorf("blob %s named by a record: %v", r, err)
		}
	}
}

func FuzzParseRef(f *testing.F) {
	f.Add(strings.Repeat("ab", 32))
	f.Add(strings.Repeat("AB", 32))
	f.Add("")
	f.Add(strings.Repeat("zz", 32))
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRef(s)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ParseRef(%q) = %v, want ErrCorrupt", s, err)
			}
			return
		}
		if !strings.EqualFold(r.String(), s) {
			t.Fatalf("ParseRef(%q).String() = %q", s, r)
		}
	})
}
