package keys

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	dto "github.com/prometheus/client_model/go"

	"gatehouse/actors"
	"gatehouse/snapshot"
	"gatehouse/wal"
)

// CanonicalImage re-encodes a snapshot payload so that equal states give
// equal bytes, for tests that compare a live system with restores of it:
// keys by id (each window first moved to
// now, which drops entries that left it, the only part of a key's encoding
// that depends on when it was last touched), then the secret-hash
// directory the keys imply, then extension sections by name.
func CanonicalImage(payload []byte, now int64) ([]byte, error) {
	im, err := decodeImage(payload, 1)
	if err != nil {
		return nil, err
	}
	return canonical(im, now), nil
}

// ReplayCanonical restores an image as System.New does, from a snapshot
// payload (nil: none) and the records of l after index from, and returns
// its canonical form (see CanonicalImage); exts' records go to their
// offline images (OfflineImager). Unlike System.New it may replay from
// before the snapshot's index: records the snapshot already reflects must
// then change nothing, as they must when a snapshot captured records
// committed after its barrier.
func ReplayCanonical(payload []byte, l *wal.Log, from uint64, now int64, exts ...actors.Extension) ([]byte, error) {
	im := newImage(1, 0)
	if payload != nil {
		var err error
		if im, err = decodeImage(payload, 1); err != nil {
			return nil, err
		}
	}
	if err := replayOffline(im, l, from, exts); err != nil {
		return nil, err
	}
	return canonical(im, now), nil
}

// replayOffline replays l after from into im and exts' offline images
// (restored from im.ext), then puts their sections into im.ext.
func replayOffline(im *image, l *wal.Log, from uint64, exts []actors.Extension) error {
	offs := make([]actors.OfflineImage, len(exts))
	for i, x := range exts {
		offs[i] = x.(actors.OfflineImager).OfflineImage()
		if err := offs[i].Restore(im.ext[x.Name()]); err != nil {
			return err
		}
	}
	err := l.Replay(from, func(seq uint64, r wal.Record) error {
		for i, x := range exts {
			if x.Owns(r.Type) {
				return offs[i].Apply(seq, r)
			}
		}
		return im.apply(seq, r)
	})
	if err != nil {
		return err
	}
	if im.ext == nil {
		im.ext = map[string][]byte{}
	}
	for i, x := range exts {
		if im.ext[x.Name()], err = offs[i].Section(); err != nil {
			return err
		}
	}
	return nil
}

// OfflinePayload is the snapshot payload of the image the records of l
// build, off the actors, on shards shards (cluster mode's snapshots),
// with exts' offline images.
func OfflinePayload(l *wal.Log, shards int, now int64, exts ...actors.Extension) ([]byte, error) {
	im := newImage(shards, 0)
	if err := replayOffline(im, l, 0, exts); err != nil {
		return nil, err
	}
	names := make([]string, len(exts))
	sections := make([][]byte, len(exts))
	for i, x := range exts {
		names[i], sections[i] = x.Name(), im.ext[x.Name()]
	}
	return im.encode(names, sections), nil
}

// canonical encodes im as CanonicalImage describes; im has one shard.
func canonical(im *image, now int64) []byte {
	var w enc
	var slots []*slot
	im.keys[0].each(func(sl *slot) { slots = append(slots, sl) })
	slices.SortFunc(slots, func(a, b *slot) int { return bytes.Compare(a.st.rec.id[:], b.st.rec.id[:]) })
	for _, sl := range slots {
		st := &sl.st
		st.window().Used(now)
		encodeKeyState(&w, st)
	}
	// The directory keeps hash prefixes (see dirTable), in full only
	// those in over.
	dir := im.dirs[0]
	var entries []dirEntry
	for _, e := range dir.t {
		if e.id != (uuid.UUID{}) {
			entries = append(entries, e)
		}
	}
	slices.SortFunc(entries, func(a, b dirEntry) int {
		if a.prefix != b.prefix {
			return cmp.Compare(a.prefix, b.prefix)
		}
		return bytes.Compare(a.id[:], b.id[:])
	})
	for _, e := range entries {
		w.uvarint(e.prefix)
		w.fixed(e.id[:])
	}
	hashes := make([]hash, 0, len(dir.over))
	for h := range dir.over {
		hashes = append(hashes, h)
	}
	slices.SortFunc(hashes, func(a, b hash) int { return bytes.Compare(a[:], b[:]) })
	for _, h := range hashes {
		id := dir.over[h]
		w.fixed(h[:])
		w.fixed(id[:])
	}
	names := make([]string, 0, len(im.ext))
	for n := range im.ext {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		w.str(n)
		w.bytes(im.ext[n])
	}
	return w.b
}

