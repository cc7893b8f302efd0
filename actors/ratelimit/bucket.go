package ratelimit

import "time"

// Bucket is a token bucket: it holds up to burst tokens, refills at
// ratePerSec tokens per second and a request takes one token. The zero value
// is a full bucket. A Bucket is 16 bytes and is not safe for concurrent use.
//
// The bucket stores how many tokens are missing from a full bucket rather
// than how many are left, so the zero value needs no first-use sentinel.
// Consequently, when burst changes between calls the missing count is kept
// (clamped to the new burst): raising burst by k makes k more tokens
// available at once, lowering it takes tokens away.
//
// Time that goes backwards adds no tokens: the bucket refills only for time
// beyond the latest instant it has seen.
type Bucket struct {
	deficit float64 // tokens missing from a full bucket, in [0, burst]
	last    int64   // Unix nanoseconds of the latest instant seen
}

// Allow refills the bucket for the time elapsed since the latest instant it
// has seen and takes one token if at least one is available. A rate that is
// not positive refills nothing; a burst that is not positive (or NaN) admits
// nothing.
func (b *Bucket) Allow(now time.Time, ratePerSec float64, burst float64) bool {
	burst = sanitizeBurst(burst)
	ns := now.UnixNano()
	d := b.refilled(ns, ratePerSec, burst)
	if ns > b.last {
		b.last = ns
	}
	if burst-d >= 1 {
		b.deficit = d + 1
		return true
	}
	b.deficit = d
	return false
}

// Tokens returns the tokens available at now, in [0, burst], without
// changing the bucket.
func (b *Bucket) Tokens(now time.Time, ratePerSec, burst float64) float64 {
	burst = sanitizeBurst(burst)
	return burst - b.refilled(now.UnixNano(), ratePerSec, burst)
}

// refilled returns the deficit after refilling up to ns.
func (b *Bucket) refilled(ns int64, rate, burst float64) float64 {
	d := b.deficit
	if ns > b.last && rate > 0 {
		// The unsigned difference is exact even where the signed one
		// would overflow.
		elapsed := float64(uint64(ns)-uint64(b.last)) / float64(time.Second)
		d -= elapsed * rate
	}
	return min(max(d, 0), burst)
}

// sanitizeBurst maps NaN and negative bursts to 0.
func sanitizeBurst(burst float64) float64 {
	if burst > 0 {
		return burst
	}
	return 0
}
