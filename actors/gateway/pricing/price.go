package pricing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// Nano is an amount of money in nano-USD (1 USD = 1e9).
type Nano int64

// USD is n in US dollars.
func (n Nano) USD() float64 { return float64(n) / 1e9 }

// FromUSD is usd in nano-USD, rounded up; float noise below a thousandth
// of a nano is not rounded up (0.1 USD is 100000000, not one more). A
// negative or NaN amount is 0; a huge one saturates.
func FromUSD(usd float64) Nano {
	v := math.Ceil(usd*1e9 - 1e-3)
	switch {
	case math.IsNaN(v) || v <= 0:
		return 0
	case v >= math.MaxInt64:
		return math.MaxInt64
	}
	return Nano(v)
}

// MaxPrice is the highest price accepted, in USD per million tokens.
const MaxPrice = 1e6

// Price is a model's price in USD per million tokens. Reasoning tokens
// are output tokens. Above, when its Tokens is not 0, is a long-context
// tier: a call whose prompt exceeds Above.Tokens is priced, all of it, at
// the tier's rates (as Google bills Gemini 2.5 Pro and Anthropic its
// 1M-context Sonnet).
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read"`
	CacheWrite float64 `json:"cache_write"`
	Above      Tier    `json:"above,omitzero"`
}

// Tier is the rates, in USD per million tokens, of a call whose prompt
// (cache reads and writes included) has more than Tokens tokens. Tokens 0
// is no tier. It is a value, not a pointer, so that a Price stays
// comparable and a copy of a table shares nothing.
type Tier struct {
	Tokens     int64   `json:"tokens"`
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read"`
	CacheWrite float64 `json:"cache_write"`
}

// rates is the four rates of a price or a tier, in pico-USD per token.
type rates struct{ input, output, cacheRead, cacheWrite int64 }

// base is p's rates below its tier.
func (p Price) base() rates {
	return rates{units(p.Input), units(p.Output), units(p.CacheRead), units(p.CacheWrite)}
}

// rates is t's rates.
func (t Tier) rates() rates {
	return rates{units(t.Input), units(t.Output), units(t.CacheRead), units(t.CacheWrite)}
}

// at is the rates of a call whose prompt has prompt tokens.
func (p Price) at(prompt int64) rates {
	if p.Above.Tokens > 0 && prompt > p.Above.Tokens {
		return p.Above.rates()
	}
	return p.base()
}

// highest is the higher of each of r's and o's rates.
func (r rates) highest(o rates) rates {
	return rates{max(r.input, o.input), max(r.output, o.output), max(r.cacheRead, o.cacheRead), max(r.cacheWrite, o.cacheWrite)}
}

// priceJSON and tierJSON are a price as written: pointers tell an absent
// number from 0.
type priceJSON struct {
	Input      *float64  `json:"input"`
	Output     *float64  `json:"output"`
	CacheRead  *float64  `json:"cache_read"`
	CacheWrite *float64  `json:"cache_write"`
	Above      *tierJSON `json:"above"`
}

type tierJSON struct {
	Tokens     *int64   `json:"tokens"`
	Input      *float64 `json:"input"`
	Output     *float64 `json:"output"`
	CacheRead  *float64 `json:"cache_read"`
	CacheWrite *float64 `json:"cache_write"`
}

// UnmarshalJSON reads a price; cache_read and cache_write default to
// input when absent (a provider without a prompt cache bills them as
// input), in the price and in its above tier alike. A tier needs tokens,
// input and output.
func (p *Price) UnmarshalJSON(b []byte) error {
	var w priceJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a misspelt cache_read is an error, not a default
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("a price must be an object of input, output, cache_read and cache_write numbers and an optional above tier: %w", err)
	}
	if w.Input == nil || w.Output == nil {
		return fmt.Errorf("a price needs input and output (USD per million tokens)")
	}
	np := Price{Input: *w.Input, Output: *w.Output, CacheRead: *w.Input, CacheWrite: *w.Input}
	if w.CacheRead != nil {
		np.CacheRead = *w.CacheRead
	}
	if w.CacheWrite != nil {
		np.CacheWrite = *w.CacheWrite
	}
	if a := w.Above; a != nil {
		if a.Tokens == nil || a.Input == nil || a.Output == nil {
			return fmt.Errorf("above needs tokens (the prompt size it applies above), input and output")
		}
		np.Above = NewTier(*a.Tokens, *a.Input, *a.Output, a.CacheRead, a.CacheWrite)
	}
	*p = np
	return nil
}

// NewTier is a tier above tokens of prompt; cacheRead and cacheWrite
// default to input when nil. For decoders that read a price field by
// field (the config file's).
func NewTier(tokens int64, input, output float64, cacheRead, cacheWrite *float64) Tier {
	t := Tier{Tokens: tokens, Input: input, Output: output, CacheRead: input, CacheWrite: input}
	if cacheRead != nil {
		t.CacheRead = *cacheRead
	}
	if cacheWrite != nil {
		t.CacheWrite = *cacheWrite
	}
	return t
}

