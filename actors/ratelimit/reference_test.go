package ratelimit

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// refWindow is the naive model Window is checked against: every admitted
// request as its own timestamp in a sorted slice, every figure recomputed
// from scratch and RetryAfter found by trying each following second in turn.
type refWindow struct {
	started bool
	now     int64
	ts      []int64 // admitted seconds, sorted
}

func (r *refWindow) advance(t int64) int64 {
	if !r.started || t > r.now {
		r.started, r.now = true, t
	}
	return r.now
}

// counted returns the admitted seconds in (at−WindowSeconds, at], sorted.
// The result aliases r.ts.
func (r *refWindow) counted(at int64) []int64 {
	lo, _ := slices.BinarySearch(r.ts, at-WindowSeconds+1)
	hi, _ := slices.BinarySearch(r.ts, at+1)
	return r.ts[lo:hi:hi]
}

func (r *refWindow) decide(t, limit int64, admit bool) Decision {
	now := r.advance(t)
	lim := min(max(limit, 0), MaxLimit)
	in := r.counted(now)
	if int64(len(in)) < lim {
		if admit {
			r.add(now, 1)
			in = r.counted(now)
		}
		used := int64(len(in))
		d := Decision{Allowed: true, Limit: lim, Used: used, Remaining: lim - used, Reset: now}
		if used > 0 {
			d.Reset = in[0] + WindowSeconds
		}
		return d
	}
	retry := int64(WindowSeconds)
	if lim > 0 {
		retry = firstSecondBelow(in, now, lim)
	}
	return Decision{Limit: lim, Used: int64(len(in)), Reset: now + retry, RetryAfter: retry}
}

// firstSecondBelow returns the smallest r ≥ 1 such that fewer than lim of the
// sorted seconds in lie in (now+r−WindowSeconds, now+r].
func firstSecondBelow(in []int64, now, lim int64) int64 {
	gone := 0
	for r := int64(1); ; r++ {
		for gone < len(in) && in[gone] <= now+r-WindowSeconds {
			gone++
		}
		if int64(len(in)-gone) < lim {
			return r
		}
	}
}

func (r *refWindow) used(t int64) int64 { return int64(len(r.counted(r.advance(t)))) }

func (r *refWindow) add(sec int64, n uint32) {
	if n == 0 {
		return
	}
	r.advance(sec)
	i, _ := slices.BinarySearch(r.ts, sec)
	r.ts = slices.Insert(r.ts, i, slices.Repeat([]int64{sec}, int(n))...)
}

func (r *refWindow) sub(sec int64, n uint32) {
	if sec <= r.now-WindowSeconds {
		return
	}
	i, found := slices.BinarySearch(r.ts, sec)
	if !found {
		return
	}
	j := i
	for j < len(r.ts) && r.ts[j] == sec && j-i < int(n) {
		j++
	}
	r.ts = slices.Delete(r.ts, i, j)
}

// run is one (second, count) pair as Each reports it.
type run struct {
	Sec int64
	N   uint32
}

func (r *refWindow) runs() []run {
	var out []run
	for _, s := range r.counted(r.now) {
		if len(out) > 0 && out[len(out)-1].Sec == s {
			out[len(out)-1].N++
			continue
		}
		out = append(out, run{Sec: s, N: 1})
	}
	return out
}

func runsOf(w *Window) []run {
	var out []run
	w.Each(func(sec int64, n uint32) { out = append(out, run{Sec: sec, N: n}) })
	return out
}

// Operations of the checked sequences.
const (
	opAllow = iota // burst requests at t
	opPeek
	opUsed
	opAdd   // n requests at t+arg
	opSub   // n requests at t+arg
	opClone // carry on with a clone
	opKinds
)

type op struct {
	kind  int
	dt    int64 // added to t before the operation
	limit int64
	burst int   // requests, for opAllow
	arg   int64 // second offset, for opAdd and opSub
	n     uint32
}

