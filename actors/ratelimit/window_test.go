package ratelimit

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// call is one Allow (or, with peek, Peek) and the Decision it must return.
type call struct {
	t, limit int64
	peek     bool
	want     Decision
}

func allowed(limit, used, reset int64) Decision {
	return Decision{Allowed: true, Limit: limit, Used: used, Remaining: limit - used, Reset: reset}
}

func rejected(limit, used, at, retry int64) Decision {
	return Decision{Limit: limit, Used: used, Reset: at + retry, RetryAfter: retry}
}

// t0 is an ordinary Unix second and end the second at which a request
// admitted at t0 leaves the window.
const (
	t0  = 1_764_000_000
	end = t0 + WindowSeconds
)

// decisionTests are sequences of calls on one Window.
var decisionTests = []struct {
	name  string
	calls []call
}{
	{"empty window peek", []call{
		{t: t0, limit: 5, peek: true, want: allowed(5, 0, t0)},
	}},
	{"first request", []call{
		{t: t0, limit: 3, want: allowed(3, 1, end)},
	}},
	{"exactly limit then rejected", []call{
		{t: t0, limit: 3, want: allowed(3, 1, end)},
		{t: t0, limit: 3, want: allowed(3, 2, end)},
		{t: t0, limit: 3, want: allowed(3, 3, end)},
		{t: t0, limit: 3, want: rejected(3, 3, t0, WindowSeconds)},
		{t: t0, limit: 3, peek: true, want: rejected(3, 3, t0, WindowSeconds)},
	}},
	{"boundary: the request at t0 is gone at t0+3600", []call{
		{t: t0, limit: 1, want: allowed(1, 1, end)},
		{t: end - 1, limit: 1, want: rejected(1, 1, end-1, 1)},
		{t: end, limit: 1, peek: true, want: allowed(1, 0, end)},
		{t: end, limit: 1, want: allowed(1, 1, end+WindowSeconds)},
	}},
	{"spread requests: wait for the oldest", []call{
		{t: t0, limit: 3, want: allowed(3, 1, end)},
		{t: t0 + 10, limit: 3, want: allowed(3, 2, end)},
		{t: t0 + 20, limit: 3, want: allowed(3, 3, end)},
		{t: t0 + 30, limit: 3, want: rejected(3, 3, t0+30, WindowSeconds-30)},
		{t: end, limit: 3, want: allowed(3, 3, end+10)},
	}},
	{"limit lowered below usage: several seconds must leave", []call{
		{t: t0, limit: 10, want: allowed(10, 1, end)},
		{t: t0 + 1, limit: 10, want: allowed(10, 2, end)},
		{t: t0 + 2, limit: 10, want: allowed(10, 3, end)},
		{t: t0 + 3, limit: 10, want: allowed(10, 4, end)},
		{t: t0 + 4, limit: 2, want: rejected(2, 4, t0+4, WindowSeconds-2)},
		{t: end + 1, limit: 2, want: rejected(2, 2, end+1, 1)},
		{t: end + 2, limit: 2, want: allowed(2, 2, end+3)},
	}},
	{"limit raised admits again", []call{
		{t: t0, limit: 1, want: allowed(1, 1, end)},
		{t: t0, limit: 1, want: rejected(1, 1, t0, WindowSeconds)},
		{t: t0 + 5, limit: 2, want: allowed(2, 2, end)},
	}},
	{"limit zero or negative rejects everything", []call{
		{t: t0, limit: 0, want: rejected(0, 0, t0, WindowSeconds)},
		{t: t0, limit: -5, want: rejected(0, 0, t0, WindowSeconds)},
		{t: t0, limit: 2, want: allowed(2, 1, end)},
		{t: t0 + 9, limit: 0, want: rejected(0, 1, t0+9, WindowSeconds)},
	}},
	{"limit above MaxLimit is clamped", []call{
		{t: t0, limit: math.MaxInt64, want: allowed(MaxLimit, 1, end)},
	}},
	{"time going backwards is evaluated at the clock", []call{
		{t: t0, limit: 2, want: allowed(2, 1, end)},
		{t: t0 - 500, limit: 2, want: allowed(2, 2, end)},
		{t: t0 - 1000, limit: 2, want: rejected(2, 2, t0, WindowSeconds)},
		{t: t0 + 1, limit: 2, want: rejected(2, 2, t0+1, WindowSeconds-1)},
	}},
	{"backwards after a gap sees no pruned request again", []call{
		{t: t0, limit: 1, want: allowed(1, 1, end)},
		{t: t0 + 3*WindowSeconds, limit: 1, peek: true, want: allowed(1, 0, t0+3*WindowSeconds)},
		{t: t0 + 1, limit: 1, want: allowed(1, 1, t0+4*WindowSeconds)},
		{t: t0 + 2, limit: 1, want: rejected(1, 1, t0+3*WindowSeconds, WindowSeconds)},
	}},
	{"gap of exactly one window clears", []call{
		{t: t0, limit: 1, want: allowed(1, 1, end)},
		{t: t0 + 1, limit: 2, want: allowed(2, 2, end)},
		{t: end + 1, limit: 1, want: allowed(1, 1, end+WindowSeconds+1)},
	}},
	{"stored seconds wrap at 2^32", []call{
		{t: 1<<32 - 1, limit: 2, want: allowed(2, 1, 1<<32-1+WindowSeconds)},
		{t: 1 << 32, limit: 2, want: allowed(2, 2, 1<<32-1+WindowSeconds)},
		{t: 1<<32 + 5, limit: 2, want: rejected(2, 2, 1<<32+5, WindowSeconds-6)},
		{t: 1<<32 - 1 + WindowSeconds, limit: 2, want: allowed(2, 2, 1<<32+WindowSeconds)},
	}},
}

