package blob

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Cut marks the point, just before a snapshot's barrier record, that
// Collect compares holds and releases against. The zero Cut protects every
// blob this Store has seen put, held or released.
type Cut struct{ gen uint64 }

// Cut starts a new generation and returns it. Take it before the snapshot's
// barrier record is appended, and pass it to the Collect that follows that
// snapshot.
func (s *Store) Cut() Cut {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	return Cut{gen: s.gen}
}

// Collect removes every stored blob that keep does not claim, that no Put
// or Hold holds, and whose last Put, Hold or Release came before c; see
// the package documentation for why that never removes a blob a durable
// record names. keep is called without locks held, once per blob at most.
// Collect returns how many blobs it removed, also on error (the first
// failure to list or remove stops it). Files that are not blobs are left
// alone. Removals are not synced: a crash may bring a removed blob back,
// and the next Collect removes it again.
func (s *Store) Collect(c Cut, keep func(Ref) bool) (removed int, err error) {
	var blobs, size int64
	fans, err := os.ReadDir(s.root())
	if err != nil {
		return 0, fmt.Errorf("collect: %w", err)
	}
	for _, f := range fans {
		fan := f.Name()
		if _, ok := fanIndex(fan); !ok || !f.IsDir() {
			continue // not ours: leave it
		}
		ents, err := os.ReadDir(filepath.Join(s.root(), fan))
		if err != nil {
			return removed, fmt.Errorf("collect: %w", err)
		}
		for _, e := range ents {
			ref, perr := ParseRef(fan + e.Name())
			if perr != nil || !e.Type().IsRegular() {
				continue // not a blob: leave it
			}
			if !keep(ref) {
				gone, err := s.removeUnheld(ref, c)
				if err != nil {
					return removed, err
				}
				if gone {
					removed++
					s.m.collected.Inc()
					continue
				}
			}
			blobs++
			if fi, err := e.Info(); err == nil {
				size += fi.Size()
			}
		}
	}
	s.forget(c)
	s.m.blobs.Set(float64(blobs))
	s.m.bytes.Set(float64(size))
	if removed > 0 {
		s.lg.Info("collected unreferenced blobs", "removed", removed, "blobs", blobs, "bytes", size)
	}
	return removed, nil
}

// removeUnheld removes ref's file unless a hold or a stamp at or after c
// protects it. The check and the removal happen under mu, so a Put or Hold
// of the same ref comes either before (and protects it) or after (and
// finds it absent: Put installs it again, Hold returns ErrNotFound).
func (s *Store) removeUnheld(ref Ref, c Cut) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holds[ref] > 0 {
		return false, nil
	}
	if st, ok := s.stamps[ref]; ok && st >= c.gen {
		return false, nil
	}
	_, file := s.path(ref)
	if err := os.Remove(file); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("collect %s: %w", ref, err)
	}
	return true, nil
}

// forget drops the stamps older than c of refs no one holds: a later
// Collect, with a later cut, treats them as absent anyway.
func (s *Store) forget(c Cut) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ref, st := range s.stamps {
		if st < c.gen && s.holds[ref] == 0 {
			delete(s.stamps, ref)
		}
	}
}
