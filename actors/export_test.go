package actors

import (
	"bytes"
	"slices"

	"github.com/google/uuid"
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
	return w.b, nil
}
