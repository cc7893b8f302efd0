package actors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"

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

// keyDomain is the keys as the engine drives every domain: an Extension
// (records 10..16, section "keys") that System lists first, so the keys
// restore, start and are captured before the others, in the order System
// kept when it handled them by hand. Its actors and methods are still
// System's (keys.go, shard.go, keyactor.go); they move to a package of
// their own behind it (docs/architecture.md, issue 33).
type keyDomain struct {
	s        *System
	im       *image       // restored, handed to the shards at Start (nil after)
	captured atomic.Int64 // keys in the last capture, for the log
}

var (
	_ Extension       = (*keyDomain)(nil)
	_ StreamedSection = (*keyDomain)(nil)
	_ OfflineImager   = (*keyDomain)(nil)
	_ LiveApplier     = (*keyDomain)(nil)
)

func (k *keyDomain) Name() string         { return sectionKeys }
func (k *keyDomain) Owns(t wal.Type) bool { return isKeyType(t) }

// Restore decodes the keys' section (nil: none) on every core.
func (k *keyDomain) Restore(section []byte) error {
	if section == nil {
		k.im = newImage(k.s.cfg.Shards, 0)
		return nil
	}
	im, err := decodeKeys(section, k.s.cfg.Shards)
	if err != nil {
		return err
	}
	k.im = im
	return nil
}

// Apply replays one key record (see keyState.skip for the watermarks).
func (k *keyDomain) Apply(seq uint64, rec wal.Record) error { return k.im.apply(seq, rec) }

// Start hands each shard its part of the image and spawns it.
func (k *keyDomain) Start(ExtensionEnv) error {
	k.s.spawnShards(k.im)
	k.im = nil
	return nil
}

// Capture is CaptureParts joined (Snapshot calls CaptureParts).
func (k *keyDomain) Capture(ctx context.Context) ([]byte, error) {
	parts, err := k.CaptureParts(ctx)
	return bytes.Join(parts, nil), err
}

// CaptureParts gathers every shard's keys, framed as the keys' section.
func (k *keyDomain) CaptureParts(ctx context.Context) ([][]byte, error) {
	blocks, total, err := k.s.capture(ctx)
	if err != nil {
		return nil, err
	}
	k.captured.Store(int64(total))
	return keysSection(blocks, total).parts, nil
}

// Stop does nothing: the shards stop with the actor system.
func (k *keyDomain) Stop() {}

// ApplyLive applies key records another node of a cluster wrote, in the
// key's shard or its live key actor (keycluster.go).
func (k *keyDomain) ApplyLive(ctx context.Context, seq uint64, r wal.Record) error {
	var evs []keyEvent
	if r.Type == recKeysUsed {
		batch, err := decodeKeysUsed(r.Data)
		if err != nil {
			k.s.lg.Error("cluster: skipped an undecodable record", "seq", seq, "type", r.Type, "err", err)
			return nil
		}
		for _, ev := range batch {
			evs = append(evs, ev)
		}
	} else {
		ev, ok, err := decodeKeyEvent(r)
		if err != nil || !ok {
			k.s.lg.Error("cluster: skipped an unknown or undecodable record", "seq", seq, "type", r.Type, "err", err)
			return nil
		}
		evs = append(evs, ev)
	}
	for _, ev := range evs {
		if err := k.s.applyForeignKey(ctx, seq, ev); err != nil {
			return err
		}
	}
	return nil
}

// OfflineImage returns an empty image of the keys, off the actors.
func (k *keyDomain) OfflineImage() OfflineImage { return &keysOffline{im: newImage(k.s.cfg.Shards, 0)} }

type keysOffline struct{ im *image }

func (o *keysOffline) Restore(section []byte) error {
	if section == nil {
		o.im = newImage(len(o.im.keys), 0)
		return nil
	}
	im, err := decodeKeys(section, len(o.im.keys))
	if err == nil {
		o.im = im
	}
	return err
}

func (o *keysOffline) Apply(seq uint64, rec wal.Record) error { return o.im.apply(seq, rec) }

func (o *keysOffline) Section() ([]byte, error) {
	blocks, total := o.im.blocks()
	return bytes.Join(keysSection(blocks, total).parts, nil), nil
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
func (s *System) captureSections(ctx context.Context) ([]section, error) {
	secs := make([]section, len(s.exts))
	for i, x := range s.exts {
		secs[i].name = x.Name()
		if st, ok := x.(StreamedSection); ok {
			parts, err := st.CaptureParts(ctx)
			if err != nil {
				return nil, fmt.Errorf("snapshot capture %s: %w", x.Name(), err)
			}
			secs[i].parts = parts
			continue
		}
		b, err := x.Capture(ctx)
		if err != nil {
			return nil, fmt.Errorf("snapshot capture %s: %w", x.Name(), err)
		}
		secs[i].parts = [][]byte{b}
	}
	return secs, nil
}

// errNoOfflineImage: cluster mode's snapshots need every extension's.
var errNoOfflineImage = errors.New("has no offline image (OfflineImager)")
