package blob

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// testHookBeforeRename, when set, runs inside Put after the temp file has
// been written, synced and closed, and before it is renamed to its address.
// Crash tests set it in a child process to SIGKILL that process at exactly
// this point. It is read without synchronization: set it before calling
// Put and never from a parallel test.
var testHookBeforeRename func()

// Names inside Config.Dir (see the package documentation).
const (
	algoDir   = "sha256" // the blobs, under 256 fan-out directories 00..ff
	tmpDir    = "tmp"    // Puts in progress
	tmpPrefix = "put-"
)

// Store is a directory of content-addressed blobs; see the package
// documentation for the layout, the durability rules and collection. Its
// methods are safe for concurrent use. Only one Store may use a directory
// at a time (nothing locks it against another process; the WAL's lock on
// the same data dir does).
type Store struct {
	cfg Config
	lg  *slog.Logger
	m   *metrics

	fanMu sync.Mutex // serializes ensureFan
	fans  [256]bool  // fan-out directories known to exist durably, by first byte

	// mu guards the fields below it, and Collect removes a file only while
	// holding it, so that a hold (Put, Hold) and a removal never interleave.
	mu     sync.Mutex
	gen    uint64         // the current generation; Cut advances it
	holds  map[Ref]int    // Puts and Holds not yet Released
	stamps map[Ref]uint64 // the generation of each ref's last Put, Hold or Release
}

// New validates cfg, creates Dir and its tmp and sha256 directories (mode
// 0700) where missing, removes the temp files of Puts a crash interrupted, and
// registers the metrics on reg (nil: not registered). A nil lg discards
// logs. It does not read the blobs: they are verified when read.
func New(cfg Config, lg *slog.Logger, reg prometheus.Registerer) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		cfg:    cfg,
		lg:     lg.With("component", "blob"),
		holds:  map[Ref]int{},
		stamps: map[Ref]uint64{},
	}
	if err := s.createDirs(); err != nil {
		return nil, fmt.Errorf("open %s: %w", cfg.Dir, err)
	}
	if err := s.removeTemps(); err != nil {
		return nil, fmt.Errorf("open %s: %w", cfg.Dir, err)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	s.m = m
	return s, nil
}

func (s *Store) root() string   { return filepath.Join(s.cfg.Dir, algoDir) }
func (s *Store) tmpDir() string { return filepath.Join(s.cfg.Dir, tmpDir) }

// path returns the fan-out directory and the file of r.
func (s *Store) path(r Ref) (dir, file string) {
	h := r.String()
	dir = filepath.Join(s.cfg.Dir, algoDir, h[:2])
	return dir, filepath.Join(dir, h[2:])
}

// Put stores the bytes r yields until EOF and returns their Ref and size
// once they are durable: a record naming the Ref may then be appended. r
// may yield at most limit bytes: beyond that Put returns an error wrapping
// ErrTooLarge, having read at most limit+1 bytes of r and written at most
// limit to disk, and stores nothing. A read error from r is returned
// wrapped; nothing is stored either.
//
// Putting bytes that are stored already is idempotent and replaces
// nothing: the input is still read and hashed into a temp file (the ref is
// known only at its end), then the stored copy is read back and checked,
// and the temp file is dropped without a data fsync or a rename. A damaged
// stored copy is replaced.
//
// On success the blob is held against collection until Release(ref) (see
// the package documentation): call Release once the record naming it is
// appended, or once it is certain never to be. On error nothing is held.
func (s *Store) Put(r io.Reader, limit int64) (ref Ref, size int64, err error) {
	return s.put(r, limit, nil)
}

// PutRef stores the bytes r yields as Put does, for a caller that knows
// their ref already (bytes copied from another node): if they do not hash
// to want it returns an error wrapping ErrCorrupt and stores nothing (the
// temp file is removed unsynced, and nothing is held). On success the blob
// is held until Release(want), as after Put.
func (s *Store) PutRef(r io.Reader, want Ref, limit int64) (size int64, err error) {
	_, size, err = s.put(r, limit, &want)
	return size, err
}

// put is Put, and PutRef when want is not nil.
func (s *Store) put(r io.Reader, limit int64, want *Ref) (ref Ref, size int64, err error) {
	start := time.Now()
	result := putError
	defer func() { s.m.puts.WithLabelValues(result).Inc() }()
	if limit < 0 {
		return Ref{}, 0, fmt.Errorf("put: limit %d < 0", limit)
	}
	f, err := os.CreateTemp(s.tmpDir(), tmpPrefix+"*")
	if err != nil {
		return Ref{}, 0, fmt.Errorf("put: %w", err)
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if !renamed { // error, existing copy, or a panic in r: leave nothing behind
			_ = f.Close() // a second Close only returns os.ErrClosed
			_ = os.Remove(tmp)
		}
	}()
	h := sha256.New()
	size, err = copyAtMost(io.MultiWriter(f, h), r, limit)
	if errors.Is(err, ErrTooLarge) {
		result = putTooLarge
		return Ref{}, 0, fmt.Errorf("put: more than %d bytes: %w", limit, err)
	}
	if err != nil {
		return Ref{}, 0, fmt.Errorf("put: %w", err)
	}
	ref = Ref(h.Sum(nil))
	if want != nil && ref != *want {
		result = putCorrupt
		s.m.corrupt.Inc()
		return Ref{}, 0, fmt.Errorf("put %s: content hashes to %s: %w", *want, ref, ErrCorrupt)
	}
	s.hold(ref) // from here on Collect leaves ref alone
	if renamed, err = s.install(f, ref, size); err != nil {
		s.Release(ref)
		return Ref{}, 0, fmt.Errorf("put %s: %w", ref, err)
	}
	result = putExisting
	if renamed {
		result = putStored
		s.m.writtenBytes.Add(float64(size))
	}
	s.m.putDuration.Observe(time.Since(start).Seconds())
	return ref, size, nil
}