func TestWindowDecisions(t *testing.T) {
	for _, tt := range decisionTests {
		t.Run(tt.name, func(t *testing.T) {
			var w Window
			for i, c := range tt.calls {
				fn, got := "Allow", Decision{}
				if c.peek {
					fn, got = "Peek", w.Peek(c.t, c.limit)
				} else {
					got = w.Allow(c.t, c.limit)
				}
				if diff := cmp.Diff(c.want, got); diff != "" {
					t.Fatalf("call %d: %s(%d, %d) mismatch (-want +got):\n%s", i, fn, c.t, c.limit, diff)
				}
				checkConsistent(t, got)
			}
		})
	}
}

func TestWindowZeroValue(t *testing.T) {
	var w Window
	if got := w.Len(); got != 0 {
		t.Errorf("Len() = %d, want 0", got)
	}
	if got := w.Used(100); got != 0 {
		t.Errorf("Used(100) = %d, want 0", got)
	}
	w.Each(func(sec int64, n uint32) { t.Errorf("Each on an empty window called fn(%d, %d)", sec, n) })
	w.Sub(100, 1)
	w.Add(100, 0)
	w.Peek(100, 0)
	w.Peek(100, 10)
	if w.ring != nil {
		t.Errorf("window allocated %d entries before admitting anything", len(w.ring))
	}
}

// addSubTests build a Window with Add and Sub; used is Used(t0+10).
var addSubTests = []struct {
	name string
	do   func(w *Window)
	want []run
	used int64
}{
	{"out of order adds merge and sort", func(w *Window) {
		w.Add(t0+5, 2)
		w.Add(t0+1, 1)
		w.Add(t0+3, 4)
		w.Add(t0+1, 2)
	}, []run{{t0 + 1, 3}, {t0 + 3, 4}, {t0 + 5, 2}}, 9},
	{"sub removes emptied entries", func(w *Window) {
		w.Add(t0+1, 3)
		w.Add(t0+3, 4)
		w.Add(t0+5, 2)
		w.Sub(t0+3, 4)
		w.Sub(t0+1, 10) // more than held: removes what is there
		w.Sub(t0+2, 1)  // absent: no-op
		w.Sub(t0+9, 1)  // after the clock: no-op
		w.Sub(t0+5, 1)
	}, []run{{t0 + 5, 1}}, 1},
	{"adds older than the window are ignored", func(w *Window) {
		w.Add(t0+WindowSeconds, 1)
		w.Add(t0, 5)
		w.Add(t0+1, 2)
	}, []run{{t0 + 1, 2}, {t0 + WindowSeconds, 1}}, 3},
	{"a second's count saturates", func(w *Window) {
		w.Add(t0, math.MaxUint32)
		w.Add(t0, 7)
		w.Add(t0+1, 1)
	}, []run{{t0, math.MaxUint32}, {t0 + 1, 1}}, math.MaxUint32 + 1},
	{"insert and remove in a wrapped ring", func(w *Window) {
		for i := range int64(4) {
			w.Allow(t0-WindowSeconds+10*i, 10)
		}
		w.Allow(t0+1, 10)             // prunes the first and wraps to slot 0
		w.Sub(t0-WindowSeconds+20, 1) // removes from the middle
		w.Add(t0, 2)                  // inserts before the wrapped newest
		w.Add(t0-WindowSeconds+5, 1)  // grows, then inserts before the head
	}, []run{
		{t0 - WindowSeconds + 5, 1}, {t0 - WindowSeconds + 10, 1},
		{t0 - WindowSeconds + 30, 1}, {t0, 2}, {t0 + 1, 1},
	}, 4},
}

