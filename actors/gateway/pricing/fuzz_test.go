package pricing

import (
	"math"
	"testing"
)

// FuzzCostProperties: Cost is never negative and monotone in every count
// (a cache part grows with the prompt it is part of), and WorstCase is at
// least the Cost of any usage within its bounds.
func FuzzCostProperties(f *testing.F) {
	f.Add(3.0, 15.0, 0.3, 3.75, int64(1000), int64(200), int64(300), int64(100), int64(50), 3)
	f.Add(0.075, 0.3, 1.5, 0.0, int64(1), int64(0), int64(1), int64(0), int64(1), 0)
	f.Add(1e6, 1e6, 1e6, 1e6, int64(math.MaxInt64), int64(math.MaxInt64), int64(1), int64(1), int64(math.MaxInt64), 1<<30)
	f.Fuzz(func(t *testing.T, in, out, cr, cw float64, prompt, read, write, completion, bytes int64, messages int) {
		p := Price{Input: in, Output: out, CacheRead: cr, CacheWrite: cw}
		if p.Validate() != nil {
			return
		}
		prompt, read, write, completion, bytes = abs(prompt), abs(read), abs(write), abs(completion), abs(bytes)
		messages = max(messages, 0) % (1 << 20)
		read, write = min(read, prompt), min(write, prompt-min(read, prompt))
		u := Usage{Prompt: prompt, Completion: completion, CacheRead: read, CacheWrite: write}
		c := p.Cost(u)
		if c < 0 {
			t.Fatalf("Cost(%+v) at %+v = %d < 0", u, p, c)
		}
		for _, more := range []Usage{
			{Prompt: u.Prompt + 1, Completion: u.Completion, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite},
			{Prompt: u.Prompt, Completion: u.Completion + 1, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite},
			{Prompt: u.Prompt + 1, Completion: u.Completion, CacheRead: u.CacheRead + 1, CacheWrite: u.CacheWrite},
			{Prompt: u.Prompt + 1, Completion: u.Completion, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite + 1},
		} {
			if more.Prompt < 0 || more.Completion < 0 || more.CacheRead < 0 || more.CacheWrite < 0 {
				continue // overflowed
			}
			if m := p.Cost(more); m < c {
				t.Fatalf("Cost not monotone at %+v: %+v costs %d, %+v costs %d", p, u, c, more, m)
			}
		}
		// Any usage within the worst case's bounds costs at most it.
		bound := satAdd(bytes, satMul(8, int64(messages)))
		if prompt <= bound {
			if w := p.WorstCase(bytes, messages, completion); w < c {
				t.Fatalf("WorstCase(%d, %d, %d) = %d < Cost(%+v) = %d at %+v", bytes, messages, completion, w, u, c, p)
			}
		}
		if w := p.WorstCase(max(prompt, bytes), messages, completion); w < c {
			t.Fatalf("WorstCase(%d, %d, %d) = %d < Cost(%+v) = %d at %+v", max(prompt, bytes), messages, completion, w, u, c, p)
		}
	})
}

func abs(n int64) int64 {
	if n < 0 {
		if n == math.MinInt64 {
			return math.MaxInt64
		}
		return -n
	}
	return n
}
