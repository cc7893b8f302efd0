package snapshot

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// bufSize is the buffer between the payload writer and the temp file.
const bufSize = 256 << 10

// testHookBeforeRename, when set, runs inside Save after the temp file has
// been written, synced and closed, and before it is renamed into place.
// Crash tests set it in a child process to SIGKILL that process at exactly
// this point; other tests use it to copy the directory as a crash would
// leave it. It is read without synchronization: set it before calling Save
// and never from a parallel test.
var testHookBeforeRename func()

// Store saves and loads the snapshot files of one directory. Its methods are
// safe for concurrent use and run one at a time. Only one Store may use a
// directory: nothing locks it against other processes.
type Store struct {
	cfg Config
	lg  *slog.Logger
	m   *metrics

	mu sync.Mutex // serializes Save, Load and List
}

// New validates cfg, creates cfg.Dir (mode 0700) if it is missing and
// registers the metrics on reg (nil: not registered). A nil lg discards logs.
func New(cfg Config, lg *slog.Logger, reg prometheus.Registerer) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if err := createDir(cfg.Dir); err != nil {
		return nil, fmt.Errorf("create dir: %w", err)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Store{cfg: cfg, lg: lg.With("component", "snapshot"), m: m}, nil
}

// Save writes the snapshot of index idx, whose payload write streams into w;
// w must not be used after write returns. It returns the size of the file,
// header and trailer included.
//
// The file becomes visible under its final name only once it is complete
// and synced, and the directory is synced before Save returns, so after a
// nil error the snapshot survives a crash. Then snapshots beyond
// cfg.Retain are deleted, oldest first (a failure there is logged, not
// returned: the new snapshot is safe). Saving an existing index replaces
// that file atomically.
//
// On error the temp file is removed and no other file is touched, with one
// exception: if only the final directory sync fails, the new file, complete
// and valid, may remain. Either way the caller must treat the snapshot as
// not durable (for example, not truncate the WAL).
func (s *Store) Save(idx uint64, write func(w io.Writer) error) (size int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := time.Now()
	name := snapName(idx)
	f, err := os.CreateTemp(s.cfg.Dir, fmt.Sprintf("%016x-*%s", idx, tmpExt))
	if err != nil {
		return 0, fmt.Errorf("save %s: %w", name, err)
	}
	renamed := false
	defer func() {
		if !renamed { // error, or panic in write: leave nothing behind
			_ = f.Close() // a second Close only returns os.ErrClosed
			_ = os.Remove(f.Name())
		}
	}()
	if size, err = writeFile(f, idx, write); err != nil {
		return 0, fmt.Errorf("save %s: %w", name, err)
	}
	if err = f.Close(); err != nil {
		return 0, fmt.Errorf("save %s: close: %w", name, err)
	}
	if testHookBeforeRename != nil {
		testHookBeforeRename()
	}
	if err = os.Rename(f.Name(), filepath.Join(s.cfg.Dir, name)); err != nil {
		return 0, fmt.Errorf("save %s: %w", name, err)
	}
	renamed = true
	if err = syncDir(s.cfg.Dir); err != nil {
		return 0, fmt.Errorf("save %s: sync dir: %w", name, err)
	}
	took := time.Since(start)
	s.m.saveDuration.Observe(took.Seconds())
	s.m.size.Set(float64(size))
	s.lg.Debug("saved snapshot", "index", idx, "size", size, "duration", took)
	s.prune()
	return size, nil
}

// writeFile writes header, payload and trailer to f, patches the payload
// length into the header and syncs f. It returns the file size.
func writeFile(f *os.File, idx uint64, write func(io.Writer) error) (int64, error) {
	var hdr [headerSize]byte
	putHeader(hdr[:], idx, 0) // the length is patched in once known
	bw := bufio.NewWriterSize(f, bufSize)
	_, _ = bw.Write(hdr[:]) // fits the empty buffer; a failure would surface at Flush
	cw := &crcWriter{w: bw}
	if err := write(cw); err != nil {
		return 0, fmt.Errorf("write payload: %w", err)
	}
	if cw.err != nil { // write ignored a failed Write
		return 0, fmt.Errorf("write payload: %w", cw.err)
	}
	putHeader(hdr[:], idx, uint64(cw.n))
	var tr [trailerSize]byte
	sum := crc32cCombine(crc32.Checksum(hdr[:], castagnoli), cw.crc, cw.n)
	binary.BigEndian.PutUint32(tr[:], sum)
	_, _ = bw.Write(tr[:])
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("write: %w", err)
	}
	if _, err := f.WriteAt(hdr[:], 0); err != nil {
		return 0, fmt.Errorf("write header: %w", err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("sync: %w", err)
	}
	return int64(overhead) + cw.n, nil
}

// crcWriter computes the CRC-32C and the length of what passes through it.
type crcWriter struct {
	w   io.Writer
	crc uint32
	n   int64
	err error // the first write error
}