func TestWindowAddSubEach(t *testing.T) {
	for _, tt := range addSubTests {
		t.Run(tt.name, func(t *testing.T) {
			var w Window
			tt.do(&w)
			if diff := cmp.Diff(tt.want, runsOf(&w)); diff != "" {
				t.Errorf("Each mismatch (-want +got):\n%s", diff)
			}
			if w.Len() != len(tt.want) {
				t.Errorf("Len() = %d, want %d", w.Len(), len(tt.want))
			}
			if got := w.Used(t0 + 10); got != tt.used {
				t.Errorf("Used(%d) = %d, want %d", t0+10, got, tt.used)
			}
		})
	}
}

func TestWindowAddThenAllow(t *testing.T) {
	var w Window
	w.Add(1000, 5)
	if d := w.Allow(1000, 5); d.Allowed {
		t.Errorf("Allow(1000, 5) after Add(1000, 5) = %+v, want rejected", d)
	}
	if d := w.Allow(999, 6); !d.Allowed || d.Used != 6 {
		t.Errorf("Allow(999, 6) = %+v, want allowed with Used 6", d)
	}
}

func TestWindowClone(t *testing.T) {
	var w Window
	for i := range int64(20) {
		w.Allow(5000+i, 100)
	}
	c := w.Clone()
	w.Allow(5019, 100)
	w.Sub(5000, 1)
	if got, want := c.Used(5019), int64(20); got != want {
		t.Errorf("clone Used(5019) = %d, want %d", got, want)
	}
	if len(c.ring) != 20 {
		t.Errorf("clone ring holds %d entries, want exactly 20", len(c.ring))
	}
	// The clone keeps the clock: an earlier request is evaluated at 5019.
	if d := c.Allow(10, 100); d.Reset != 5000+WindowSeconds || d.Used != 21 {
		t.Errorf("clone Allow(10, 100) = %+v, want Used 21, Reset %d", d, 5000+WindowSeconds)
	}
	var zero Window
	if z := zero.Clone(); z.ring != nil || z.started {
		t.Errorf("Clone of the zero Window = %+v, want the zero Window", z)
	}
}

func TestWindowMemory(t *testing.T) {
	var w Window
	for i := range int64(2 * WindowSeconds) { // one request a second, limit 100
		w.Allow(t0+i, 100)
		if w.Len() > 100 {
			t.Fatalf("Len() = %d after %d s under limit 100, want ≤ 100", w.Len(), i)
		}
	}
	w = Window{}
	for i := range int64(2 * WindowSeconds) { // spread, high limit
		w.Allow(t0+i, 1_000_000)
		w.Allow(t0+i, 1_000_000)
	}
	if w.Len() != WindowSeconds || len(w.ring) != WindowSeconds {
		t.Errorf("spread traffic: Len() = %d with a ring of %d, want %d and %d", w.Len(), len(w.ring), WindowSeconds, WindowSeconds)
	}
	hot := int64(t0 + 2*WindowSeconds)
	for i := range int64(WindowSeconds) { // one request a minute: the ring shrinks
		if i%60 == 0 {
			w.Allow(hot+i, 1_000_000)
		} else {
			w.Used(hot + i)
		}
	}
	if len(w.ring) > 8*w.Len() {
		t.Errorf("after traffic dropped: ring of %d for %d entries, want it shrunk", len(w.ring), w.Len())
	}
	w.Used(hot + 10*WindowSeconds)
	if w.ring != nil || w.Len() != 0 {
		t.Errorf("after an idle window: ring %d, Len() %d, want released", len(w.ring), w.Len())
	}
}

// TestAllowMergesTheClocksSecond checks the runs Allow keeps: requests in
// the clock's second join its entry, whether Allow or Add made it, and a
// request after the clock moved starts a new one (push reads the newest
// entry only when the clock did not move).
func TestAllowMergesTheClocksSecond(t *testing.T) {
	var w Window
	steps := []struct {
		add     bool
		t       int64
		wantLen int
	}{
		{t: t0, wantLen: 1},
		{t: t0, wantLen: 1},
		{t: t0 + 1, wantLen: 2},
		{t: t0 + 1, wantLen: 2},
		{t: t0, wantLen: 2}, // earlier than the clock: counted at the clock
		{add: true, t: t0 + 5, wantLen: 3},
		{t: t0 + 5, wantLen: 3},
		{t: t0 + 6, wantLen: 4},
	}
	for i, s := range steps {
		if s.add {
			w.Add(s.t, 1)
		} else if d := w.Allow(s.t, 100); !d.Allowed {
			t.Fatalf("step %d: Allow(%d) refused", i, s.t)
		}
		if w.Len() != s.wantLen {
			t.Fatalf("step %d: Len() = %d, want %d", i, w.Len(), s.wantLen)
		}
	}
	var got []int64
	w.Each(func(sec int64, n uint32) { got = append(got, sec, int64(n)) })
	want := []int64{t0, 2, t0 + 1, 3, t0 + 5, 2, t0 + 6, 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}
