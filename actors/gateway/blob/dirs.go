package blob

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// createDirs creates Dir, tmp and sha256 where missing and syncs the
// parent of each directory it created. Then it notes the fan-out
// directories present and syncs sha256 once, so that their entries are
// durable even if the process that created them crashed before its sync.
func (s *Store) createDirs() error {
	if fi, err := os.Stat(s.cfg.Dir); err != nil || !fi.IsDir() {
		if err := os.MkdirAll(s.cfg.Dir, 0o700); err != nil {
			return err
		}
		if err := s.syncDir(filepath.Dir(filepath.Clean(s.cfg.Dir))); err != nil {
			return fmt.Errorf("sync dir: %w", err)
		}
	}
	if err := s.mkdirs(s.cfg.Dir, tmpDir, algoDir); err != nil {
		return err
	}
	ents, err := os.ReadDir(s.root())
	if err != nil {
		return err
	}
	for _, e := range ents {
		if i, ok := fanIndex(e.Name()); ok && e.IsDir() {
			s.fans[i] = true
		}
	}
	if err := s.syncDir(s.root()); err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	return nil
}

// fanIndex parses the name of a fan-out directory: two lowercase hex digits.
func fanIndex(name string) (int, bool) {
	if len(name) != 2 {
		return 0, false
	}
	var b [1]byte
	if _, err := hex.Decode(b[:], []byte(name)); err != nil || hex.EncodeToString(b[:]) != name {
		return 0, false
	}
	return int(b[0]), true
}

// mkdirs creates the missing names in parent, then syncs parent if it
// created any.
func (s *Store) mkdirs(parent string, names ...string) error {
	created := false
	for _, name := range names {
		p := filepath.Join(parent, name)
		err := os.Mkdir(p, 0o700)
		if err == nil {
			created = true
			continue
		}
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", p)
		}
	}
	if !created {
		return nil
	}
	if err := s.syncDir(parent); err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	return nil
}

// ensureFan makes sure the fan-out directory of ref exists and that its
// entry in sha256 is durable: the first Put into a fan-out directory
// creates it and syncs sha256 before renaming anything into it. Concurrent
// Puts into the same new directory wait for that sync.
func (s *Store) ensureFan(ref Ref) error {
	s.fanMu.Lock()
	defer s.fanMu.Unlock()
	if s.fans[ref[0]] {
		return nil
	}
	dir, _ := s.path(ref)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := s.syncDir(s.root()); err != nil { // also when it existed: its entry may not be durable
		return fmt.Errorf("sync dir: %w", err)
	}
	s.fans[ref[0]] = true
	return nil
}

// removeTemps deletes whatever is in tmp: Puts that a crash interrupted.
func (s *Store) removeTemps() error {
	ents, err := os.ReadDir(s.tmpDir())
	if err != nil {
		return err
	}
	for _, e := range ents {
		path := filepath.Join(s.tmpDir(), e.Name())
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("remove leftover temp file: %w", err)
		}
		s.lg.Info("removed leftover temp file", "path", path)
	}
	return nil
}

func (s *Store) sync(f *os.File) error {
	if s.cfg.NoSync {
		return nil
	}
	return f.Sync()
}

// syncDir fsyncs dir so that renames and creations in it survive a crash.
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
