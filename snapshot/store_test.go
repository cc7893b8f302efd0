package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		size  int
		chunk int
	}{
		{"empty", 0, 1},
		{"one byte", 1, 1},
		{"header sized", headerSize, 5},
		{"byte writes", 4099, 1},
		{"buffer minus one", bufSize - 1, bufSize},
		{"buffer", bufSize, 4096},
		{"buffer plus one", bufSize + 1, bufSize + 1},
		{"3MB one write", 3<<20 + 17, 3<<20 + 17},
		{"3MB chunks", 3<<20 + 17, 7919},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			idx := uint64(1000 + i)
			want := payloadFor(idx, tt.size)
			fx := newFixture(t, t.TempDir(), 3)
			size, err := fx.Save(idx, writeChunks(want, tt.chunk))
			if err != nil || size != int64(tt.size+overhead) {
				t.Fatalf("Save(%d, %d bytes) = %d, %v, want %d, nil", idx, tt.size, size, err, tt.size+overhead)
			}
			if file := readSnap(t, fx.dir, idx); !bytes.Equal(file, encodeV1(idx, want)) {
				t.Errorf("Save(%d) wrote a file that differs from the v1 encoding", idx)
			}
			var got []byte
			gotIdx, err := fx.Load(func(_ uint64, p []byte) error {
				got = bytes.Clone(p)
				return nil
			})
			if err != nil || gotIdx != idx {
				t.Fatalf("Load() = %d, %v, want %d, nil", gotIdx, err, idx)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Load() payload of %d bytes differs from the %d saved", len(got), len(want))
			}
			if g := fx.metric(t, "gatehouse_snapshot_size_bytes"); g != float64(size) {
				t.Errorf("size gauge = %v, want %d", g, size)
			}
			if diff := cmp.Diff([]string{snapName(idx)}, dirNames(t, fx.dir)); diff != "" {
				t.Errorf("dir after Save and Load (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRetainKeepsNewest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		retain int
		saves  []uint64
		want   []uint64
	}{
		{"retain 3 of 7", 3, []uint64{1, 2, 3, 4, 5, 6, 7}, []uint64{7, 6, 5}},
		{"retain 1", 1, []uint64{1, 2, 3}, []uint64{3}},
		{"fewer than retain", 5, []uint64{4, 9}, []uint64{9, 4}},
		{"sparse indexes", 2, []uint64{10, 300, 4096, 1 << 40}, []uint64{1 << 40, 4096}},
		{"save same index twice", 2, []uint64{1, 2, 2}, []uint64{2, 1}},
		{"older index is pruned at once", 1, []uint64{10, 5}, []uint64{10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, t.TempDir(), tt.retain)
			for _, idx := range tt.saves {
				fx.save(t, idx, payloadFor(idx, 100))
			}
			got, err := fx.List()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("List() after saving %v with Retain %d (-want +got):\n%s", tt.saves, tt.retain, diff)
			}
		})
	}
}

func TestListOrderAndFilter(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, t.TempDir(), 10)
	for _, idx := range []uint64{0x10, 0x2, 0xff, 0x1000} {
		fx.save(t, idx, []byte("x"))
	}
	for _, name := range []string{"0000000000000005.snap.broken", "0000000000000006-1.tmp", "notes.txt", "00000000000000AA.snap"} {
		if err := os.WriteFile(filepath.Join(fx.dir, name), []byte("junk"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(fx.dir, snapName(0x2000)), 0o700); err != nil {
		t.Fatal(err)
	}
	got, err := fx.List()
	if diff := cmp.Diff([]uint64{0x1000, 0xff, 0x10, 0x2}, got); err != nil || diff != "" {
		t.Errorf("List() = %v (-want +got):\n%s", err, diff)
	}
	empty := newFixture(t, t.TempDir(), 1)
	none, err := empty.List()
	if none != nil || err != nil {
		t.Errorf("List() on an empty dir = %v, %v, want nil, nil", none, err)
	}
}

func TestSaveWriteErrorLeavesNothing(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, t.TempDir(), 1)
	fx.save(t, 1, []byte("first"))
	before := dirNames(t, fx.dir)
	boom := errors.New("boom")
	size, err := fx.Save(2, func(w io.Writer) error {
		_, _ = w.Write(payloadFor(2, 1<<20))
		return boom
	})
	if !errors.Is(err, boom) || size != 0 {
		t.Errorf("Save(2, failing write) = %d, %v, want 0, an error wrapping %v", size, err, boom)
	}
	if diff := cmp.Diff(before, dirNames(t, fx.dir)); diff != "" {
		t.Errorf("dir changed after a failed Save (-want +got):\n%s", diff)
	}
	if n := fx.metric(t, "gatehouse_snapshot_save_duration_seconds"); n != 1 {
		t.Errorf("save duration samples = %v, want 1 (failures are not observed)", n)
	}
}

