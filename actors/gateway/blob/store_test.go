package blob

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"default", DefaultConfig(), ""},
		{"no sync", Config{Dir: "x", NoSync: true}, ""},
		{"empty dir", Config{}, "dir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Validate(%+v) = %v, want an error naming %q", tt.cfg, err, tt.wantErr)
			}
		})
	}
	if _, err := New(Config{}, nil, nil); err == nil {
		t.Error("New(Config{}) = nil error, want the validation error")
	}
}

func TestNewCreatesTree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "blobs")
	fx := newFixture(t, dir)
	ref := fx.put(t, []byte("x")) // creates its fan-out directory
	for _, d := range []string{".", tmpDir, algoDir, filepath.Join(algoDir, ref.String()[:2])} {
		fi, err := os.Stat(filepath.Join(dir, d))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("Stat(%s) = %v, %v, want a 0700 directory", d, fi, err)
		}
	}
	if ents, err := os.ReadDir(fx.root()); err != nil || len(ents) != 1 {
		t.Errorf("%s holds %d entries, %v, want one fan-out directory", fx.root(), len(ents), err)
	}
	fx = newFixture(t, dir) // reopening an existing tree is fine
	if !fx.fans[ref[0]] {
		t.Errorf("New did not note the existing fan-out directory %02x", ref[0])
	}
	if err := fx.Verify(ref); err != nil {
		t.Errorf("Verify() after reopening = %v", err)
	}
	notDir := filepath.Join(t.TempDir(), "blobs")
	if err := os.MkdirAll(notDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(notDir, algoDir), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Dir: notDir}, nil, nil); err == nil {
		t.Errorf("New over a file named %s = nil error, want one", algoDir)
	}
}

func TestPutOpen(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"one byte", []byte{0}},
		{"small", []byte("hello")},
		{"3 MiB", payload(1, 3<<20)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t, "")
			ref := fx.put(t, tt.data)
			got, err := readAll(fx.Store, ref)
			if err != nil || !bytes.Equal(got, tt.data) {
				t.Fatalf("read back %d bytes, %v, want %d bytes, nil", len(got), err, len(tt.data))
			}
			if n, err := fx.Stat(ref); err != nil || n != int64(len(tt.data)) {
				t.Errorf("Stat() = %d, %v, want %d, nil", n, err, len(tt.data))
			}
			r, err := fx.Open(ref)
			if err != nil {
				t.Fatal(err)
			}
			if r.Size() != int64(len(tt.data)) {
				t.Errorf("Reader.Size() = %d, want %d", r.Size(), len(tt.data))
			}
			_ = r.Close()
			if err := fx.Verify(ref); err != nil {
				t.Errorf("Verify() = %v", err)
			}
			fi, err := os.Stat(fx.file(ref))
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("Stat(blob file) = %v, %v, want mode 0600", fi, err)
			}
			if got := files(t, fx.dir); len(got) != 1 {
				t.Errorf("files in the store = %v, want only the blob", got)
			}
		})
	}
}

