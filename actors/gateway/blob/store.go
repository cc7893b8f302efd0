package blob

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// testHookBeforeRename, when set, runs inside Put after the temp file has
// been written, synced and closed, and before it is renamed into place.
// Crash tests set it in a child process to SIGKILL it at exactly this
// point. Set it before calling Put, never from a parallel test.
var testHookBeforeRename func()

// Config configures a Store.
type Config struct {
	// Dir holds the blobs; created (0700) if missing.
	Dir string
	// NoSync skips every fsync: for tests and benchmarks only.
	NoSync bool
}

// Validate names the first bad field.
func (c Config) Validate() error {
	if c.Dir == "" {
		return errors.New("blob: Dir is required")
	}
	return nil
}

// Store is a directory of content-addressed blobs (see the package
// documentation). Safe for concurrent use; only one Store may use a
// directory at a time.
type Store struct {
	cfg Config
	lg  *slog.Logger

	mu     sync.Mutex
	gen    uint64         // current generation; Cut advances it
	holds  map[Ref]int    // Puts not yet Released
	stamps map[Ref]uint64 // generation of the last Put or Release
}

// Cut marks a point before a snapshot's barrier; see Collect.
type Cut struct{ gen uint64 }

// Open creates cfg.Dir if needed and removes temp files a crash left
// behind. A nil lg discards logs.
func Open(cfg Config, lg *slog.Logger) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	s := &Store{cfg: cfg, lg: lg.With("component", "blob"), holds: map[Ref]int{}, stamps: map[Ref]uint64{}}
	for _, d := range []string{cfg.Dir, s.tmpDir(), filepath.Join(cfg.Dir, "sha256")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("blob: open %s: %w", d, err)
		}
	}
	ents, err := os.ReadDir(s.tmpDir())
	if err != nil {
		return nil, fmt.Errorf("blob: open: %w", err)
	}
	for _, e := range ents {
		if err := os.Remove(filepath.Join(s.tmpDir(), e.Name())); err != nil {
			return nil, fmt.Errorf("blob: remove leftover temp file: %w", err)
		}
		s.lg.Info("removed leftover temp file", "name", e.Name())
	}
	return s, nil
}

func (s *Store) tmpDir() string { return filepath.Join(s.cfg.Dir, "tmp") }

// path returns the fan-out directory and the file of r.
func (s *Store) path(r Ref) (dir, file string) {
	h := r.String()
	dir = filepath.Join(s.cfg.Dir, "sha256", h[:2])
	return dir, filepath.Join(dir, h[2:])
}

// Put stores what r yields, at most limit bytes (more: ErrTooLarge, nothing
// stored, no more than limit+1 bytes read). It returns once the blob is
// durable (see the package documentation), and the blob is then held
// against collection until Release(ref): call it after appending the
// record that names the blob, or when giving up.
func (s *Store) Put(r io.Reader, limit int64) (ref Ref, size int64, err error) {
	f, err := os.CreateTemp(s.tmpDir(), "put-*")
	if err != nil {
		return Ref{}, 0, fmt.Errorf("blob: put: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	h := sha256.New()
	size, err = io.Copy(io.MultiWriter(f, h), io.LimitReader(r, limit+1))
	if err != nil {
		return Ref{}, 0, fmt.Errorf("blob: put: %w", err)
	}
	if size > limit {
		return Ref{}, 0, fmt.Errorf("blob: put: more than %d bytes: %w", limit, ErrTooLarge)
	}
	copy(ref[:], h.Sum(nil))
	if err = s.sync(f); err != nil {
		return Ref{}, 0, fmt.Errorf("blob: put: sync: %w", err)
	}
	if err = f.Close(); err != nil {
		return Ref{}, 0, fmt.Errorf("blob: put: close: %w", err)
	}
	s.hold(ref)
	if err = s.install(tmp, ref, size); err != nil {
		s.Release(ref)
		return Ref{}, 0, err
	}
	return ref, size, nil
}

// install moves the synced temp file to ref's address (or drops it when an
// intact copy is there already) and syncs the directories.
func (s *Store) install(tmp string, ref Ref, size int64) error {
	dir, file := s.path(ref)
	if fi, err := os.Stat(file); err == nil && fi.Size() == size && s.Verify(ref) == nil {
		_ = os.Remove(tmp) // an intact copy is there (a damaged one is replaced below)
		return nil
	}
	_, statErr := os.Stat(dir)
	newDir := errors.Is(statErr, fs.ErrNotExist)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("blob: put: %w", err)
	}
	if testHookBeforeRename != nil {
		testHookBeforeRename()
	}
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("blob: put: rename: %w", err)
	}
	if err := s.syncDir(dir); err != nil {
		return fmt.Errorf("blob: put: sync dir: %w", err)
	}
	if newDir {
		if err := s.syncDir(filepath.Dir(dir)); err != nil {
			return fmt.Errorf("blob: put: sync dir: %w", err)
		}
	}
	return nil
}