// Validate checks that every part of p is a finite number in
// [0, MaxPrice] and that its tier, if any, applies above a positive
// number of tokens and raises no rate less than it was: a call priced
// at the tier never costs less than it would below it, so the cost grows
// with the prompt. The error names the field ("above.output").
func (p Price) Validate() error {
	if err := checkRates("", p.Input, p.Output, p.CacheRead, p.CacheWrite); err != nil {
		return err
	}
	a := p.Above
	if a == (Tier{}) {
		return nil
	}
	if a.Tokens <= 0 {
		return fmt.Errorf("above.tokens must be a positive number of prompt tokens, not %d", a.Tokens)
	}
	if err := checkRates("above.", a.Input, a.Output, a.CacheRead, a.CacheWrite); err != nil {
		return err
	}
	for _, f := range []struct {
		name        string
		tier, below float64
	}{{"input", a.Input, p.Input}, {"output", a.Output, p.Output}, {"cache_read", a.CacheRead, p.CacheRead}, {"cache_write", a.CacheWrite, p.CacheWrite}} {
		if f.tier < f.below {
			return fmt.Errorf("above.%s (%v) must be at least %s (%v): a long-context tier does not lower a price", f.name, f.tier, f.name, f.below)
		}
	}
	return nil
}

// checkRates checks that each rate is a finite number in [0, MaxPrice];
// the error names it with prefix.
func checkRates(prefix string, input, output, cacheRead, cacheWrite float64) error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"input", input}, {"output", output}, {"cache_read", cacheRead}, {"cache_write", cacheWrite}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 || f.v > MaxPrice {
			return fmt.Errorf("%s%s must be a number from 0 to %g (USD per million tokens), not %v", prefix, f.name, float64(MaxPrice), f.v)
		}
	}
	return nil
}

// Usage is a call's tokens: Prompt includes CacheRead and CacheWrite,
// Completion includes reasoning.
type Usage struct {
	Prompt, Completion, CacheRead, CacheWrite int64
}

// Cost is what a call that used u costs at p, rounded up to the nano:
// (prompt − cache_read − cache_write) × input + cache_read × cache_read
// price + cache_write × cache_write price + completion × output, at the
// rates of p's tier when the prompt exceeds its Tokens. Negative counts
// count as 0, cache parts beyond the prompt count as cache tokens (the
// plain input part is then 0, the prompt their sum); it saturates at the
// largest Nano.
func (p Price) Cost(u Usage) Nano {
	prompt, read, write, out := max(u.Prompt, 0), max(u.CacheRead, 0), max(u.CacheWrite, 0), max(u.Completion, 0)
	plain := max(prompt-read-write, 0)
	r := p.at(satAdd(satAdd(plain, read), write))
	var pico sum
	pico.add(plain, r.input)
	pico.add(read, r.cacheRead)
	pico.add(write, r.cacheWrite)
	pico.add(out, r.output)
	return pico.nano()
}

// WorstCase is the most a call can cost at p: no byte-level tokenizer
// yields more tokens than the prompt has bytes, plus 8 per message for its
// template, priced at the highest of the input, cache-read and cache-write
// prices; plus maxTokens at the output price. When that input count
// exceeds the tier's Tokens the prompt may too, so each rate is the higher
// of p's and its tier's. It is at least Cost(u) for every u whose Prompt
// is at most promptBytes + 8×messages and whose Completion is at most
// maxTokens.
func (p Price) WorstCase(promptBytes int64, messages int, maxTokens int64) Nano {
	in := satAdd(max(promptBytes, 0), satMul(8, int64(max(messages, 0))))
	r := p.base()
	if p.Above.Tokens > 0 && in > p.Above.Tokens {
		r = r.highest(p.Above.rates())
	}
	var pico sum
	pico.add(in, max(r.input, r.cacheRead, r.cacheWrite))
	pico.add(max(maxTokens, 0), r.output)
	return pico.nano()
}

// units is a price in pico-USD per token (USD per million tokens × 1e6),
// to the nearest: prices are exact to 1e-6 USD per million tokens.
func units(usdPerM float64) int64 {
	if math.IsNaN(usdPerM) || usdPerM <= 0 {
		return 0
	}
	return int64(math.Round(min(usdPerM, MaxPrice) * 1e6))
}

// sum adds pico-USD, saturating.
type sum int64

func (s *sum) add(tokens, picoPerToken int64) {
	*s = sum(satAdd(int64(*s), satMul(tokens, picoPerToken)))
}

// nano is s in nano-USD, rounded up.
func (s sum) nano() Nano {
	if s == math.MaxInt64 {
		return math.MaxInt64 / 1000
	}
	return Nano((int64(s) + 999) / 1000)
}

// satMul is a×b for a, b ≥ 0, saturating at MaxInt64.
func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// satAdd is a+b for a, b ≥ 0, saturating at MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
