package blob

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"testing"
)

// TestPutRef: bytes that hash to the ref given are stored and held; others
// are refused with ErrCorrupt, leaving no blob, no temp file and no hold.
func TestPutRef(t *testing.T) {
	fx := newFastFixture(t)
	good := payload(1, 300<<10)
	ref := Ref(sha256.Sum256(good))
	bad := bytes.Clone(good)
	bad[1000] ^= 1

	size, err := fx.PutRef(bytes.NewReader(bad), ref, 1<<20)
	if !errors.Is(err, ErrCorrupt) || size != 0 {
		t.Fatalf("PutRef(damaged bytes) = %d, %v; want ErrCorrupt", size, err)
	}
	if _, err := fx.Stat(ref); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after a refused PutRef: Stat = %v, want ErrNotFound", err)
	}
	if got := files(t, fx.dir+"/"+algoDir); len(got) != 0 {
		t.Fatalf("a refused PutRef left %v", got)
	}
	if tmp := tempFiles(t, fx.dir); len(tmp) != 0 {
		t.Fatalf("a refused PutRef left temp files %v", tmp)
	}
	if n := fx.metric(t, "gatehouse_blob_puts_total", putCorrupt); n != 1 {
		t.Fatalf("puts{corrupt} = %v, want 1", n)
	}
	if _, err := fx.PutRef(bytes.NewReader(good), ref, int64(len(good)-1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("PutRef over its limit = %v, want ErrTooLarge", err)
	}

	size, err = fx.PutRef(bytes.NewReader(good), ref, 1<<20)
	if err != nil || size != int64(len(good)) {
		t.Fatalf("PutRef(good bytes) = %d, %v", size, err)
	}
	// Held until Released: a collection with a later cut keeps it.
	if n, err := fx.Collect(fx.Cut(), func(Ref) bool { return false }); err != nil || n != 0 {
		t.Fatalf("Collect while held = %d, %v; want 0", n, err)
	}
	fx.Release(ref)
	got, err := readAll(fx.Store, ref)
	if err != nil || !bytes.Equal(got, good) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
}

// TestReaderReadAt: ReadAt serves any range of the stored bytes, short at
// the end with io.EOF, and does not disturb Read's verification.
func TestReaderReadAt(t *testing.T) {
	fx := newFastFixture(t)
	b := payload(2, 100_000)
	ref := fx.put(t, b)
	rd, err := fx.Open(ref)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for _, tc := range []struct {
		off, n, want int
		eof          bool
	}{
		{0, 10, 10, false},
		{99_990, 10, 10, false},
		{99_995, 10, 5, true},
		{100_000, 10, 0, true},
		{50_000, 4096, 4096, false},
	} {
		p := make([]byte, tc.n)
		n, err := rd.ReadAt(p, int64(tc.off))
		if n != tc.want || errors.Is(err, io.EOF) != tc.eof || (err != nil && !errors.Is(err, io.EOF)) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v; want %d (EOF %v)", tc.n, tc.off, n, err, tc.want, tc.eof)
		}
		if !bytes.Equal(p[:n], b[tc.off:tc.off+n]) {
			t.Fatalf("ReadAt(%d bytes at %d): wrong bytes", tc.n, tc.off)
		}
	}
	all, err := io.ReadAll(rd)
	if err != nil || !bytes.Equal(all, b) {
		t.Fatalf("Read after ReadAt: %d bytes, %v", len(all), err)
	}
}