// checkOps applies ops to a Window and to the reference and fails on the
// first difference. If constLimit, every op uses the same limit and no op
// adds requests, so Len must stay within min(limit, WindowSeconds).
func checkOps(tb testing.TB, t0 int64, ops []op, constLimit bool) {
	tb.Helper()
	var w Window
	var ref refWindow
	t := t0
	for i, o := range ops {
		t += o.dt
		switch o.kind {
		case opAllow:
			for range o.burst {
				d := w.Allow(t, o.limit)
				compareDecision(tb, i, "Allow", t, o.limit, d, ref.decide(t, o.limit, true))
				checkRetry(tb, i, &w, d)
			}
		case opPeek:
			d := w.Peek(t, o.limit)
			compareDecision(tb, i, "Peek", t, o.limit, d, ref.decide(t, o.limit, false))
			checkRetry(tb, i, &w, d)
		case opUsed:
			if got, want := w.Used(t), ref.used(t); got != want {
				tb.Fatalf("op %d: Used(%d) = %d, want %d", i, t, got, want)
			}
		case opAdd:
			w.Add(t+o.arg, o.n)
			ref.add(t+o.arg, o.n)
		case opSub:
			w.Sub(t+o.arg, o.n)
			ref.sub(t+o.arg, o.n)
		case opClone:
			w = checkClone(tb, i, &w)
		}
		checkEntries(tb, i, &w, &ref)
		if lim := min(max(o.limit, 0), WindowSeconds); constLimit && w.Len() > int(lim) {
			tb.Fatalf("op %d: Len() = %d, want ≤ min(limit %d, %d)", i, w.Len(), o.limit, WindowSeconds)
		}
	}
}

func compareDecision(tb testing.TB, i int, fn string, t, limit int64, got, want Decision) {
	tb.Helper()
	if got != want {
		tb.Fatalf("op %d: %s(%d, %d) mismatch (-want +got):\n%s", i, fn, t, limit, cmp.Diff(want, got))
	}
	checkConsistent(tb, got)
}

// checkConsistent checks the relations between the figures of one Decision.
func checkConsistent(tb testing.TB, d Decision) {
	tb.Helper()
	if d.Remaining != max(0, d.Limit-d.Used) {
		tb.Fatalf("%+v: Remaining != max(0, Limit−Used)", d)
	}
	if d.Allowed && d.RetryAfter != 0 {
		tb.Fatalf("%+v: allowed with RetryAfter != 0", d)
	}
	if !d.Allowed && (d.Used < d.Limit || d.RetryAfter < 1 || d.RetryAfter > WindowSeconds) {
		tb.Fatalf("%+v: rejected with Used < Limit or RetryAfter outside [1, %d]", d, WindowSeconds)
	}
}

// checkEntries compares the entries and the clock-independent figures.
func checkEntries(tb testing.TB, i int, w *Window, ref *refWindow) {
	tb.Helper()
	want, got := ref.runs(), runsOf(w)
	if !slices.Equal(want, got) {
		tb.Fatalf("op %d: Each mismatch (-want +got):\n%s", i, cmp.Diff(want, got))
	}
	if w.Len() != len(want) {
		tb.Fatalf("op %d: Len() = %d, want %d", i, w.Len(), len(want))
	}
	var sum int64
	for _, r := range want {
		sum += int64(r.N)
	}
	if int64(w.total) != sum {
		tb.Fatalf("op %d: running total = %d, want %d", i, w.total, sum)
	}
}

// checkClone clones w, checks that the clone is deep and returns it.
func checkClone(tb testing.TB, i int, w *Window) Window {
	tb.Helper()
	c := w.Clone()
	before := runsOf(w)
	if got := runsOf(&c); !slices.Equal(before, got) {
		tb.Fatalf("op %d: Clone entries mismatch (-orig +clone):\n%s", i, cmp.Diff(before, got))
	}
	if w.Len() > 0 {
		w.Add(w.now, 3)
		w.Sub(before[0].Sec, 1)
	}
	if got := runsOf(&c); !slices.Equal(before, got) {
		tb.Fatalf("op %d: Clone shares memory with the original:\n%s", i, cmp.Diff(before, got))
	}
	return c
}

// checkRetry checks on a clone of w that a rejection's Reset is exact: a
// request at Reset−1 is still rejected and one at Reset is admitted.
func checkRetry(tb testing.TB, i int, w *Window, d Decision) {
	tb.Helper()
	if d.Allowed || d.Limit == 0 {
		return
	}
	c := w.Clone()
	if got := c.Peek(d.Reset-1, d.Limit); got.Allowed {
		tb.Fatalf("op %d: after %+v, Peek(Reset−1) = %+v, want rejected", i, d, got)
	}
	if got := c.Peek(d.Reset, d.Limit); !got.Allowed {
		tb.Fatalf("op %d: after %+v, Peek(Reset) = %+v, want allowed", i, d, got)
	}
}