func TestSaveWritePanicLeavesNothing(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, t.TempDir(), 1)
	func() {
		defer func() { _ = recover() }()
		_, _ = fx.Save(1, func(w io.Writer) error {
			_, _ = w.Write([]byte("partial"))
			panic("encoder bug")
		})
	}()
	if names := dirNames(t, fx.dir); len(names) != 0 {
		t.Errorf("dir after a panicking Save = %v, want empty", names)
	}
	fx.save(t, 2, []byte("the lock was released")) // would deadlock otherwise
}

func TestWriteFileReportsIgnoredWriteError(t *testing.T) {
	t.Parallel()
	f, err := os.Create(filepath.Join(t.TempDir(), "closed.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	// The payload fills the buffer, so a Write reaches the closed file and
	// fails; the write function ignores that.
	sloppy := func(w io.Writer) error {
		for range 4 {
			_, _ = w.Write(make([]byte, bufSize))
		}
		return nil
	}
	if _, err = writeFile(f, 1, sloppy); !errors.Is(err, os.ErrClosed) {
		t.Errorf("writeFile(closed file, ignored write errors) = %v, want os.ErrClosed", err)
	}
}

func TestConcurrentSaveAndList(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, t.TempDir(), 3)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 5 {
				idx := uint64(g*5 + i + 1)
				if _, err := fx.Save(idx, writeChunks(payloadFor(idx, 10<<10), 4096)); err != nil {
					t.Errorf("Save(%d) = %v", idx, err)
				}
				if _, err := fx.List(); err != nil {
					t.Errorf("List() = %v", err)
				}
			}
		})
	}
	wg.Wait()
	got, err := fx.List()
	if diff := cmp.Diff([]uint64{20, 19, 18}, got); err != nil || diff != "" {
		t.Errorf("List() = %v after concurrent saves (-want +got):\n%s", err, diff)
	}
}

// TestCrashBeforeRenameCopy copies the directory from inside the hook, as a
// crash between the write and the rename would leave it, and opens a Store
// on the copy. (crash_test.go does the same with a real SIGKILL.) It sets the
// package hook, so it must not run in parallel.
func TestCrashBeforeRenameCopy(t *testing.T) {
	fx := newFixture(t, t.TempDir(), 3)
	fx.save(t, 1, payloadFor(1, 5000))
	crashed := t.TempDir()
	testHookBeforeRename = func() { copyDir(t, fx.dir, crashed) }
	t.Cleanup(func() { testHookBeforeRename = nil })
	fx.save(t, 2, payloadFor(2, 5000))

	if got := tempFiles(t, crashed); len(got) != 1 {
		t.Fatalf("temp files at the hook = %v, want exactly one", got)
	}
	after := newFixture(t, crashed, 3)
	checkLoads(t, after, 1, payloadFor(1, 5000))
	if got := tempFiles(t, crashed); len(got) != 0 {
		t.Errorf("temp files after Load = %v, want none", got)
	}
	if got := fx.logs.count("level=INFO", "removed leftover temp file"); got != 0 {
		t.Errorf("the original store logged %d temp removals, want 0", got)
	}
	if got := after.logs.count("level=INFO", "removed leftover temp file"); got != 1 {
		t.Errorf("logged %d temp removals, want 1", got)
	}
}

// checkLoads asserts that Load returns idx with payload want.
func checkLoads(tb testing.TB, fx *fixture, idx uint64, want []byte) {
	tb.Helper()
	var got []byte
	gotIdx, err := fx.Load(func(_ uint64, p []byte) error {
		got = bytes.Clone(p)
		return nil
	})
	if err != nil || gotIdx != idx || !bytes.Equal(got, want) {
		tb.Errorf("Load() = %d, %v (%d bytes), want %d, nil (%d bytes)", gotIdx, err, len(got), idx, len(want))
	}
}

// copyDir copies the regular files of src into dst.
func copyDir(tb testing.TB, src, dst string) {
	tb.Helper()
	for _, name := range dirNames(tb, src) {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			tb.Fatal(err)
		}
		if err = os.WriteFile(filepath.Join(dst, name), b, 0o600); err != nil {
			tb.Fatal(fmt.Errorf("copy %s: %w", name, err))
		}
	}
}
