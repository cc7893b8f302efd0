// Package ratelimit holds the rate-limit data structures that gatehouse's
// actors own: Window, an exact one-hour sliding window per API key, and
// Bucket, a token bucket per gateway user or IP.
//
// Both are plain values that take the time as an argument and never read
// the clock, so the owning actor decides what "now" is and tests set it
// exactly:
//
//	var w ratelimit.Window // zero value: empty, allocates nothing
//	d := w.Allow(clk.Now().Unix(), key.LimitPerHour)
//	if !d.Allowed {
//		return AuthorizeResult{RetryAfter: d.RetryAfter, Err: ErrRateLimited}
//	}
//	w.Add(delta.Sec, delta.N) // on restart: replay the flushed window deltas
//
//	var b ratelimit.Bucket // zero value: full
//	ok := b.Allow(clk.Now(), 10, 20) // 10 requests/s, bursts of 20
//
// # Ownership
//
// A Window or Bucket belongs to exactly one actor and is not safe for
// concurrent use. To hand a window to another goroutine (a snapshot writer,
// say), give it a Clone.
//
// # Window semantics
//
// A request at Unix second t is admitted if and only if fewer than limit
// requests were admitted in (t−WindowSeconds, t]. Rejected requests are not
// counted. A request at t0+WindowSeconds therefore no longer sees one
// admitted at t0. The Decision figures are consistent:
//
//   - Allowed: RetryAfter = 0, Used ≤ Limit, Remaining = Limit−Used and
//     Reset = oldest counted second + WindowSeconds (for Peek on an empty
//     window, Reset = t).
//   - Rejected with Limit ≥ 1: Used ≥ Limit, Remaining = 0, RetryAfter ≥ 1
//     and Reset = t+RetryAfter, where Reset is the first second at which
//     fewer than Limit of the counted requests remain in the window. If
//     nothing else is admitted and the limit stays the same, a request at
//     Reset−1 is still rejected and one at Reset is admitted. RetryAfter is
//     computed exactly, even after the limit was lowered far below the
//     usage, by walking the entries (on the reject path only).
//   - Limits are clamped to [0, MaxLimit] and Decision.Limit reports the
//     clamped value. Limit 0 (or less) rejects everything; as there is no
//     second at which a request would be admitted, such rejections report
//     RetryAfter = WindowSeconds and Reset = t+WindowSeconds, so clients back
//     off for a whole window.
//
// Time never goes backwards inside a Window: its clock is the latest second
// it has been given by Allow, Peek, Used or Add, and a call with an earlier
// t is evaluated at that clock (a request admitted then is recorded at the
// clock, and Decision figures are relative to it). This keeps the structure
// consistent after a wall-clock step back and keeps the rule above exact:
// entries are pruned only once they can never be counted again. Sub and
// Each do not move the clock. Seconds are clamped to [−2^62, 2^62].
//
// Add and Sub exist for recovery. Add records requests without checking the
// limit (WAL replay, snapshot restore), in any order of seconds; Sub removes
// them again (a durable copy is the live window minus the deltas not yet
// flushed). Each lists the entries oldest first for snapshot encoding. A
// window rebuilt with Add from Each has the same entries and a clock at the
// newest entry, which may be earlier than the original's clock.
//
// # Memory
//
// A Window stores (second, count) runs of admitted requests, 8 bytes each
// (the low 32 bits of the second and a uint32 count), in a ring that grows
// by doubling and never beyond WindowSeconds entries, plus a 48-byte header.
// Memory grows with the number of distinct seconds that saw an admitted
// request, never with the number of requests: a key under a constant limit
// holds at most min(limit, WindowSeconds) entries, so at most 28.8 KB.
// Allow is O(1) amortised and does not allocate once the ring fits the
// traffic; only a rejection walks the entries, from whichever end has less
// to add up. A ring larger than 8 entries is released when the window
// empties and halved when it is at most one-eighth full, so keys that go
// quiet give their memory back.
//
// A Bucket is 16 bytes: the tokens missing from a full bucket and the
// latest instant seen.
package ratelimit