// TestPutExisting: putting stored bytes again returns the same ref, leaves
// the stored file as it is (same inode) and no temp file behind.
func TestPutExisting(t *testing.T) {
	fx := newFixture(t, "")
	data := payload(2, 100<<10)
	ref := fx.put(t, data)
	before, err := os.Stat(fx.file(ref))
	if err != nil {
		t.Fatal(err)
	}
	if again := fx.put(t, data); again != ref {
		t.Errorf("second Put = %s, want %s", again, ref)
	}
	after, err := os.Stat(fx.file(ref))
	if err != nil || !os.SameFile(before, after) {
		t.Errorf("second Put replaced the stored file (%v)", err)
	}
	if got := files(t, fx.dir); len(got) != 1 {
		t.Errorf("files in the store = %v, want only the blob", got)
	}
	if got := fx.metric(t, "gatehouse_blob_puts_total", putStored); got != 1 {
		t.Errorf("puts_total{stored} = %v, want 1", got)
	}
	if got := fx.metric(t, "gatehouse_blob_puts_total", putExisting); got != 1 {
		t.Errorf("puts_total{existing} = %v, want 1", got)
	}
	if got := fx.metric(t, "gatehouse_blob_written_bytes_total", ""); got != float64(len(data)) {
		t.Errorf("written_bytes_total = %v, want %d (the first Put only)", got, len(data))
	}
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func TestPutLimit(t *testing.T) {
	tests := []struct {
		name    string
		size    int64
		limit   int64
		tooBig  bool
		wantErr bool
	}{
		{"empty, limit 0", 0, 0, false, false},
		{"one byte, limit 0", 1, 0, true, false},
		{"exactly the limit", 1000, 1000, false, false},
		{"one over", 1001, 1000, true, false},
		{"10 MiB over 1000", 10 << 20, 1000, true, false},
		{"a MiB over a MiB", 2 << 20, 1 << 20, true, false},
		{"no limit", 1000, math.MaxInt64, false, false},
		{"negative limit", 0, -1, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFastFixture(t)
			src := &countingReader{r: io.LimitReader(zeros{}, tt.size)}
			ref, size, err := fx.Put(src, tt.limit)
			switch {
			case tt.tooBig:
				if !errors.Is(err, ErrTooLarge) {
					t.Fatalf("Put(%d bytes, limit %d) = %v, want ErrTooLarge", tt.size, tt.limit, err)
				}
				if src.n > tt.limit+1 {
					t.Errorf("Put read %d bytes, want at most limit+1 = %d", src.n, tt.limit+1)
				}
				if got := fx.metric(t, "gatehouse_blob_puts_total", putTooLarge); got != 1 {
					t.Errorf("puts_total{too_large} = %v, want 1", got)
				}
			case tt.wantErr:
				if err == nil {
					t.Fatalf("Put(limit %d) = nil error, want one", tt.limit)
				}
			default:
				if err != nil || size != tt.size {
					t.Fatalf("Put(%d bytes, limit %d) = %s, %d, %v, want the size", tt.size, tt.limit, ref, size, err)
				}
				fx.Release(ref)
				return
			}
			if got := files(t, fx.dir); len(got) != 0 {
				t.Errorf("files after a refused Put = %v, want none", got)
			}
			fx.mu.Lock()
			defer fx.mu.Unlock()
			if len(fx.holds) != 0 {
				t.Errorf("holds after a refused Put = %v, want none", fx.holds)
			}
		})
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestPutReadError(t *testing.T) {
	fx := newFastFixture(t)
	boom := errors.New("client went away")
	r := io.MultiReader(bytes.NewReader(payload(3, 5000)), iotest.ErrReader(boom))
	if _, _, err := fx.Put(r, 1<<20); !errors.Is(err, boom) {
		t.Fatalf("Put(failing reader) = %v, want it wrapped", err)
	}
	if got := files(t, fx.dir); len(got) != 0 {
		t.Errorf("files after a failed Put = %v, want none", got)
	}
	if got := fx.metric(t, "gatehouse_blob_puts_total", putError); got != 1 {
		t.Errorf("puts_total{error} = %v, want 1", got)
	}
}

// TestReadDamaged: a blob whose file no longer matches its ref reads as
// ErrCorrupt (at the end for a Reader, at once for a non-file), never a
// panic, and a new Put of the bytes repairs it.
func TestReadDamaged(t *testing.T) {
	orig := []byte("the original bytes of a skill archive")
	tests := []struct {
		name    string
		damage  func(t *testing.T, file string)
		openErr bool // Open itself fails
	}{
		{"bit flip", writeFile("the 0riginal bytes of a skill archive"), false},
		{"truncated", writeFile("the original"), false},
		{"emptied", writeFile(""), false},
		{"appended", writeFile(string(orig) + "!"), false},
		{"a directory", func(t *testing.T, file string) {
			t.Helper()
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(file, 0o700); err != nil {
				t.Fatal(err)
			}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFastFixture(t)
			ref := fx.put(t, orig)
			tt.damage(t, fx.file(ref))
			r, err := fx.Open(ref)
			if tt.openErr {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Open(damaged) = %v, want ErrCorrupt", err)
				}
			} else {
				if err != nil {
					t.Fatalf("Open(damaged) = %v, want a Reader", err)
				}
				_, err = io.ReadAll(r)
				_ = r.Close()
				if !errors.Is(err, ErrCorrupt) {
					t.Errorf("reading the damaged blob = %v, want ErrCorrupt", err)
				}
				if _, err := r.Read(make([]byte, 1)); !errors.Is(err, ErrCorrupt) {
					t.Errorf("Read after the end = %v, want ErrCorrupt again", err)
				}
			}
			if err := fx.Verify(ref); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Verify(damaged) = %v, want ErrCorrupt", err)
			}
			if tt.openErr {
				return // Put cannot rename over a directory; the error is enough
			}
			fx.put(t, orig) // repairs
			if err := fx.Verify(ref); err != nil {
				t.Errorf("Verify after a new Put = %v, want nil", err)
			}
			if got := fx.metric(t, "gatehouse_blob_corrupt_total", ""); got < 2 {
				t.Errorf("corrupt_total = %v, want at least 2", got)
			}
		})
	}
}

