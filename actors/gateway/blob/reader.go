package blob

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
)

// Reader reads one blob and checks it against its ref as it goes. Not safe
// for concurrent use.
type Reader struct {
	f    *os.File
	h    hash.Hash
	ref  Ref
	size int64
	m    *metrics
	err  error // sticky: io.EOF or the ErrCorrupt error, once reached
}

// Open returns a Reader of the blob; the caller closes it. An absent blob
// is an error wrapping ErrNotFound; an address that holds something other
// than a regular file, ErrCorrupt.
//
// The Reader verifies while reading: at the end of the blob it returns
// io.EOF if the bytes it returned hash to ref, and an error wrapping
// ErrCorrupt instead if they do not. The bytes are therefore unverified
// until io.EOF: a caller that cannot take back what it passed on (an HTTP
// response already under way) calls Verify first, or aborts (closes the
// connection) on ErrCorrupt. A blob removed by Collect while open stays
// readable through the Reader (POSIX semantics).
func (s *Store) Open(ref Ref) (*Reader, error) {
	_, file := s.path(ref)
	f, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open %s: %w", ref, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", ref, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		s.m.corrupt.Inc()
		err = fmt.Errorf("not a regular file: %w", ErrCorrupt)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("open %s: %w", ref, err)
	}
	return &Reader{f: f, h: sha256.New(), ref: ref, size: fi.Size(), m: s.m}, nil
}

// Size returns the size of the blob on disk. If the record naming the blob
// carries its size, a difference means the blob is corrupt (the Reader
// reports it at the end).
func (r *Reader) Size() int64 { return r.size }

// Read reads the blob. At its end it returns io.EOF if the bytes read hash
// to the ref and an error wrapping ErrCorrupt if they do not.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.f.Read(p)
	r.h.Write(p[:n])
	if !errors.Is(err, io.EOF) {
		if err != nil {
			err = fmt.Errorf("read %s: %w", r.ref, err)
		}
		return n, err
	}
	if got := Ref(r.h.Sum(nil)); got != r.ref {
		r.m.corrupt.Inc()
		r.err = fmt.Errorf("read %s: content hashes to %s: %w", r.ref, got, ErrCorrupt)
	} else {
		r.err = io.EOF
	}
	return n, r.err
}

// ReadAt reads len(p) bytes of the blob from offset off, as io.ReaderAt
// does, without verifying them and without moving Read's position: for
// serving a range to a reader that verifies the whole blob itself (a node
// copying it through PutRef). Read and ReadAt may be mixed.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.f.ReadAt(p, off)
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("read %s at %d: %w", r.ref, off, err)
	}
	return n, err
}

// Close closes the file.
func (r *Reader) Close() error { return r.f.Close() }

// Verify reads the whole blob: nil if its bytes hash to ref, otherwise an
// error wrapping ErrNotFound or ErrCorrupt (or the I/O error).
func (s *Store) Verify(ref Ref) error {
	r, err := s.Open(ref)
	if err != nil {
		return err
	}
	defer r.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err = r.Read(buf); err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
