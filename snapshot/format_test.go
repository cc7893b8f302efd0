package snapshot

import (
	"bytes"
	"errors"
	"flag"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func TestCRC32CCombine(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewChaCha8(seed(1, 2)))
	lens := []int{0, 1, 2, 3, 7, 24, 100, 4096, 65537, 1 << 20}
	for _, la := range lens {
		for _, lb := range lens {
			a, b := make([]byte, la), make([]byte, lb)
			for i := range a {
				a[i] = byte(r.Uint32())
			}
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			crcA, crcB := crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli)
			got := crc32cCombine(crcA, crcB, int64(lb))
			want := crc32.Checksum(append(a, b...), castagnoli)
			if got != want {
				t.Errorf("crc32cCombine(len %d, len %d) = %08x, want %08x", la, lb, got, want)
			}
		}
	}
}

func TestParseSnapName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		want   uint64
		wantOK bool
	}{
		{"0000000000000000.snap", 0, true},
		{"000000000000002a.snap", 42, true},
		{"ffffffffffffffff.snap", 1<<64 - 1, true},
		{"000000000000002A.snap", 0, false}, // not written by Save
		{"2a.snap", 0, false},
		{"000000000000002a.snap.broken", 0, false},
		{"000000000000002a-123.tmp", 0, false},
		{"000000000000002g.snap", 0, false},
		{"+00000000000002a.snap", 0, false},
		{"00000000000000002a.snap", 0, false},
		{".snap", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseSnapName(tt.name)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("parseSnapName(%q) = %d, %v, want %d, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}

// TestGoldenV1 pins the version 1 file format: go test ./snapshot -run Golden -update
// rewrites testdata/v1.snap.golden. Review the diff: existing files must stay readable.
func TestGoldenV1(t *testing.T) {
	const idx = 7
	payload := []byte("gatehouse snapshot format v1\n")
	golden := filepath.Join("testdata", "v1.snap.golden")
	fx := newFixture(t, t.TempDir(), 1)
	fx.save(t, idx, payload)
	got := readSnap(t, fx.dir, idx)
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Save(%d) file differs from %s (-want +got):\n%s", idx, golden, diff)
	}
	p, err := decode(idx, want)
	if err != nil || !bytes.Equal(p, payload) {
		t.Errorf("decode(%s) = %q, %v, want %q, nil", golden, p, err, payload)
	}
}

func TestDecodeRejectsOverflowingLength(t *testing.T) {
	t.Parallel()
	b := encodeV1(3, []byte("abc"))
	copy(b[offLength:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xe5}) // 28+n wraps to 3
	if _, err := decode(3, b); !errors.Is(err, ErrCorrupt) {
		t.Errorf("decode(length near 2^64) = %v, want ErrCorrupt", err)
	}
}

// FuzzDecode: decode never panics; it either returns the payload of a file
// that re-encodes to exactly the same bytes, or an error wrapping ErrCorrupt.
func FuzzDecode(f *testing.F) {
	f.Add(uint64(7), encodeV1(7, []byte("gatehouse")))
	f.Add(uint64(0), encodeV1(0, nil))
	f.Add(uint64(1), encodeV1(2, []byte("x")))
	f.Add(uint64(1), []byte("GHSNAP"))
	f.Add(uint64(1), []byte{})
	f.Fuzz(func(t *testing.T, idx uint64, data []byte) {
		p, err := decode(idx, data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode(%d, %x) = %v, want an error wrapping ErrCorrupt", idx, data, err)
			}
			return
		}
		if re := encodeV1(idx, p); !bytes.Equal(re, data) {
			t.Fatalf("decode(%d, %x) = %x, which re-encodes to %x", idx, data, p, re)
		}
	})
}