// copyAtMost copies r to w until EOF. If r holds more than limit bytes it
// returns ErrTooLarge, having written limit bytes and read limit+1.
func copyAtMost(w io.Writer, r io.Reader, limit int64) (int64, error) {
	n, err := io.Copy(w, io.LimitReader(r, limit))
	if err != nil || n < limit {
		return n, err
	}
	var probe [1]byte
	m, err := io.ReadFull(r, probe[:])
	if m > 0 {
		return n, ErrTooLarge
	}
	if !errors.Is(err, io.EOF) {
		return n, err
	}
	return n, nil
}

// install makes the blob in the temp file f, of the given ref and size,
// durable at its address. If an intact copy is there already it leaves f
// to the caller (renamed false); otherwise it syncs and closes f and
// renames it into place. Either way it then syncs the fan-out directory:
// even an existing copy may have been renamed by a Put that has not synced
// the directory yet, and the caller is about to name the blob in a durable
// record.
func (s *Store) install(f *os.File, ref Ref, size int64) (renamed bool, err error) {
	dir, file := s.path(ref)
	if err := s.ensureFan(ref); err != nil {
		return false, err
	}
	if !s.intact(ref, file, size) {
		if err := s.sync(f); err != nil {
			return false, fmt.Errorf("sync: %w", err)
		}
		if err := f.Close(); err != nil {
			return false, fmt.Errorf("close: %w", err)
		}
		if testHookBeforeRename != nil {
			testHookBeforeRename()
		}
		if err := os.Rename(f.Name(), file); err != nil {
			return false, fmt.Errorf("rename: %w", err)
		}
		renamed = true
	}
	if err := s.syncDir(dir); err != nil {
		return renamed, fmt.Errorf("sync dir: %w", err)
	}
	return renamed, nil
}

// intact reports whether file holds ref's bytes. A damaged copy is logged
// and counted (Put replaces it); an absent one is not.
func (s *Store) intact(ref Ref, file string, size int64) bool {
	fi, err := os.Stat(file)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err == nil && fi.Mode().IsRegular() && fi.Size() != size {
		s.m.corrupt.Inc()
		err = fmt.Errorf("%d bytes, want %d: %w", fi.Size(), size, ErrCorrupt)
	}
	if err == nil {
		err = s.Verify(ref)
	}
	if err != nil {
		s.lg.Warn("replacing damaged blob", "ref", ref.String(), "err", err)
		return false
	}
	return true
}

func (s *Store) hold(ref Ref) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds[ref]++
	s.stamps[ref] = s.gen
}

// Hold holds a stored blob against collection as Put does, for a record
// that names a blob this caller did not just Put (one copied from another
// entity, say); Release it the same way. It returns an error wrapping
// ErrNotFound, and holds nothing, if the blob is absent. It checks presence,
// not integrity.
func (s *Store) Hold(ref Ref) error {
	_, file := s.path(ref)
	s.mu.Lock()
	defer s.mu.Unlock()
	// Under mu: Collect cannot remove the file between this check and the hold.
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("hold %s: %w", ref, ErrNotFound)
	} else if err != nil {
		return fmt.Errorf("hold %s: %w", ref, err)
	}
	s.holds[ref]++
	s.stamps[ref] = s.gen
	return nil
}

// Release ends one hold on ref taken by Put or Hold. Releasing a ref that
// is not held does nothing.
func (s *Store) Release(ref Ref) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch n := s.holds[ref]; {
	case n > 1:
		s.holds[ref] = n - 1
	case n == 1:
		delete(s.holds, ref)
	default:
		return
	}
	s.stamps[ref] = s.gen
}

// Stat returns the size of the stored blob without reading it: an error
// wrapping ErrNotFound if it is absent, ErrCorrupt if its address holds
// something other than a regular file.
func (s *Store) Stat(ref Ref) (int64, error) {
	_, file := s.path(ref)
	fi, err := os.Stat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, fmt.Errorf("stat %s: %w", ref, ErrNotFound)
	case err != nil:
		return 0, fmt.Errorf("stat %s: %w", ref, err)
	case !fi.Mode().IsRegular():
		return 0, fmt.Errorf("stat %s: not a regular file: %w", ref, ErrCorrupt)
	}
	return fi.Size(), nil
}
