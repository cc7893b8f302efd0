package actors

import (
	"bytes"
	"slices"

	"github.com/google/uuid"

	"gatehouse/wal"
)

// CanonicalImage re-encodes a snapshot payload so that equal states give
// equal bytes, for tests that compare a live system with restores of it:
// users by id, sessions by hash, keys by id (each window first moved to
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
// its canonical form (see CanonicalImage). Unlike System.New it may replay
// from before the snapshot's index: records the snapshot already reflects
// must then change nothing, as they must when a snapshot captured records
// committed after its barrier.
func ReplayCanonical(payload []byte, l *wal.Log, from uint64, now int64) ([]byte, error) {
	im := newImage(1, 0)
	if payload != nil {
		var err error
		if im, err = decodeImage(payload, 1); err != nil {
			return nil, err
		}
	}
	if err := l.Replay(from, im.apply); err != nil {
		return nil, err
	}
	return canonical(im, now), nil
}

// canonical encodes im as CanonicalImage describes; im has one shard.
func canonical(im *image, now int64) []byte {
	var w enc
	acc := im.acc.encode(0)
	w.bytes(acc.users)
	w.bytes(acc.sessions)
	ids := make([]uuid.UUID, 0, len(im.keys[0]))
	for id := range im.keys[0] {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range ids {
		st := im.keys[0][id].state
		st.win.Used(now)
		encodeKeyState(&w, st)
	}
	hashes := make([]hash, 0, len(im.dirs[0]))
	for h := range im.dirs[0] {
		hashes = append(hashes, h)
	}
	slices.SortFunc(hashes, func(a, b hash) int { return bytes.Compare(a[:], b[:]) })
	for _, h := range hashes {
		id := im.dirs[0][h]
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
