package keys

import (
	"fmt"

	"github.com/google/uuid"

	"gatehouse/wal"
)

// WAL record types. The numbers are part of the on-disk format: never reuse
// or renumber one; add new ones at the end of their range. docs/architecture.md
// lists them.
const (
	// 1 is the engine's snapshot barrier (actors.TypeBarrier)
	// 2..4 are the accounts' (actors/accounts)
	recKeyCreated wal.Type = 10 // binary keyCreated
	recKeyRotated wal.Type = 11 // binary keyRotated
	recKeyRevoked wal.Type = 12 // binary keyRevoked
	recKeyDeleted wal.Type = 13 // 16-byte key id
	recKeyUpdated wal.Type = 14 // binary keyUpdated
	recKeyUsed    wal.Type = 15 // binary keyUsed: usage and window deltas
	recKeysUsed   wal.Type = 16 // binary keysUsed: a shard's batch of keyUsed
)

// isKeyType reports whether t is one of the keys' record types.
func isKeyType(t wal.Type) bool { return t >= recKeyCreated && t <= recKeysUsed }

// keyEvent is an event about one key, applied by its owner.
type keyEvent interface {
	keyID() uuid.UUID
	record() wal.Record
}

type keyCreated struct {
	rec keyRecord // rot is nil, revoked false
}

type keyRotated struct {
	id        uuid.UUID
	preview   previewChars
	hash      hash
	sealed    sealedKey
	at        int64
	graceEnds int64
}

type keyRevoked struct {
	id uuid.UUID
	at int64
}

type keyDeleted struct{ id uuid.UUID }

// keyUpdated carries the full new values of the patchable fields.
type keyUpdated struct {
	id        uuid.UUID
	name      string
	rateLimit int64
	expiresAt int64
}

// keyUsed carries admitted requests per second since the previous flush.
type keyUsed struct {
	id    uuid.UUID
	pairs []secCount
}

func (e keyCreated) keyID() uuid.UUID { return e.rec.id }
func (e keyRotated) keyID() uuid.UUID { return e.id }
func (e keyRevoked) keyID() uuid.UUID { return e.id }
func (e keyDeleted) keyID() uuid.UUID { return e.id }
func (e keyUpdated) keyID() uuid.UUID { return e.id }
func (e keyUsed) keyID() uuid.UUID    { return e.id }

func (e keyCreated) record() wal.Record {
	var w enc
	encodeKeyRecord(&w, &e.rec)
	return wal.Record{Type: recKeyCreated, Data: w.b}
}

func (e keyRotated) record() wal.Record {
	var w enc
	w.fixed(e.id[:])
	w.fixed(e.preview[:])
	w.fixed(e.hash[:])
	w.fixed(e.sealed[:])
	w.varint(e.at)
	w.varint(e.graceEnds)
	return wal.Record{Type: recKeyRotated, Data: w.b}
}

func (e keyRevoked) record() wal.Record {
	var w enc
	w.fixed(e.id[:])
	w.varint(e.at)
	return wal.Record{Type: recKeyRevoked, Data: w.b}
}

func (e keyDeleted) record() wal.Record {
	return wal.Record{Type: recKeyDeleted, Data: append([]byte(nil), e.id[:]...)}
}

func (e keyUpdated) record() wal.Record {
	var w enc
	w.fixed(e.id[:])
	w.str(e.name)
	w.varint(e.rateLimit)
	w.varint(e.expiresAt)
	return wal.Record{Type: recKeyUpdated, Data: w.b}
}

func (e keyUsed) record() wal.Record {
	w := enc{b: make([]byte, 0, e.sizeEstimate())}
	encodeKeyUsed(&w, e)
	return wal.Record{Type: recKeyUsed, Data: w.b}
}

// sizeEstimate is about the size of e's encoding (an upper bound for
// deltas and counts of a few bytes).
func (e keyUsed) sizeEstimate() int { return 16 + 2 + len(e.pairs)*8 }

