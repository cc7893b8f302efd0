package ratelimit

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var propLimits = []int64{-3, 0, 1, 2, 3, 7, 50, 400, 3600, 5000}

// randomStep returns a time step: mostly none or a few seconds, sometimes a
// long gap, exactly one window, more than one, or a step back.
func randomStep(rng *rand.Rand) int64 {
	switch p := rng.IntN(100); {
	case p < 40:
		return 0
	case p < 70:
		return 1 + rng.Int64N(3)
	case p < 85:
		return 4 + rng.Int64N(100)
	case p < 92:
		return 100 + rng.Int64N(WindowSeconds)
	case p < 95:
		return WindowSeconds - 1 + rng.Int64N(3)
	default:
		return -1 - rng.Int64N(200)
	}
}

// randomOps returns count operations. With constLimit they all share one
// limit and none adds or subtracts requests.
func randomOps(rng *rand.Rand, count int, constLimit bool) []op {
	limit := propLimits[rng.IntN(len(propLimits))]
	ops := make([]op, 0, count)
	for range count {
		if !constLimit && rng.IntN(100) == 0 {
			limit = propLimits[rng.IntN(len(propLimits))]
		}
		o := op{dt: randomStep(rng), limit: limit, n: 1 + uint32(rng.IntN(4))}
		switch p := rng.IntN(100); {
		case p < 70:
			o.kind, o.burst = opAllow, 1+rng.IntN(4)
			if rng.IntN(20) == 0 {
				o.burst = 1 + rng.IntN(200)
			}
		case p < 80:
			o.kind = opPeek
		case p < 85:
			o.kind = opUsed
		case p < 98 && !constLimit:
			o.kind, o.arg = opAdd+rng.IntN(2), -rng.Int64N(30)
			if rng.IntN(4) == 0 {
				o.arg = 1 - rng.Int64N(WindowSeconds+200)
			}
		default:
			o.kind = opClone
		}
		ops = append(ops, o)
	}
	return ops
}

// propStarts are the first seconds of the sequences: ordinary Unix time,
// just before the 32-bit wrap of the stored seconds, zero and negative.
var propStarts = []int64{1_764_000_000, 1<<32 - 1800, 0, -5000}

func TestWindowMatchesReference(t *testing.T) {
	seeds := []uint64{uint64(time.Now().UnixNano())}
	for s := range uint64(16) {
		seeds = append(seeds, s)
	}
	for _, seed := range seeds {
		for _, constLimit := range []bool{true, false} {
			rng := rand.New(rand.NewPCG(seed, 0x6761746568))
			t0 := propStarts[rng.IntN(len(propStarts))]
			ops := randomOps(rng, 1500, constLimit)
			ok := t.Run("", func(t *testing.T) { checkOps(t, t0, ops, constLimit) })
			if !ok {
				t.Fatalf("seed %d, constLimit %v, t0 %d: reproduce with seeds = []uint64{%d}", seed, constLimit, t0, seed)
			}
		}
	}
}

// decodeOps turns fuzz bytes into operations, three bytes each: kind and
// limit, time step, and burst or (second offset, count).
func decodeOps(data []byte) []op {
	var ops []op
	for ; len(data) >= 3 && len(ops) < 400; data = data[3:] {
		o := op{
			kind:  int(data[0] % opKinds),
			limit: propLimits[int(data[0]/opKinds)%len(propLimits)],
			dt:    decodeStep(data[1]),
			burst: 1 + int(data[2]%8),
			n:     1 + uint32(data[2]&3),
		}
		if a := int64(data[2] >> 2); a < 32 {
			o.arg = -a
		} else {
			o.arg = -(a - 32) * 120
		}
		ops = append(ops, o)
	}
	return ops
}

func decodeStep(b byte) int64 {
	v := int64(b & 31)
	switch b >> 5 {
	case 0, 1:
		return 0
	case 2:
		return 1
	case 3:
		return v
	case 4:
		return v * 120
	case 5:
		return WindowSeconds - 2 + v%4
	case 6:
		return -v
	default:
		return 1 + v*100_000
	}
}

func FuzzWindow(f *testing.F) {
	f.Add(int64(1_764_000_000), []byte{0, 0, 0, 0, 64, 7, 1, 160, 0, 12, 192, 5})
	f.Add(int64(1<<32-10), []byte{20, 96, 7, 21, 70, 3, 3, 64, 200, 4, 70, 9, 5, 0, 0, 0, 224, 1})
	f.Add(int64(-100), []byte{60, 191, 7, 2, 200, 0, 14, 161, 2, 0, 255, 255})
	f.Fuzz(func(t *testing.T, t0 int64, data []byte) {
		checkOps(t, t0%(1<<40), decodeOps(data), false)
	})
}

func FuzzBucket(f *testing.F) {
	f.Add(10.0, 20.0, []byte{0, 1, 0, 0, 255, 255, 3, 0})
	f.Add(0.5, 1.0, []byte{10, 0, 200, 0, 0, 128, 1, 1})
	f.Add(math.Inf(1), math.NaN(), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, rate, burst float64, data []byte) {
		var b Bucket
		base := time.Unix(1_764_000_000, 0)
		now, latest, seen := base, base, false
		for ; len(data) >= 2; data = data[2:] {
			// Steps of −32 s to +32 s in 1 ms units.
			now = now.Add(time.Duration(int16(uint16(data[0])<<8|uint16(data[1]))) * time.Millisecond)
			before := b.Tokens(now, rate, burst)
			checkTokens(t, before, burst)
			if seen && !now.After(latest) && before != b.Tokens(latest, rate, burst) {
				t.Fatalf("Tokens(%v) = %v after stepping back from %v, want %v", now, before, latest, b.Tokens(latest, rate, burst))
			}
			if got := b.Allow(now, rate, burst); got != (before >= 1) {
				t.Fatalf("Allow with %v tokens = %v", before, got)
			}
			checkTokens(t, b.Tokens(now, rate, burst), burst)
			if !seen || now.After(latest) {
				latest, seen = now, true
			}
		}
	})
}

func checkTokens(tb testing.TB, tokens, burst float64) {
	tb.Helper()
	bound := burst
	if !(bound > 0) { // NaN and negative bursts hold nothing
		bound = 0
	}
	if !(tokens >= 0 && tokens <= bound) {
		tb.Fatalf("Tokens() = %v, want within [0, %v]", tokens, burst)
	}
}
