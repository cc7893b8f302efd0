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
// are output tokens.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read"`
	CacheWrite float64 `json:"cache_write"`
}

// UnmarshalJSON reads a price; cache_read and cache_write default to
// input when absent (a provider without a prompt cache bills them as
// input).
func (p *Price) UnmarshalJSON(b []byte) error {
	var w struct {
		Input      *float64 `json:"input"`
		Output     *float64 `json:"output"`
		CacheRead  *float64 `json:"cache_read"`
		CacheWrite *float64 `json:"cache_write"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a misspelt cache_read is an error, not a default
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("a price must be an object of input, output, cache_read and cache_write numbers: %w", err)
	}
	if w.Input == nil || w.Output == nil {
		return fmt.Errorf("a price needs input and output (USD per million tokens)")
	}
	*p = Price{Input: *w.Input, Output: *w.Output, CacheRead: *w.Input, CacheWrite: *w.Input}
	if w.CacheRead != nil {
		p.CacheRead = *w.CacheRead
	}
	if w.CacheWrite != nil {
		p.CacheWrite = *w.CacheWrite
	}
	return nil
}

// Validate checks that every part of p is a finite number in
// [0, MaxPrice].
func (p Price) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"input", p.Input}, {"output", p.Output}, {"cache_read", p.CacheRead}, {"cache_write", p.CacheWrite}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 || f.v > MaxPrice {
			return fmt.Errorf("%s must be a number from 0 to %g (USD per million tokens), not %v", f.name, float64(MaxPrice), f.v)
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
// price + cache_write × cache_write price + completion × output. Negative
// counts count as 0, cache parts beyond the prompt count as cache tokens
// (the plain input part is then 0); it saturates at the largest Nano.
func (p Price) Cost(u Usage) Nano {
	prompt, read, write, out := max(u.Prompt, 0), max(u.CacheRead, 0), max(u.CacheWrite, 0), max(u.Completion, 0)
	plain := max(prompt-read-write, 0)
	var pico sum
	pico.add(plain, units(p.Input))
	pico.add(read, units(p.CacheRead))
	pico.add(write, units(p.CacheWrite))
	pico.add(out, units(p.Output))
	return pico.nano()
}

// WorstCase is the most a call can cost at p: no byte-level tokenizer
// yields more tokens than the prompt has bytes, plus 8 per message for its
// template, priced at the highest of the input, cache-read and cache-write
// prices; plus maxTokens at the output price. It is at least Cost(u) for
// every u whose Prompt is at most promptBytes + 8×messages and whose
// Completion is at most maxTokens.
func (p Price) WorstCase(promptBytes int64, messages int, maxTokens int64) Nano {
	in := satAdd(max(promptBytes, 0), satMul(8, int64(max(messages, 0))))
	var pico sum
	pico.add(in, max(units(p.Input), units(p.CacheRead), units(p.CacheWrite)))
	pico.add(max(maxTokens, 0), units(p.Output))
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
