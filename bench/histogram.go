package bench

import (
	"math/bits"
	"time"
)

// Histogram counts durations (nanoseconds) in log-linear buckets: exact
// below 64 ns, then 64 buckets per power of two, so a reported quantile
// is within 1/64 (1.6 %) of the true value. The zero value is ready. It
// is not safe for concurrent use: keep one per goroutine and Merge.
type Histogram struct {
	counts [subCount * (64 - subBits)]uint64
	n      uint64
	max    int64
}

const (
	subBits  = 6
	subCount = 1 << subBits
)

func bucketOf(v int64) int {
	if v < subCount {
		return int(max(v, 0))
	}
	shift := bits.Len64(uint64(v)) - subBits - 1
	return subCount + shift*subCount + int(v>>shift) - subCount
}

// bucketMid is the middle of bucket i's range of values.
func bucketMid(i int) int64 {
	if i < subCount {
		return int64(i)
	}
	shift := (i - subCount) / subCount
	lo := int64(subCount+(i-subCount)%subCount) << shift
	return lo + (int64(1)<<shift)/2
}

// Record adds one duration.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	h.counts[bucketOf(v)]++
	h.n++
	h.max = max(h.max, v)
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// Count returns the number of recorded durations.
func (h *Histogram) Count() uint64 { return h.n }

// Max returns the largest recorded duration, exactly.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Quantile returns the duration below which a fraction q (0..1) of the
// recorded durations lie; 0 if none was recorded.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	target := uint64(q*float64(h.n) + 0.5)
	target = min(max(target, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		if seen += c; seen >= target {
			return time.Duration(min(bucketMid(i), h.max))
		}
	}
	return time.Duration(h.max)
}