func writeFile(content string) func(*testing.T, string) {
	return func(t *testing.T, file string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNotFound(t *testing.T) {
	fx := newFastFixture(t)
	absent := Ref{1}
	if _, err := fx.Open(absent); !errors.Is(err, ErrNotFound) {
		t.Errorf("Open(absent) = %v, want ErrNotFound", err)
	}
	if _, err := fx.Stat(absent); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stat(absent) = %v, want ErrNotFound", err)
	}
	if err := fx.Verify(absent); !errors.Is(err, ErrNotFound) {
		t.Errorf("Verify(absent) = %v, want ErrNotFound", err)
	}
	if err := fx.Hold(absent); !errors.Is(err, ErrNotFound) {
		t.Errorf("Hold(absent) = %v, want ErrNotFound", err)
	}
	if !strings.Contains(ErrNotFound.Error(), "blob: ") {
		t.Errorf("ErrNotFound = %q, want the package prefix", ErrNotFound)
	}
}

func TestNewRemovesTempFiles(t *testing.T) {
	fx := newFixture(t, "")
	ref := fx.put(t, []byte("kept"))
	for _, name := range []string{"put-1", "put-2"} {
		if err := os.WriteFile(filepath.Join(fx.dir, tmpDir, name), []byte("torn"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fx = newFixture(t, fx.dir)
	if got := tempFiles(t, fx.dir); len(got) != 0 {
		t.Errorf("temp files after New = %v, want none", got)
	}
	if err := fx.Verify(ref); err != nil {
		t.Errorf("Verify(kept) = %v", err)
	}
}

// TestPutConcurrent: parallel Puts of overlapping contents all return the
// right refs and leave exactly one intact file per content.
func TestPutConcurrent(t *testing.T) {
	fx := newFastFixture(t)
	const writers, contents = 8, 5
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range 10 {
				b := payload(uint64((w+i)%contents), 20<<10)
				ref, _, err := fx.Put(bytes.NewReader(b), 1<<20)
				if err != nil {
					t.Errorf("Put() = %v", err)
					return
				}
				fx.Release(ref)
			}
		})
	}
	wg.Wait()
	for c := range contents {
		b := payload(uint64(c), 20<<10)
		if got, err := readAll(fx.Store, Ref(sha256.Sum256(b))); err != nil || !bytes.Equal(got, b) {
			t.Errorf("content %d: %d bytes, %v", c, len(got), err)
		}
	}
	if got := files(t, fx.dir); len(got) != contents {
		t.Errorf("files = %v, want %d blobs and no temp file", got, contents)
	}
}

func TestHoldRelease(t *testing.T) {
	fx := newFastFixture(t)
	ref := fx.putHeld(t, []byte("x"))
	if err := fx.Hold(ref); err != nil {
		t.Fatalf("Hold(stored) = %v", err)
	}
	fx.putHeld(t, []byte("x"))
	counts := func() map[Ref]int {
		fx.mu.Lock()
		defer fx.mu.Unlock()
		return fx.holds
	}
	if diff := cmp.Diff(map[Ref]int{ref: 3}, counts()); diff != "" {
		t.Errorf("holds after Put, Hold, Put (-want +got):\n%s", diff)
	}
	for range 4 { // one more than taken: a no-op
		fx.Release(ref)
	}
	if diff := cmp.Diff(map[Ref]int{}, counts()); diff != "" {
		t.Errorf("holds after releasing all (-want +got):\n%s", diff)
	}
}

func TestMetricsRegistration(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if _, err := New(Config{Dir: t.TempDir()}, nil, reg); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Dir: t.TempDir()}, nil, reg); err == nil {
		t.Error("New registering twice on one registry = nil error, want one")
	}
}
