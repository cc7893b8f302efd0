package cluster

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"gatehouse/actors/ratelimit"
)

func TestQuotaRoundTrip(t *testing.T) {
	var w ratelimit.Window
	for _, s := range []int64{1000, 1001, 1001, 1059, 1060, 4000, 4200} {
		w.Add(s, 1)
	}
	q := Summarize(&w, 7, 4201)
	want := []MinuteCount{{1019, 3}, {1079, 2}, {4019, 1}, {4259, 1}}
	if !reflect.DeepEqual(q.Minutes, want) {
		t.Fatalf("minutes %v, want %v", q.Minutes, want)
	}
	got, err := DecodeQuota(q.Encode())
	if err != nil || !reflect.DeepEqual(got, q) {
		t.Fatalf("decode = %+v, %v; want %+v", got, err, q)
	}
}

func TestDecodeQuotaRejects(t *testing.T) {
	good := Quota{Minutes: []MinuteCount{{119, 3}}, Outstanding: 2, At: 100}.Encode()
	for name, b := range map[string][]byte{
		"empty":    nil,
		"version":  append([]byte{9}, good[1:]...),
		"truncate": good[:len(good)-1],
		"trailing": append(append([]byte{}, good...), 0),
		"minutes":  append([]byte{1, 0, 0}, 0xff, 0x01),
	} {
		if _, err := DecodeQuota(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func FuzzDecodeQuota(f *testing.F) {
	f.Add(Quota{Minutes: []MinuteCount{{119, 3}, {179, 1}}, Outstanding: 2, At: 150}.Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := DecodeQuota(b)
		if err != nil {
			return
		}
		if again, err := DecodeQuota(q.Encode()); err != nil || !reflect.DeepEqual(again, q) {
			t.Fatalf("re-decode %+v, %v; want %+v", again, err, q)
		}
	})
}

// TestAllowanceNeverOverAdmits runs one key through a random history of
// requests, reservations that commit, fail or commit unknown to their
// writer, crashes of the owner (a successor takes over from the last
// committed record) and graceful hand-offs, and checks that no sliding
// hour ever holds more admissions than the limit.
func TestAllowanceNeverOverAdmits(t *testing.T) {
	for seed := range uint64(150) {
		rng := rand.New(rand.NewPCG(seed, 7))
		limit := []int64{1, 3, 10, 100, 250, 1000}[rng.IntN(6)]
		var (
			now       = int64(1_000_000 + rng.IntN(100))
			committed *Quota
			a         = TakeOver(nil, now)
			admitted  []int64 // admission seconds, ascending
			changes   int
		)
		for range 4000 {
			now += int64(rng.IntN(40))
			switch r := rng.IntN(100); {
			case r < 2: // crash: the successor takes over after the lease expired
				now += 2
				a = TakeOver(committed, now)
				changes++
			case r < 3: // graceful hand-off
				q := a.Settle(now)
				committed = &q
				a = TakeOver(committed, now)
				changes++
			default:
				if n, rec := a.Reserve(now, limit); n > 0 {
					if rec.Outstanding > Chunk(limit) {
						t.Fatalf("seed %d: %d outstanding, chunk %d", seed, rec.Outstanding, Chunk(limit))
					}
					switch rng.IntN(10) {
					case 0: // failed, not applied
						a.Failed(n)
					case 1: // applied, but the writer saw an error
						committed = &rec
						a.Failed(n)
					default:
						committed = &rec
						a.Reserved(n)
					}
				}
				for range rng.IntN(4) {
					if d, _ := a.Admit(now, limit); d.Allowed {
						admitted = append(admitted, now)
					}
				}
			}
		}
		// Every sliding hour: a two-pointer sweep over the admissions.
		lo := 0
		for hi, s := range admitted {
			for admitted[lo] <= s-ratelimit.WindowSeconds {
				lo++
			}
			if n := int64(hi - lo + 1); n > limit {
				t.Fatalf("seed %d limit %d: %d admitted in the hour ending at %d (%d ownership changes)", seed, limit, n, s, changes)
			}
		}
	}
}

// TestAllowanceAdmitsTheLimit checks that an owner that reserves as it
// goes admits exactly the limit in an hour of steady demand.
func TestAllowanceAdmitsTheLimit(t *testing.T) {
	for _, limit := range []int64{1, 5, 100, 1000, 12345} {
		var a Allowance
		now, admitted := int64(5000), int64(0)
		for range 3 * limit {
			if n, _ := a.Reserve(now, limit); n > 0 {
				a.Reserved(n)
			}
			d, starved := a.Admit(now, limit)
			if starved {
				t.Fatalf("limit %d: starved after reserving", limit)
			}
			if d.Allowed {
				admitted++
			}
		}
		if admitted != limit {
			t.Errorf("limit %d: admitted %d", limit, admitted)
		}
	}
}

// TestTakeOverCountsOutstanding pins the bound on under-admission: a
// successor loses at most the unspent chunk.
func TestTakeOverCountsOutstanding(t *testing.T) {
	const limit = 1000
	var a Allowance
	now := int64(7200)
	n, rec := a.Reserve(now, limit)
	if n != Chunk(limit) || rec.Outstanding != n {
		t.Fatalf("reserve = %d, %+v", n, rec)
	}
	a.Reserved(n)
	for range 4 {
		a.Admit(now, limit)
	}
	b := TakeOver(&rec, now+3)
	if got := b.Win.Used(now + 3); got != int64(n) {
		t.Fatalf("successor counts %d, want the chunk %d", got, n)
	}
	// A graceful hand-off passes the exact count (to the minute).
	s := a.Settle(now + 3)
	c := TakeOver(&s, now+3)
	if got := c.Win.Used(now + 3); got != 4 {
		t.Fatalf("after settle successor counts %d, want 4", got)
	}
}

func TestDesiredSpreads(t *testing.T) {
	ids := []string{"node-0", "node-1", "node-2"}
	count := map[string]int{}
	for s := range 256 {
		count[desired(ids, s)]++
	}
	for _, id := range ids {
		if c := count[id]; c < 256/3-30 || c > 256/3+30 {
			t.Errorf("%s wins %d of 256 shards", id, c)
		}
	}
	// Removing a member moves only its shards.
	for s := range 256 {
		if w := desired(ids, s); w != "node-2" && desired(ids[:2], s) != w {
			t.Errorf("shard %d moved from %s though node-2 left", s, w)
		}
	}
}
