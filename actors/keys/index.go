package keys

import (
	"encoding/binary"
	"math/bits"

	"github.com/google/uuid"
)

// A shard indexes its keys twice: by id (keyTable) and by secret hash
// (dirTable). With a million keys at rest, Go maps cost ~55 and ~117 bytes
// a key for these; the open-addressing tables below cost ~10 and ~30. Both
// probe linearly from a slot chosen by a multiplicative hash (table sizes
// need not be powers of two, so restore sizes them exactly), delete by
// backward shift (no tombstones), and grow by doubling past maxLoad.

const (
	maxLoadNum, maxLoadDen = 4, 5 // grow past 80% full
	minTable               = 16
)

// home maps a 64-bit hash onto [0, n).
func home(h uint64, n int) int {
	hi, _ := bits.Mul64(h*0x9E3779B97F4A7C15, uint64(n))
	return int(hi)
}

// tableSize is the size that holds n entries at the load restore aims for.
func tableSize(n int) int { return max(minTable, n*maxLoadDen/maxLoadNum+n/8+1) }

// keyTable maps key id → slot. An entry is only the slot pointer: the id
// is compared in the slot (st.rec.id never changes, so reading it while a
// key actor owns the state is safe).
type keyTable struct {
	t []*slot
	n int
}

func newKeyTable(hint int) *keyTable { return &keyTable{t: make([]*slot, tableSize(hint))} }

func idHash(id uuid.UUID) uint64 {
	return binary.LittleEndian.Uint64(id[8:]) ^ binary.LittleEndian.Uint64(id[:8])
}

func (k *keyTable) len() int { return k.n }

// get returns the slot of id, or nil.
func (k *keyTable) get(id uuid.UUID) *slot {
	n := len(k.t)
	for i := home(idHash(id), n); ; {
		sl := k.t[i]
		if sl == nil || sl.st.rec.id == id {
			return sl
		}
		if i++; i == n {
			i = 0
		}
	}
}

// put adds sl under its id, replacing any slot with the same id.
func (k *keyTable) put(sl *slot) {
	if (k.n+1)*maxLoadDen > len(k.t)*maxLoadNum {
		old := k.t
		k.t, k.n = make([]*slot, max(minTable, 2*len(old))), 0
		for _, x := range old {
			if x != nil {
				k.put(x)
			}
		}
	}
	n := len(k.t)
	id := sl.st.rec.id
	for i := home(idHash(id), n); ; {
		switch x := k.t[i]; {
		case x == nil:
			k.t[i] = sl
			k.n++
			return
		case x.st.rec.id == id:
			k.t[i] = sl
			return
		}
		if i++; i == n {
			i = 0
		}
	}
}

// del removes id.
func (k *keyTable) del(id uuid.UUID) {
	n := len(k.t)
	i := home(idHash(id), n)
	for {
		x := k.t[i]
		if x == nil {
			return
		}
		if x.st.rec.id == id {
			break
		}
		if i++; i == n {
			i = 0
		}
	}
	k.n--
	// Backward shift: move up each later entry of the run that may live
	// at the hole (its home is not cyclically within (hole, its place]).
	for j := i; ; {
		if j++; j == n {
			j = 0
		}
		x := k.t[j]
		if x == nil {
			break
		}
		h := home(idHash(x.st.rec.id), n)
		if (j-h+n)%n >= (j-i+n)%n {
			k.t[i], i = x, j
		}
	}
	k.t[i] = nil
}

// each calls f for every slot, in table order.
func (k *keyTable) each(f func(*slot)) {
	for _, sl := range k.t {
		if sl != nil {
			f(sl)
		}
	}
}

// dirTable maps secret hash → key id. It keeps only the first 8 bytes of
// each hash (SHA-256 of a random secret), so an entry is 24 bytes. A
// lookup may therefore answer the id of a key whose hash only shares
// those bytes with the one presented: the key actor compares the whole
// hash (keyState.check) and refuses it, as it refuses any secret not its
// own. Two stored hashes that share their first 8 bytes (about 3 in 10^8
// at a million keys) must still both resolve: the later one is kept in
// full in over.
type dirTable struct {
	t    []dirEntry
	n    int
	over map[hash]uuid.UUID
}

type dirEntry struct {
	prefix uint64
	id     uuid.UUID // zero: empty
}

func newDirTable(hint int) *dirTable { return &dirTable{t: make([]dirEntry, tableSize(hint))} }

func hashPrefix(h *hash) uint64 { return binary.LittleEndian.Uint64(h[:8]) }

func (d *dirTable) len() int { return d.n + len(d.over) }

// get returns the id h maps to (see dirTable on prefixes).
func (d *dirTable) get(h hash) (uuid.UUID, bool) {
	if len(d.over) > 0 {
		if id, ok := d.over[h]; ok {
			return id, true
		}
	}
	if i, ok := d.find(hashPrefix(&h)); ok {
		return d.t[i].id, true
	}
	return uuid.UUID{}, false
}

func (d *dirTable) find(p uint64) (int, bool) {
	n := len(d.t)
	for i := home(p, n); ; {
		e := &d.t[i]
		if e.id == (uuid.UUID{}) {
			return i, false
		}
		if e.prefix == p {
			return i, true
		}
		if i++; i == n {
			i = 0
		}
	}
}

// put maps h to id.
func (d *dirTable) put(h hash, id uuid.UUID) {
	if _, ok := d.over[h]; ok {
		d.over[h] = id
		return
	}
	p := hashPrefix(&h)
	if i, ok := d.find(p); ok {
		if d.t[i].id != id {
			// Another key's hash with the same first 8 bytes (a key's
			// own two hashes are re-added with the same id: no change).
			if d.over == nil {
				d.over = map[hash]uuid.UUID{}
			}
			d.over[h] = id
		}
		return
	}
	if (d.n+1)*maxLoadDen > len(d.t)*maxLoadNum {
		old := d.t
		d.t, d.n = make([]dirEntry, max(minTable, 2*len(old))), 0
		for _, e := range old {
			if e.id != (uuid.UUID{}) {
				i, _ := d.find(e.prefix)
				d.t[i] = e
				d.n++
			}
		}
	}
	i, _ := d.find(p)
	d.t[i] = dirEntry{prefix: p, id: id}
	d.n++
}

// del removes h if it maps to id.
func (d *dirTable) del(h hash, id uuid.UUID) {
	if got, ok := d.over[h]; ok {
		if got == id {
			delete(d.over, h)
		}
		return
	}
	i, ok := d.find(hashPrefix(&h))
	if !ok || d.t[i].id != id {
		return
	}
	d.n--
	n := len(d.t)
	for j := i; ; {
		if j++; j == n {
			j = 0
		}
		e := d.t[j]
		if e.id == (uuid.UUID{}) {
			break
		}
		hm := home(e.prefix, n)
		if (j-hm+n)%n >= (j-i+n)%n {
			d.t[i], i = e, j
		}
	}
	d.t[i] = dirEntry{}
}