// InDirectory reports whether the directory shard of secret's hash maps it
// to a key: it sends the shard the hot path's own message and looks at
// whether the shard routed it on (it does so only for a known hash).
func InDirectory(tb testing.TB, s *Service, secret string) bool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m := &authorize{hash: hashOf([]byte(secret)), reply: make(chan AuthResult, 1)}
	if _, ok, err := actors.Ask(ctx, s.root, s.shards[shardOfHash(m.hash, len(s.shards))], m, m.reply, nil); !ok {
		tb.Fatalf("directory lookup: %v", err)
	}
	return m.routed
}

// WellFormed reports whether secret has the shape of a key (no lookup).
func WellFormed(secret string) bool { return wellFormed([]byte(secret)) }

// LiveKeys is the number of key actors running (the live-keys gauge).
func LiveKeys(s *Service) int {
	var m dto.Metric
	if err := s.m.liveKeys.Write(&m); err != nil {
		return -1
	}
	return int(m.GetGauge().GetValue())
}

// synthKey builds an idle key like a real one: sealed secret, a week of
// per-day usage, an empty window (idle for over an hour).
func synthKey(i int, now int64) *keyState {
	id := uuid.New()
	var h hash
	copy(h[:], id[:])
	h[16], h[17], h[18] = byte(i), byte(i>>8), byte(i>>16)
	st := &keyState{rec: keyRecord{
		id: id, owner: id, name: fmt.Sprintf("service key %d", i), preview: previewChars{'A', 'b', 'C', 'd', 'w', 'X', 'y', 'Z'},
		hash: h, rateLimit: 1000, createdAt: now - 30*86400,
	}, applied: uint64(i + 1)}
	for d := range 7 {
		st.use.add(now-int64(d)*86400-7200, int64(10+d))
	}
	return st
}

// WriteSynthSnapshot saves, at index n, a snapshot of n synthetic idle keys
// in the exact format System.Snapshot writes.
func WriteSynthSnapshot(st *snapshot.Store, n int, now int64) error {
	const perBlock = 16384
	_, err := st.Save(uint64(n), func(w io.Writer) error {
		var blk enc
		var blocks []keyBlock
		count := 0
		for i := range n {
			encodeKeyState(&blk, synthKey(i, now))
			if count++; count == perBlock || i == n-1 {
				blocks = append(blocks, keyBlock{count: count, buf: blk.b})
				blk, count = enc{}, 0
			}
		}
		return actors.WriteSnapshot(w, []actors.Section{keysSection(blocks, n)})
	})
	return err
}

// SealedOfCreated returns the sealed secret a key-created record carries.
func SealedOfCreated(r wal.Record) ([]byte, bool) {
	ev, ok, err := decodeKeyEvent(r)
	if !ok || err != nil {
		return nil, false
	}
	c, ok := ev.(keyCreated)
	if !ok {
		return nil, false
	}
	return c.rec.sealed[:], true
}

// SetDeclineDirect makes key actors decline the direct deliveries decline
// picks (kind: "authorize", "flush" or "logged"), as busy ones would, so
// that the mailbox path runs beside the direct one. The returned func
// resets it.
func SetDeclineDirect(decline func(id uuid.UUID, kind string) bool) (reset func()) {
	f := func(id uuid.UUID, msg any) bool {
		kind := ""
		switch msg.(type) {
		case *authorize:
			kind = "authorize"
		case *flushDirect:
			kind = "flush"
		case *loggedDirect:
			kind = "logged"
		}
		return decline(id, kind)
	}
	declineDirect.Store(&f)
	return func() { declineDirect.Store(nil) }
}
