package ratelimit

import "math"

// entry is one run of admitted requests: n requests at one Unix second.
// Only the low 32 bits of the second are stored; the full second is
// recovered from the window's clock (see Window.secOf), which is exact
// because every entry lies in (now−WindowSeconds, now].
type entry struct {
	sec uint32
	n   uint32
}

const (
	// minRing is the capacity of a window's first allocation.
	minRing = 4
	// keepRing is the largest ring kept when a window empties; larger rings
	// are released so a key that went quiet after a busy hour holds nothing.
	keepRing = 8
	// shrinkRing is the smallest ring that prune considers shrinking.
	shrinkRing = 64
)

// slot returns the ring index of the i-th entry, oldest first.
func (w *Window) slot(i int) int {
	j := int(w.head) + i
	if j >= len(w.ring) {
		j -= len(w.ring)
	}
	return j
}

// at returns a pointer to the i-th entry, oldest first.
func (w *Window) at(i int) *entry { return &w.ring[w.slot(i)] }

// secOf returns the full Unix second of e.
func (w *Window) secOf(e entry) int64 {
	return w.now - int64(w.age(e))
}

// age returns how many seconds before the window's clock e was recorded.
func (w *Window) age(e entry) uint32 { return uint32(w.now) - e.sec }

// advance moves the window's clock to t unless t is earlier, drops the
// entries that left the window and returns the clock.
func (w *Window) advance(t int64) int64 {
	t = clampTime(t)
	switch {
	case !w.started:
		w.started, w.now = true, t
	case t <= w.now:
		// Time never goes backwards inside a Window.
	case t-w.now >= WindowSeconds:
		w.now = t
		w.clear()
	default:
		w.now = t
		w.prune()
	}
	return w.now
}

// prune drops the entries recorded at or before now−WindowSeconds. It relies
// on the clock having moved less than WindowSeconds since the last prune, so
// every age fits in 32 bits.
func (w *Window) prune() {
	dropped := false
	for w.n > 0 {
		e := w.ring[w.head]
		if w.age(e) < WindowSeconds {
			break
		}
		w.total -= uint64(e.n)
		w.head = uint16(w.slot(1))
		w.n--
		dropped = true
	}
	switch {
	case w.n == 0:
		w.clear()
	case dropped && len(w.ring) >= shrinkRing && int(w.n) <= len(w.ring)/8:
		w.resize(len(w.ring) / 2)
	}
}

// clear empties the window but keeps its clock.
func (w *Window) clear() {
	w.head, w.n, w.total = 0, 0, 0
	if len(w.ring) > keepRing {
		w.ring = nil
	}
}

// push records one admitted request at the window's clock, the newest
// second. The caller guarantees the newest count is below MaxUint32.
// moved reports that the clock has just moved forward, so that no entry
// holds its second: the newest entry is then not read (for a key used
// once a second or less, it is a cache miss the append does not need).
func (w *Window) push(moved bool) {
	s := uint32(w.now)
	if !moved && w.n > 0 {
		if tail := w.at(int(w.n) - 1); tail.sec == s {
			tail.n++
			w.total++
			return
		}
	}
	if int(w.n) == len(w.ring) {
		w.grow()
	}
	*w.at(int(w.n)) = entry{sec: s, n: 1}
	w.n++
	w.total++
}

// grow doubles the ring, up to WindowSeconds entries: no more distinct
// seconds fit in the window.
func (w *Window) grow() {
	c := min(max(2*len(w.ring), minRing), WindowSeconds)
	if c <= len(w.ring) {
		panic("ratelimit: window holds more than WindowSeconds entries")
	}
	w.resize(c)
}

// resize moves the entries, oldest first, into a new ring of capacity c.
func (w *Window) resize(c int) {
	r := make([]entry, c)
	w.copyTo(r)
	w.ring, w.head = r, 0
}

// copyTo copies the entries, oldest first, into dst.
func (w *Window) copyTo(dst []entry) {
	n := int(w.n)
	k := copy(dst[:n], w.ring[w.head:min(int(w.head)+n, len(w.ring))])
	copy(dst[k:n], w.ring[:n-k])
}

// search returns the position of the first entry recorded at or after sec,
// and whether it was recorded exactly at sec. Newest-first traffic (replay)
// hits the fast path.
func (w *Window) search(sec int64) (int, bool) {
	n := int(w.n)
	if n == 0 || w.secOf(*w.at(n - 1)) < sec {
		return n, false
	}
	lo, hi := 0, n-1 // the answer is in [lo, hi]
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if w.secOf(*w.at(mid)) < sec {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, w.secOf(*w.at(lo)) == sec
}

// insertAt inserts e before the i-th entry.
func (w *Window) insertAt(i int, e entry) {
	if int(w.n) == len(w.ring) {
		w.grow()
	}
	if i == 0 {
		w.head = uint16(w.slot(len(w.ring) - 1))
	} else {
		for j := int(w.n); j > i; j-- {
			*w.at(j) = *w.at(j - 1)
		}
	}
	*w.at(i) = e
	w.n++
}

// removeAt removes the i-th entry; its count must already be zero.
func (w *Window) removeAt(i int) {
	if i == 0 {
		w.head = uint16(w.slot(1))
	} else {
		for j := i; j < int(w.n)-1; j++ {
			*w.at(j) = *w.at(j + 1)
		}
	}
	w.n--
	if w.n == 0 {
		w.clear()
	}
}

// addSat returns a+b, saturating at math.MaxUint32.
func addSat(a, b uint32) uint32 {
	if a > math.MaxUint32-b {
		return math.MaxUint32
	}
	return a + b
}