// encodeKeyUsed appends e's payload to w; decodeKeyUsed reads it.
func encodeKeyUsed(w *enc, e keyUsed) {
	w.fixed(e.id[:])
	w.uvarint(uint64(len(e.pairs)))
	var prev int64
	for _, p := range e.pairs {
		w.varint(p.sec - prev) // delta-encoded seconds: usually 1 byte
		w.uvarint(uint64(p.n))
		prev = p.sec
	}
}

// keysUsed is one shard's usage flush: the keyUsed of every key that had
// usage to log, in one record (one WAL write per shard and flush interval
// instead of one per key).
type keysUsed []keyUsed

func (e keysUsed) record() wal.Record {
	n := 0
	for _, k := range e {
		n += k.sizeEstimate()
	}
	w := enc{b: make([]byte, 0, 2+n)}
	w.uvarint(uint64(len(e)))
	for _, k := range e {
		encodeKeyUsed(&w, k)
	}
	return wal.Record{Type: recKeysUsed, Data: w.b}
}

// decodeKeysUsed decodes a recKeysUsed payload.
func decodeKeysUsed(data []byte) (keysUsed, error) {
	d := dec{b: data}
	n := d.count(17)
	out := make(keysUsed, 0, n)
	for range n {
		out = append(out, decodeKeyUsed(&d))
	}
	if err := d.done("keys used"); err != nil {
		return nil, fmt.Errorf("record type %d: %w", recKeysUsed, err)
	}
	return out, nil
}

// decodeKeyEvent decodes a key record; ok is false for other record types.
func decodeKeyEvent(r wal.Record) (ev keyEvent, ok bool, err error) {
	d := dec{b: r.Data}
	var id uuid.UUID
	switch r.Type {
	case recKeyCreated:
		var e keyCreated
		decodeKeyRecord(&d, &e.rec)
		ev = e
	case recKeyRotated:
		var e keyRotated
		d.fixed(e.id[:])
		d.fixed(e.preview[:])
		d.fixed(e.hash[:])
		d.fixed(e.sealed[:])
		e.at, e.graceEnds = d.varint(), d.varint()
		ev = e
	case recKeyRevoked:
		d.fixed(id[:])
		ev = keyRevoked{id: id, at: d.varint()}
	case recKeyDeleted:
		d.fixed(id[:])
		ev = keyDeleted{id: id}
	case recKeyUpdated:
		d.fixed(id[:])
		ev = keyUpdated{id: id, name: d.str(), rateLimit: d.varint(), expiresAt: d.varint()}
	case recKeyUsed:
		ev = decodeKeyUsed(&d)
	default:
		return nil, false, nil
	}
	if err := d.done("key event"); err != nil {
		return nil, true, fmt.Errorf("record type %d: %w", r.Type, err)
	}
	return ev, true, nil
}

func decodeKeyUsed(d *dec) keyUsed {
	var e keyUsed
	d.fixed(e.id[:])
	n := d.count(2)
	e.pairs = make([]secCount, 0, n)
	var prev int64
	for range n {
		prev += d.varint()
		c := d.uvarint()
		if c == 0 || c > 1<<32-1 {
			d.fail("usage count")
		}
		e.pairs = append(e.pairs, secCount{sec: prev, n: uint32(c)})
	}
	return e
}

// encodeKeyRecord writes a keyRecord; the snapshot uses it too.
func encodeKeyRecord(w *enc, r *keyRecord) {
	w.fixed(r.id[:])
	w.fixed(r.owner[:])
	w.str(r.name)
	w.fixed(r.preview[:])
	w.fixed(r.hash[:])
	w.fixed(r.sealed[:])
	prev, hasPrev := r.prev()
	w.boolean(hasPrev)
	if hasPrev {
		w.fixed(prev[:])
	}
	w.varint(r.rateLimit)
	w.boolean(r.revoked)
	w.varint(r.createdAt)
	w.varint(r.rotatedAt())
	w.varint(r.graceEnds())
	w.varint(r.expiresAt)
}

