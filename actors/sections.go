package actors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"gatehouse/wal"
)

// StreamedSection is an optional Extension capability for a section too
// large to copy (the keys': hundreds of MB at a million keys). Snapshot
// writes the parts CaptureParts returns in order, never joined, instead of
// calling Capture; and Restore gets a view into the snapshot payload, which
// it must not keep after it returns (other extensions get a copy).
type StreamedSection interface {
	CaptureParts(ctx context.Context) ([][]byte, error)
}

// restoreSections hands each extension its section of a snapshot (nil:
// none): a view to a StreamedSection, a copy to the others.
func (s *System) restoreSections(secs map[string][]byte) error {
	for _, x := range s.exts {
		sc := secs[x.Name()]
		if _, streamed := x.(StreamedSection); !streamed && sc != nil {
			sc = bytes.Clone(sc)
		}
		if err := x.Restore(sc); err != nil {
			return fmt.Errorf("extension %s: %w", x.Name(), err)
		}
	}
	return nil
}

// applyRecord replays one record into the extension that owns it (the
// snapshot barrier into none).
func (s *System) applyRecord(seq uint64, r wal.Record) error {
	if r.Type == recBarrier {
		return nil
	}
	x := s.extensionFor(r.Type)
	if x == nil {
		return fmt.Errorf("seq %d: unknown record type %d: %w", seq, r.Type, ErrCorrupt)
	}
	return x.Apply(seq, r)
}

// captureSections captures every extension's section, in order.
func (s *System) captureSections(ctx context.Context) ([]Section, error) {
	secs := make([]Section, len(s.exts))
	for i, x := range s.exts {
		secs[i].Name = x.Name()
		if st, ok := x.(StreamedSection); ok {
			parts, err := st.CaptureParts(ctx)
			if err != nil {
				return nil, fmt.Errorf("snapshot capture %s: %w", x.Name(), err)
			}
			secs[i].Parts = parts
			continue
		}
		b, err := x.Capture(ctx)
		if err != nil {
			return nil, fmt.Errorf("snapshot capture %s: %w", x.Name(), err)
		}
		secs[i].Parts = [][]byte{b}
	}
	return secs, nil
}

// errNoOfflineImage: cluster mode's snapshots need every extension's.
var errNoOfflineImage = errors.New("has no offline image (OfflineImager)")
