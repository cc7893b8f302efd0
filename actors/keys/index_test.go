package keys

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/google/uuid"
)

// TestTablesMatchMaps drives keyTable and dirTable with random puts and
// deletes, from empty and presized, against Go maps.
func TestTablesMatchMaps(t *testing.T) {
	tests := []struct {
		name string
		hint int
		ops  int
		ids  int // distinct ids drawn from (small: many repeats)
	}{
		{"empty, few ids", 0, 20_000, 50},
		{"empty, many ids", 0, 50_000, 20_000},
		{"presized", 5_000, 50_000, 6_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tt.ids)))
			ids := make([]uuid.UUID, tt.ids)
			hashes := make([]hash, tt.ids)
			for i := range ids {
				ids[i] = uuid.New()
				hashes[i] = hashOf([]byte(ids[i].String()))
			}
			kt, dt := newKeyTable(tt.hint), newDirTable(tt.hint)
			km, dm := map[uuid.UUID]*slot{}, map[hash]uuid.UUID{}
			for range tt.ops {
				i := rng.IntN(len(ids))
				id, h := ids[i], hashes[i]
				if rng.IntN(3) == 0 {
					kt.del(id)
					delete(km, id)
					dt.del(h, id)
					if dm[h] == id {
						delete(dm, h)
					}
				} else {
					sl := &slot{}
					sl.st.rec.id = id
					kt.put(sl)
					km[id] = sl
					dt.put(h, id)
					dm[h] = id
				}
			}
			if kt.len() != len(km) || dt.len() != len(dm) {
				t.Fatalf("len: keys %d want %d, dir %d want %d", kt.len(), len(km), dt.len(), len(dm))
			}
			for i, id := range ids {
				if got := kt.get(id); got != km[id] {
					t.Fatalf("keys.get(%s) = %p, want %p", id, got, km[id])
				}
				got, ok := dt.get(hashes[i])
				want, wok := dm[hashes[i]]
				if ok != wok || got != want {
					t.Fatalf("dir.get(%x) = %s %v, want %s %v", hashes[i][:4], got, ok, want, wok)
				}
			}
			n := 0
			kt.each(func(*slot) { n++ })
			if n != len(km) {
				t.Fatalf("each visited %d, want %d", n, len(km))
			}
		})
	}
}

// TestDirSharedPrefix: two stored hashes with the same first 8 bytes both
// resolve, and each can be dropped without losing the other.
func TestDirSharedPrefix(t *testing.T) {
	a, b := uuid.New(), uuid.New()
	var ha, hb hash
	ha[0], hb[0], hb[31] = 7, 7, 1
	for _, dropFirst := range []bool{true, false} {
		d := newDirTable(0)
		d.put(ha, a)
		d.put(hb, b)
		if got, _ := d.get(ha); got != a {
			t.Fatalf("get(a) = %s, want %s", got, a)
		}
		if got, _ := d.get(hb); got != b {
			t.Fatalf("get(b) = %s, want %s", got, b)
		}
		gone, keep, keepID := ha, hb, b
		if !dropFirst {
			gone, keep, keepID = hb, ha, a
		}
		d.del(gone, map[hash]uuid.UUID{ha: a, hb: b}[gone])
		if got, ok := d.get(keep); !ok || got != keepID {
			t.Fatalf("after drop: get = %s %v, want %s", got, ok, keepID)
		}
		if d.len() != 1 {
			t.Fatalf("len = %d, want 1", d.len())
		}
	}
}

// TestSlotSize guards the resident size of a passive key (bench/RESULTS.md,
// "many keys at rest").
func TestSlotSize(t *testing.T) {
	if got := unsafe.Sizeof(slot{}); got > 264 {
		t.Errorf("unsafe.Sizeof(slot{}) = %d, want ≤ 264", got)
	}
	if got := unsafe.Sizeof(dirEntry{}); got != 24 {
		t.Errorf("unsafe.Sizeof(dirEntry{}) = %d, want 24", got)
	}
}

// TestArenaPiecesDoNotOverlap: growing one key's usage days or reading a
// name never touches its neighbours' pieces of the same chunk.
func TestArenaPiecesDoNotOverlap(t *testing.T) {
	var a arena
	u1, u2 := usage{days: a.days(2)}, usage{days: a.days(2)}
	for i, u := range []*usage{&u1, &u2} {
		for d := range 2 {
			u.days[d] = mkDayCount(int32(100+d), int64(10*(i+1)))
		}
	}
	n1, n2 := a.str([]byte("first")), a.str([]byte("second"))
	u1.add(102*86400, 5) // a new day: must not land in u2's piece
	if got := u2.count(100) + u2.count(101); got != 40 || len(u2.days) != 2 {
		t.Fatalf("neighbour's days = %v, want two days of 20", u2.days)
	}
	if got := u1.count(102); got != 5 {
		t.Fatalf("count(102) = %d, want 5", got)
	}
	if n1 != "first" || n2 != "second" {
		t.Fatalf("names = %q %q", n1, n2)
	}
}

func TestDayCountPacking(t *testing.T) {
	tests := []struct {
		day int32
		n   int64
	}{{0, 0}, {20_000, 1}, {-1, 7}, {minDay, dayCountMask}, {maxDay, 123_456_789_012}}
	for _, tt := range tests {
		c := mkDayCount(tt.day, tt.n)
		if c.day() != tt.day || c.n() != tt.n {
			t.Errorf("mkDayCount(%d, %d) = day %d n %d", tt.day, tt.n, c.day(), c.n())
		}
	}
}
