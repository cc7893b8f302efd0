package snapshot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// loadPayloadSize is the payload size of the snapshots in the fallback tests.
const loadPayloadSize = 10_000

// damage functions edit the snapshot of index 3 in dir.
type damage func(tb testing.TB, dir string)

func TestLoadFallsBackFromBrokenNewest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		damage damage
		reject uint64 // Load's fn returns ErrCorrupt for this index
	}{
		{name: "truncated to zero", damage: truncateTo(0)},
		{name: "truncated inside header", damage: truncateTo(headerSize - 1)},
		{name: "truncated mid payload", damage: truncateTo(headerSize + loadPayloadSize/2)},
		{name: "trailer cut short", damage: truncateTo(overhead + loadPayloadSize - 1)},
		{name: "zeroed", damage: editFile(func(b []byte) []byte { clear(b); return b })},
		{name: "payload byte flipped", damage: flipByte(headerSize + loadPayloadSize/2)},
		{name: "last payload byte flipped", damage: flipByte(headerSize + loadPayloadSize - 1)},
		{name: "version byte flipped", damage: flipByte(offVersion + 1)},
		{name: "length byte flipped", damage: flipByte(offLength + 7)},
		{name: "header index byte flipped", damage: flipByte(offIndex + 7)},
		{name: "crc byte flipped", damage: flipByte(headerSize + loadPayloadSize)},
		{name: "wrong magic", damage: editFile(func(b []byte) []byte { copy(b, "XXSNAP"); return b })},
		{name: "garbage appended", damage: editFile(func(b []byte) []byte { return append(b, 0) })},
		{name: "header index differs from name", damage: editFile(func([]byte) []byte { return encodeV1(2, payloadFor(2, loadPayloadSize)) })},
		{name: "fn returns ErrCorrupt", reject: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, t.TempDir(), 3)
			for idx := uint64(1); idx <= 3; idx++ {
				fx.save(t, idx, payloadFor(idx, loadPayloadSize))
			}
			if tt.damage != nil {
				tt.damage(t, fx.dir)
			}
			if idx, err := loadRejecting(fx, tt.reject); err != nil || idx != 2 {
				t.Errorf("Load() = %d, %v, want 2, nil", idx, err)
			}
			want := []string{snapName(1), snapName(2), snapName(3) + brokenExt}
			if diff := cmp.Diff(want, dirNames(t, fx.dir)); diff != "" {
				t.Errorf("dir after Load (-want +got):\n%s", diff)
			}
			if got := fx.metric(t, "gatehouse_snapshot_broken_total"); got != 1 {
				t.Errorf("broken_total = %v, want 1", got)
			}
			if got := fx.logs.count("level=WARN", snapName(3)+brokenExt); got != 1 {
				t.Errorf("%d Warn lines name the broken file, want 1", got)
			}
			// A restart loads the same snapshot and sets nothing else aside.
			again := newFixture(t, fx.dir, 3)
			checkLoads(t, again, 2, payloadFor(2, loadPayloadSize))
			if got := again.metric(t, "gatehouse_snapshot_broken_total"); got != 0 {
				t.Errorf("broken_total after restart = %v, want 0", got)
			}
		})
	}
}