func (s *Store) sync(f *os.File) error {
	if s.cfg.NoSync {
		return nil
	}
	return f.Sync()
}

func (s *Store) syncDir(dir string) error {
	if s.cfg.NoSync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

func (s *Store) hold(ref Ref) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds[ref]++
	s.stamps[ref] = s.gen
}

// Release ends one Put's hold on ref (see Put). Releasing a ref that is not
// held does nothing.
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

// Stat returns the size of the blob; ErrNotFound if it is absent.
func (s *Store) Stat(ref Ref) (int64, error) {
	_, file := s.path(ref)
	fi, err := os.Stat(file)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("blob %s: %w", ref, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("blob %s: %w", ref, err)
	}
	return fi.Size(), nil
}

// Reader reads one blob and checks its hash as it goes.
type Reader struct {
	f    *os.File
	h    hash.Hash
	ref  Ref
	size int64
}

// Open returns a reader of the blob; ErrNotFound if it is absent. The
// reader returns ErrCorrupt instead of io.EOF when the bytes read do not
// hash to ref. The caller closes it.
func (s *Store) Open(ref Ref) (*Reader, error) {
	_, file := s.path(ref)
	f, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("blob %s: %w", ref, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", ref, err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("blob %s: %w", ref, err)
	}
	return &Reader{f: f, h: sha256.New(), ref: ref, size: fi.Size()}, nil
}

// Size is the blob's size on disk.
func (r *Reader) Size() int64 { return r.size }

// Read reads the blob; at its end it returns io.EOF if the bytes matched
// the ref and an error wrapping ErrCorrupt if not.
func (r *Reader) Read(p []byte) (int, error) {
	n, err := r.f.Read(p)
	r.h.Write(p[:n])
	if errors.Is(err, io.EOF) {
		var got Ref
		copy(got[:], r.h.Sum(nil))
		if got != r.ref {
			return n, fmt.Errorf("blob %s: content hashes to %s: %w", r.ref, got, ErrCorrupt)
		}
	}
	return n, err
}

// Close closes the file.
func (r *Reader) Close() error { return r.f.Close() }

// Verify reads the whole blob: nil if intact, ErrNotFound, ErrCorrupt.
func (s *Store) Verify(ref Ref) error {
	r, err := s.Open(ref)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(io.Discard, r)
	return err
}

// Cut starts a new generation and returns the point Collect compares
// against. Take it before the snapshot's barrier record is appended.
func (s *Store) Cut() Cut {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	return Cut{gen: s.gen}
}

// Collect removes every blob that keep does not claim, that no Put holds,
// and whose last Put or Release came before c (see the package
// documentation for why that is safe). It returns how many it removed.
func (s *Store) Collect(c Cut, keep func(Ref) bool) (removed int, err error) {
	root := filepath.Join(s.cfg.Dir, "sha256")
	fans, err := os.ReadDir(root)
	if err != nil {
		return 0, fmt.Errorf("blob: collect: %w", err)
	}
	for _, fan := range fans {
		if !fan.IsDir() || len(fan.Name()) != 2 {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(root, fan.Name()))
		if err != nil {
			return removed, fmt.Errorf("blob: collect: %w", err)
		}
		for _, e := range ents {
			ref, perr := ParseRef(fan.Name() + e.Name())
			if perr != nil || strings.ToLower(fan.Name()+e.Name()) != ref.String() {
				continue // not ours: leave it
			}
			if keep(ref) || !s.collectable(ref, c) {
				continue
			}
			if err := os.Remove(filepath.Join(root, fan.Name(), e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return removed, fmt.Errorf("blob: collect %s: %w", ref, err)
			}
			removed++
		}
	}
	s.forget(c)
	if removed > 0 {
		s.lg.Info("collected unreferenced blobs", "removed", removed)
	}
	return removed, nil
}

func (s *Store) collectable(ref Ref, c Cut) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holds[ref] > 0 {
		return false
	}
	st, ok := s.stamps[ref]
	return !ok || st < c.gen
}

// forget drops stamps older than c: a later Collect (with a later cut)
// would treat them as absent anyway.
func (s *Store) forget(c Cut) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ref, st := range s.stamps {
		if st < c.gen && s.holds[ref] == 0 {
			delete(s.stamps, ref)
		}
	}
}
