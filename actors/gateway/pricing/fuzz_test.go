package pricing

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestWorstCaseCoversCost is FuzzCostProperties's bound as a property
// test that every run does: random prices with and without a tier, a
// threshold near the worst case's input count, and usages within the
// worst case's inputs (any split of the prompt into plain, cache-read and
// cache-write tokens; any completion up to max_tokens) never cost more
// than the worst case.
func TestWorstCaseCoversCost(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 2025))
	rate := func() float64 { return float64(rng.IntN(20_000_000)) / 1e6 } // 0 to 20 USD per million, to the micro
	for i := range 100_000 {
		p := Price{Input: rate(), Output: rate(), CacheRead: rate(), CacheWrite: rate()}
		bytes, messages, maxTokens := rng.Int64N(400_000), rng.IntN(50), rng.Int64N(70_000)
		in := bytes + 8*int64(messages)
		if i%4 != 0 { // three in four have a tier, its threshold within 20 of the input count
			x := func() float64 { return 1 + float64(rng.IntN(3_000_000))/1e6 }
			p.Above = Tier{Tokens: max(in+rng.Int64N(41)-20, 1),
				Input: p.Input * x(), Output: p.Output * x(), CacheRead: p.CacheRead * x(), CacheWrite: p.CacheWrite * x()}
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("generated price %+v: %v", p, err)
		}
		w := p.WorstCase(bytes, messages, maxTokens)
		prompt := in - rng.Int64N(min(in, 30)+1) // the longest prompts matter most
		if rng.IntN(2) == 0 {
			prompt = rng.Int64N(in + 1)
		}
		read := rng.Int64N(prompt + 1)
		write := rng.Int64N(prompt - read + 1)
		u := Usage{Prompt: prompt, CacheRead: read, CacheWrite: write, Completion: rng.Int64N(maxTokens + 1)}
		if c := p.Cost(u); c > w {
			t.Fatalf("Cost(%+v) = %d > WorstCase(%d, %d, %d) = %d at %+v", u, c, bytes, messages, maxTokens, w, p)
		}
	}
}

// FuzzCostProperties: Cost is never negative and monotone in every count
// (a cache part grows with the prompt it is part of), and WorstCase is at
// least the Cost of any usage within its bounds, with or without a
// long-context tier. The tier's rates are the base's times factors ≥ 1
// (a valid tier lowers no rate) and its threshold is near the prompt or
// the worst case's bound, so that both sides of it are tried.
func FuzzCostProperties(f *testing.F) {
	f.Add(3.0, 15.0, 0.3, 3.75, int64(1000), int64(200), int64(300), int64(100), int64(50), 3, int64(0), 1.0, 1.0)
	f.Add(0.075, 0.3, 1.5, 0.0, int64(1), int64(0), int64(1), int64(0), int64(1), 0, int64(0), 1.0, 1.0)
	f.Add(1e6, 1e6, 1e6, 1e6, int64(math.MaxInt64), int64(math.MaxInt64), int64(1), int64(1), int64(math.MaxInt64), 1<<30, int64(0), 1.0, 1.0)
	f.Add(3.0, 15.0, 0.3, 3.75, int64(200_001), int64(90_000), int64(10_001), int64(1000), int64(199_985), 2, int64(-1), 2.0, 1.5)
	f.Add(1.25, 10.0, 0.125, 1.25, int64(200_000), int64(0), int64(0), int64(10), int64(199_999), 0, int64(-3), 2.0, 1.5)
	f.Add(1.0, 1.0, 1.0, 1.0, int64(5), int64(0), int64(0), int64(0), int64(5), 0, int64(4), 1e9, 1e9)
	f.Fuzz(func(t *testing.T, in, out, cr, cw float64, prompt, read, write, completion, bytes int64, messages int, tokens int64, inX, outX float64) {
		prompt, read, write, completion, bytes = abs(prompt), abs(read), abs(write), abs(completion), abs(bytes)
		messages = max(messages, 0) % (1 << 20)
		read, write = min(read, prompt), min(write, prompt-min(read, prompt))
		bound := satAdd(bytes, satMul(8, int64(messages)))
		p := Price{Input: in, Output: out, CacheRead: cr, CacheWrite: cw}
		if tokens != 0 {
			// a threshold within 7 tokens of the prompt (tokens even) or of
			// the worst case's bound (odd), either side
			near := prompt
			if tokens%2 != 0 {
				near = bound
			}
			inX, outX = max(math.Abs(inX), 1), max(math.Abs(outX), 1)
			p.Above = Tier{Tokens: max(satAdd(near, 7)-7+tokens%8, 1),
				Input: in * inX, Output: out * outX, CacheRead: cr * inX, CacheWrite: cw * inX}
		}
		if p.Validate() != nil {
			return
		}
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
