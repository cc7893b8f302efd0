package ratelimit

import "math"

const (
	// WindowSeconds is the length of a Window, in seconds.
	WindowSeconds = 3600
	// MaxLimit is the largest limit a Window enforces; larger limits are
	// treated as MaxLimit.
	MaxLimit = math.MaxUint32

	// minTime and maxTime bound the seconds a Window accepts; times outside
	// are clamped so that no sum or difference can overflow.
	minTime = -1 << 62
	maxTime = 1 << 62
)

// Decision is the outcome of a request against a Window. All its figures
// are taken at the window's clock, which is t unless t is earlier than a
// time the window has already seen (see the package documentation).
type Decision struct {
	// Allowed reports whether the request was (for Peek: would be) admitted.
	Allowed bool
	// Limit is the limit applied: the one given, clamped to [0, MaxLimit].
	Limit int64
	// Used counts the admitted requests in the window after the decision.
	Used int64
	// Remaining is max(0, Limit−Used).
	Remaining int64
	// Reset is the Unix second at which the oldest counted request leaves
	// the window, or the clock if the window is empty. On rejection it is
	// the clock plus RetryAfter.
	Reset int64
	// RetryAfter is 0 when Allowed. Otherwise it is the number of seconds
	// until the first second at which a request would be admitted, if
	// nothing else is admitted meanwhile and the limit stays the same; it
	// is always at least 1, and WindowSeconds if Limit is 0.
	RetryAfter int64
}

// Window is an exact sliding window of WindowSeconds seconds at 1-second
// resolution. The zero value is an empty window and allocates nothing until
// the first request is admitted. A Window is not safe for concurrent use.
type Window struct {
	ring    []entry // ring buffer of runs, oldest at head
	now     int64   // the window's clock: the latest time it was given
	total   uint64  // sum of the counts in ring
	head    uint16  // ring index of the oldest entry
	n       uint16  // entries held, at most WindowSeconds
	started bool    // now is meaningful
}

// Allow decides a request at Unix second t under limit and records it if
// admitted. It does not allocate once the window has grown to fit the
// traffic.
func (w *Window) Allow(t int64, limit int64) Decision {
	was := w.now
	moved := w.advance(t) != was // every entry is then older than the clock
	lim := clampLimit(limit)
	if w.total >= uint64(lim) {
		return w.rejected(lim)
	}
	w.push(moved)
	return w.admitted(lim)
}

// Peek returns the Decision Allow would return, except that nothing is
// recorded: Allowed reports whether a request would be admitted and Used
// and Remaining describe the window as it is. Peek moves the window's clock
// forward like Allow does.
func (w *Window) Peek(t int64, limit int64) Decision {
	w.advance(t)
	lim := clampLimit(limit)
	if w.total >= uint64(lim) {
		return w.rejected(lim)
	}
	return w.admitted(lim)
}

// Used returns the number of admitted requests in the window at t. It moves
// the window's clock forward like Allow does.
func (w *Window) Used(t int64) int64 {
	w.advance(t)
	return int64(w.total)
}

// Len returns the number of entries (distinct seconds) held.
func (w *Window) Len() int { return int(w.n) }

// Each calls fn for every entry, oldest first, with its Unix second and
// count. fn must not modify the window.
func (w *Window) Each(fn func(sec int64, n uint32)) {
	for i := range int(w.n) {
		e := *w.at(i)
		fn(w.secOf(e), e.n)
	}
}

// Add records n admitted requests at sec without checking any limit, for
// replay and restore. sec may be older than the newest entry; equal seconds
// merge, and a second's count saturates at math.MaxUint32. A sec later than
// the window's clock moves the clock to sec; a sec at or before
// clock−WindowSeconds has already left the window and is ignored.
func (w *Window) Add(sec int64, n uint32) {
	if n == 0 {
		return
	}
	sec = clampTime(sec)
	if !w.started || sec > w.now {
		w.advance(sec)
	}
	if w.now-sec >= WindowSeconds {
		return
	}
	i, found := w.search(sec)
	if found {
		e := w.at(i)
		old := e.n
		e.n = addSat(old, n)
		w.total += uint64(e.n - old)
		return
	}
	w.insertAt(i, entry{sec: uint32(sec), n: n})
	w.total += uint64(n)
}

// Sub removes n requests previously added at sec, as far as the window
// still holds them; an entry whose count reaches zero is removed. Sub does
// not move the window's clock.
func (w *Window) Sub(sec int64, n uint32) {
	if n == 0 || w.n == 0 {
		return
	}
	sec = clampTime(sec)
	if sec > w.now || w.now-sec >= WindowSeconds {
		return
	}
	i, found := w.search(sec)
	if !found {
		return
	}
	e := w.at(i)
	d := min(n, e.n)
	e.n -= d
	w.total -= uint64(d)
	if e.n == 0 {
		w.removeAt(i)
	}
}

// Clone returns a deep copy of w, clock included, whose ring is exactly as
// large as its entries.
func (w *Window) Clone() Window {
	c := *w
	c.ring, c.head = nil, 0
	if w.n > 0 {
		c.ring = make([]entry, w.n)
		w.copyTo(c.ring)
	}
	return c
}

// admitted builds the Decision for an admissible request at the clock.
func (w *Window) admitted(lim int64) Decision {
	used := int64(w.total)
	reset := w.now
	if w.n > 0 {
		reset = w.secOf(w.ring[w.head]) + WindowSeconds
	}
	return Decision{Allowed: true, Limit: lim, Used: used, Remaining: lim - used, Reset: reset}
}

// rejected builds the Decision for a request at the clock that the window,
// holding at least lim requests, rejects.
func (w *Window) rejected(lim int64) Decision {
	retry := int64(WindowSeconds)
	if lim > 0 {
		retry = w.retryAfter(lim)
	}
	return Decision{Limit: lim, Used: int64(w.total), Reset: w.now + retry, RetryAfter: retry}
}

// retryAfter returns the seconds until fewer than lim (≥ 1) of the counted
// requests remain in the window. The k-th entry leaves at its second plus
// WindowSeconds, so the answer is set by the first entry k after whose
// departure at most lim−1 requests remain. Either the mass that must leave
// (total−lim+1) or the mass that may stay (lim−1) is small in the common
// cases, so the walk starts from the end that has less to add up: the
// oldest end when the limit was just reached, the newest when the limit was
// lowered far below the usage.
func (w *Window) retryAfter(lim int64) int64 {
	leave := w.total - uint64(lim) + 1
	stay := uint64(lim) - 1
	n := int(w.n)
	k := 0
	if leave <= stay {
		var sum uint64
		for ; k < n-1; k++ {
			if sum += uint64(w.at(k).n); sum >= leave {
				break
			}
		}
	} else {
		var sum uint64
		for k = n - 1; k > 0; k-- {
			if sum += uint64(w.at(k).n); sum > stay {
				break
			}
		}
	}
	return w.secOf(*w.at(k)) + WindowSeconds - w.now
}

// clampLimit clamps limit to [0, MaxLimit].
func clampLimit(limit int64) int64 { return min(max(limit, 0), MaxLimit) }

// clampTime clamps t to [minTime, maxTime].
func clampTime(t int64) int64 { return min(max(t, minTime), maxTime) }