func (c *crcWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc = crc32.Update(c.crc, castagnoli, p[:n])
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// prune deletes the snapshots beyond cfg.Retain, oldest first.
func (s *Store) prune() {
	idxs, _, err := s.scan()
	if err != nil {
		s.lg.Warn("retention skipped", "err", err)
		return
	}
	for _, idx := range idxs[min(len(idxs), s.cfg.Retain):] {
		path := filepath.Join(s.cfg.Dir, snapName(idx))
		if err = os.Remove(path); err != nil {
			s.lg.Warn("remove old snapshot", "path", path, "err", err)
			continue
		}
		s.lg.Debug("removed old snapshot", "index", idx)
	}
}

// Load calls fn with the payload of the newest valid snapshot and returns
// its index. fn must not modify payload or keep it after returning.
//
// A file that fails validation, or for which fn returns an error wrapping
// ErrCorrupt, is renamed to <name>.broken, logged at Warn and counted, and
// the next older snapshot is tried; fn must therefore discard whatever it
// built from a payload it rejects. Any other error from fn, or a failure to
// read or rename a file, stops Load and is returned wrapped. ErrNoSnapshot:
// no valid snapshot is left. Leftover *.tmp files (from a crash during Save)
// are removed first.
func (s *Store) Load(fn func(idx uint64, payload []byte) error) (idx uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := time.Now()
	idxs, tmps, err := s.scan()
	if err != nil {
		return 0, fmt.Errorf("load: %w", err)
	}
	s.removeTemps(tmps)
	for _, cand := range idxs {
		var size int
		var ok bool
		if size, ok, err = s.loadOne(cand, fn); err != nil {
			return 0, err
		}
		if ok {
			took := time.Since(start)
			s.m.loadDuration.Observe(took.Seconds())
			s.m.size.Set(float64(size))
			s.lg.Info("loaded snapshot", "index", cand, "size", size, "duration", took)
			return cand, nil
		}
	}
	return 0, ErrNoSnapshot
}

// loadOne reads and validates the snapshot of index idx and hands it to fn.
// ok false with a nil error: the file was set aside as broken.
func (s *Store) loadOne(idx uint64, fn func(uint64, []byte) error) (size int, ok bool, err error) {
	name := snapName(idx)
	data, err := os.ReadFile(filepath.Join(s.cfg.Dir, name))
	if err != nil {
		return 0, false, fmt.Errorf("load %s: %w", name, err)
	}
	payload, err := decode(idx, data)
	if err == nil {
		if err = fn(idx, payload); err != nil && !errors.Is(err, ErrCorrupt) {
			return 0, false, fmt.Errorf("load %s: %w", name, err)
		}
	}
	if err != nil {
		return 0, false, s.setAside(name, err)
	}
	return len(data), true, nil
}

// setAside renames the broken snapshot name to name.broken, then logs and
// counts it.
func (s *Store) setAside(name string, cause error) error {
	from := filepath.Join(s.cfg.Dir, name)
	if err := os.Rename(from, from+brokenExt); err != nil {
		// The cause goes in as text only: Load's error must not match ErrCorrupt.
		return fmt.Errorf("set aside broken %s (%s): %w", name, cause.Error(), err)
	}
	s.m.broken.Inc()
	s.lg.Warn("set aside broken snapshot", "path", from+brokenExt, "err", cause)
	return nil
}

// removeTemps deletes temp files left by a Save that crashed.
func (s *Store) removeTemps(names []string) {
	for _, name := range names {
		path := filepath.Join(s.cfg.Dir, name)
		if err := os.Remove(path); err != nil {
			s.lg.Warn("remove leftover temp file", "path", path, "err", err)
			continue
		}
		s.lg.Info("removed leftover temp file", "path", path)
	}
}

// List returns the indexes of the snapshot files present, newest first,
// without validating them; nil if there are none.
func (s *Store) List() ([]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idxs, _, err := s.scan()
	return idxs, err
}

// scan returns the snapshot indexes in the directory, newest first, and the
// names of the temp files. Other entries are ignored.
func (s *Store) scan() (idxs []uint64, tmps []string, err error) {
	ents, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("list: %w", err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if idx, ok := parseSnapName(e.Name()); ok {
			idxs = append(idxs, idx)
		} else if strings.HasSuffix(e.Name(), tmpExt) {
			tmps = append(tmps, e.Name())
		}
	}
	slices.SortFunc(idxs, func(a, b uint64) int { return cmp.Compare(b, a) })
	return idxs, tmps, nil
}

// createDir creates dir (mode 0700) and its missing parents, and syncs the
// parent so that the new directory survives a crash. An existing dir is left
// as it is.
func createDir(dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return syncDir(filepath.Dir(filepath.Clean(dir)))
}

// syncDir fsyncs the directory so that renames and creations in it survive
// a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