func TestLoadAllBroken(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, t.TempDir(), 3)
	for idx := uint64(1); idx <= 3; idx++ {
		fx.save(t, idx, payloadFor(idx, 100))
	}
	flipByte(headerSize)(t, fx.dir) // 3: CRC mismatch
	if err := os.Truncate(filepath.Join(fx.dir, snapName(2)), 5); err != nil {
		t.Fatal(err)
	}
	idx, err := fx.Load(func(idx uint64, _ []byte) error {
		return fmt.Errorf("decode index %d: %w", idx, ErrCorrupt) // 1 is valid on disk
	})
	if !errors.Is(err, ErrNoSnapshot) || idx != 0 {
		t.Errorf("Load() = %d, %v, want 0, ErrNoSnapshot", idx, err)
	}
	want := []string{snapName(1) + brokenExt, snapName(2) + brokenExt, snapName(3) + brokenExt}
	if diff := cmp.Diff(want, dirNames(t, fx.dir)); diff != "" {
		t.Errorf("dir after Load (-want +got):\n%s", diff)
	}
	if got := fx.metric(t, "gatehouse_snapshot_broken_total"); got != 3 {
		t.Errorf("broken_total = %v, want 3", got)
	}
	if got := fx.logs.count("level=WARN", "set aside broken snapshot"); got != 3 {
		t.Errorf("%d Warn lines, want 3 (one per file)", got)
	}
	if got := fx.metric(t, "gatehouse_snapshot_load_duration_seconds"); got != 0 {
		t.Errorf("load duration samples = %v, want 0 (failures are not observed)", got)
	}
}

func TestLoadEmptyDir(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, t.TempDir(), 3)
	called := false
	idx, err := fx.Load(func(uint64, []byte) error { called = true; return nil })
	if !errors.Is(err, ErrNoSnapshot) || idx != 0 || called {
		t.Errorf("Load() on an empty dir = %d, %v (fn called: %v), want 0, ErrNoSnapshot, not called", idx, err, called)
	}
}

func TestLoadFnOtherErrorIsReturned(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, t.TempDir(), 3)
	fx.save(t, 1, []byte("one"))
	fx.save(t, 2, []byte("two"))
	boom := errors.New("out of memory, say")
	tries := 0
	idx, err := fx.Load(func(uint64, []byte) error { tries++; return boom })
	if !errors.Is(err, boom) || errors.Is(err, ErrNoSnapshot) || idx != 0 || tries != 1 {
		t.Errorf("Load(fn fails) = %d, %v after %d calls, want 0, an error wrapping %v after 1", idx, err, tries, boom)
	}
	if diff := cmp.Diff([]string{snapName(1), snapName(2)}, dirNames(t, fx.dir)); diff != "" {
		t.Errorf("dir after Load (-want +got):\n%s", diff)
	}
}

func TestLoadRemovesTempFiles(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, t.TempDir(), 3)
	fx.save(t, 1, []byte("one"))
	for _, name := range []string{"0000000000000002-123.tmp", "stray.tmp", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(fx.dir, name), []byte("GHSNAP"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	checkLoads(t, fx, 1, []byte("one"))
	if diff := cmp.Diff([]string{snapName(1), "notes.txt"}, dirNames(t, fx.dir)); diff != "" {
		t.Errorf("dir after Load (-want +got):\n%s", diff)
	}
}

// loadRejecting runs Load with an fn that returns ErrCorrupt for index
// reject and checks the payload of the others.
func loadRejecting(fx *fixture, reject uint64) (uint64, error) {
	return fx.Load(func(idx uint64, p []byte) error {
		if idx == reject {
			return fmt.Errorf("decode actor state: %w", ErrCorrupt)
		}
		if string(p) != string(payloadFor(idx, loadPayloadSize)) {
			return fmt.Errorf("index %d: wrong payload", idx)
		}
		return nil
	})
}

func truncateTo(size int) damage {
	return func(tb testing.TB, dir string) {
		tb.Helper()
		if err := os.Truncate(filepath.Join(dir, snapName(3)), int64(size)); err != nil {
			tb.Fatal(err)
		}
	}
}

func flipByte(off int) damage {
	return editFile(func(b []byte) []byte { b[off] ^= 0x20; return b })
}

func editFile(edit func([]byte) []byte) damage {
	return func(tb testing.TB, dir string) {
		tb.Helper()
		path := filepath.Join(dir, snapName(3))
		b, err := os.ReadFile(path)
		if err != nil {
			tb.Fatal(err)
		}
		if err = os.WriteFile(path, edit(b), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
}