func decodeKeyRecord(d *dec, r *keyRecord) {
	d.fixed(r.id[:])
	d.fixed(r.owner[:])
	r.name = d.str()
	d.fixed(r.preview[:])
	d.fixed(r.hash[:])
	d.fixed(r.sealed[:])
	var rot rotation
	rot.hasPrev = d.boolean()
	if rot.hasPrev {
		d.fixed(rot.prevHash[:])
	}
	r.rateLimit = d.varint()
	r.revoked = d.boolean()
	r.createdAt = d.varint()
	rot.rotatedAt = d.varint()
	rot.graceEnds = d.varint()
	r.expiresAt = d.varint()
	if rot != (rotation{}) {
		x := rot // allocated only here
		r.rot = &x
	}
}

// dirEffects are the changes a key event makes to the secret-hash
// directory (hash → key id), which other shards own: add maps each hash to
// id; drop removes each hash that still maps to id.
type dirEffects struct {
	id   uuid.UUID
	add  []hash
	drop []hash
}

func (fx dirEffects) empty() bool { return len(fx.add) == 0 && len(fx.drop) == 0 }

// applyKey is the keys domain's one state transition, used by the live
// actors (the home shard for creation, the key actor for everything else)
// and by restore alike. st is the key's state (nil: no such key); applyKey
// changes it in place and returns the state after the event (nil once
// deleted) and the directory changes the event implies, which the caller
// delivers to the directory shards (live) or the image's maps (restore).
//
// It is pure and deterministic. Replaying an event the state already
// reflects (see keyState.skip) changes nothing; creating an existing key
// or changing an absent one is a no-op. An event whose precondition does
// not hold at this point of the log (a rotation that reached a revoked
// key; the key actor never logs one) returns ErrKeyInactive and only moves
// the watermark: it is a no-op in the log too.
func applyKey(st *keyState, seq uint64, ev keyEvent) (*keyState, dirEffects, error) {
	fx := dirEffects{id: ev.keyID()}
	switch e := ev.(type) {
	case keyCreated:
		if st != nil {
			return st, fx, nil
		}
		fx.add = []hash{e.rec.hash}
		return &keyState{rec: e.rec, applied: seq}, fx, nil
	case keyDeleted: // never skipped: a key captured just before its deletion must still go
		if st == nil {
			return nil, fx, nil
		}
		fx.drop = []hash{st.rec.hash}
		if prev, ok := st.rec.prev(); ok {
			fx.drop = append(fx.drop, prev)
		}
		return nil, fx, nil
	}
	if st == nil || st.skip(seq, ev) {
		return st, fx, nil
	}
	r := &st.rec
	switch e := ev.(type) {
	case keyRotated:
		if r.revoked {
			st.applied = max(st.applied, seq)
			return st, fx, ErrKeyInactive
		}
		if prev, ok := r.prev(); ok {
			fx.drop = []hash{prev} // the secret before the previous one
		}
		fx.add = []hash{e.hash}
		r.rot = &rotation{prevHash: r.hash, hasPrev: true, rotatedAt: e.at, graceEnds: e.graceEnds}
		r.hash, r.sealed, r.preview = e.hash, e.sealed, e.preview
	case keyRevoked:
		// A revoked key never needs its secret again: the ciphertext goes,
		// so that a copy of the data dir with the master key opens nothing
		// for it (its WAL records go at the next snapshot).
		r.revoked, r.sealed = true, sealedKey{}
	case keyUpdated:
		r.name, r.rateLimit, r.expiresAt = e.name, e.rateLimit, e.expiresAt
	case keyUsed:
		for _, p := range e.pairs {
			st.window().Add(p.sec, p.n)
			st.use.add(p.sec, int64(p.n))
		}
		st.usageSeq = max(st.usageSeq, seq)
		return st, fx, nil
	}
	st.applied = max(st.applied, seq)
	return st, fx, nil
}
