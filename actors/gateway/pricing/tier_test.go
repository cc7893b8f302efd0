package pricing

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// sonnet1M is Claude Sonnet 4.5 with its 1M-context tier, in nano-USD per
// token: below 3000 / 15000 / 300 / 3750, above 6000 / 22500 / 600 / 7500.
var sonnet1M = Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75,
	Above: Tier{Tokens: 200_000, Input: 6, Output: 22.5, CacheRead: 0.6, CacheWrite: 7.5}}

// TestCostTier: a call is priced at the tier, all of it, when its prompt
// (cache parts included) exceeds the tier's tokens, and below it at the
// base rates; exactly at the threshold is below.
func TestCostTier(t *testing.T) {
	gemini := Builtin()["gemini-2.5-pro"]
	for _, tc := range []struct {
		name string
		p    Price
		u    Usage
		want Nano
	}{
		{"just below", sonnet1M, Usage{Prompt: 199_999, Completion: 1000}, 199_999*3000 + 1000*15000},
		{"at the threshold", sonnet1M, Usage{Prompt: 200_000, Completion: 1000}, 200_000*3000 + 1000*15000},
		{"just above", sonnet1M, Usage{Prompt: 200_001, Completion: 1000}, 200_001*6000 + 1000*22500},
		// 100_000 plain, 90_000 read, 10_001 written: 200_001 in all.
		{"cache parts count toward the threshold", sonnet1M, Usage{Prompt: 200_001, CacheRead: 90_000, CacheWrite: 10_001, Completion: 10},
			100_000*6000 + 90_000*600 + 10_001*7500 + 10*22500},
		{"cache parts below it", sonnet1M, Usage{Prompt: 200_000, CacheRead: 90_000, CacheWrite: 10_000, Completion: 10},
			100_000*3000 + 90_000*300 + 10_000*3750 + 10*15000},
		// the reported prompt is short, its cache parts are not: they count.
		{"cache beyond the prompt", sonnet1M, Usage{Prompt: 10, CacheRead: 200_001}, 200_001 * 600},
		{"gemini built-in above", gemini, Usage{Prompt: 1_000_000, Completion: 1_000_000}, 2_500_000_000 + 15_000_000_000},
		{"gemini built-in below", gemini, Usage{Prompt: 200_000, Completion: 1_000_000}, 250_000_000 + 10_000_000_000},
		{"no tier", Price{Input: 3, Output: 15}, Usage{Prompt: 1_000_000}, 3_000_000_000},
		{"a tier without tokens is none", Price{Input: 3, Output: 15, Above: Tier{Input: 100, Output: 100}}, Usage{Prompt: 1_000_000}, 3_000_000_000},
	} {
		if got := tc.p.Cost(tc.u); got != tc.want {
			t.Errorf("%s: Cost(%+v) = %d, want %d", tc.name, tc.u, got, tc.want)
		}
	}
}

// TestWorstCaseTier: the worst case is at the base rates while its input
// count (bytes + 8 per message) is at most the threshold, and at the
// higher of each base and tier rate once it may exceed it.
func TestWorstCaseTier(t *testing.T) {
	// A tier that raises output but lowers the dearest input rate (Validate
	// refuses it; WorstCase stays a bound anyway): each rate is taken at
	// its own maximum.
	odd := Price{Input: 1, Output: 10, CacheRead: 0.1, CacheWrite: 4,
		Above: Tier{Tokens: 1000, Input: 2, Output: 20, CacheRead: 0.2, CacheWrite: 3}}
	for _, tc := range []struct {
		name      string
		p         Price
		bytes     int64
		messages  int
		maxTokens int64
		want      Nano
		prompt    int64 // the longest prompt the worst case covers
	}{
		// 199_984 + 2×8 = 200_000 tokens at 3.75, 100 at 15.
		{"at the threshold", sonnet1M, 199_984, 2, 100, 200_000*3750 + 100*15000, 200_000},
		{"just below", sonnet1M, 199_983, 2, 100, 199_999*3750 + 100*15000, 199_999},
		// 200_001 tokens at 7.5, 100 at 22.5.
		{"just above", sonnet1M, 199_985, 2, 100, 200_001*7500 + 100*22500, 200_001},
		{"far above", sonnet1M, 1_000_000, 0, 0, 1_000_000 * 7500, 1_000_000},
		{"the higher of each rate", odd, 1001, 0, 10, 1001*4000 + 10*20000, 1001},
		{"below: base rates", odd, 1000, 0, 10, 1000*4000 + 10*10000, 1000},
	} {
		got := tc.p.WorstCase(tc.bytes, tc.messages, tc.maxTokens)
		if got != tc.want {
			t.Errorf("%s: WorstCase(%d, %d, %d) = %d, want %d", tc.name, tc.bytes, tc.messages, tc.maxTokens, got, tc.want)
		}
		// The worst case covers the dearest usage it bounds: every prompt
		// token a cache write, every output token used.
		for _, u := range []Usage{
			{Prompt: tc.prompt, CacheWrite: tc.prompt, Completion: tc.maxTokens},
			{Prompt: tc.prompt, Completion: tc.maxTokens},
		} {
			if c := tc.p.Cost(u); c > got {
				t.Errorf("%s: Cost(%+v) = %d > WorstCase %d", tc.name, u, c, got)
			}
		}
	}
}

func TestTierJSON(t *testing.T) {
	var p Price
	if err := json.Unmarshal([]byte(`{"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75,
		"above": {"tokens": 200000, "input": 6, "output": 22.5, "cache_read": 0.6, "cache_write": 7.5}}`), &p); err != nil {
		t.Fatal(err)
	}
	if p != sonnet1M {
		t.Errorf("full tier: %+v, want %+v", p, sonnet1M)
	}
	if err := json.Unmarshal([]byte(`{"input": 1, "output": 2, "above": {"tokens": 10, "input": 4, "output": 5}}`), &p); err != nil {
		t.Fatal(err)
	}
	if want := (Price{Input: 1, Output: 2, CacheRead: 1, CacheWrite: 1, Above: Tier{Tokens: 10, Input: 4, Output: 5, CacheRead: 4, CacheWrite: 4}}); p != want {
		t.Errorf("absent tier cache prices: %+v, want %+v (the tier's input)", p, want)
	}
	for _, tc := range []struct{ json, want string }{
		{`{"input": 1, "output": 2, "above": {"input": 4, "output": 5}}`, "above needs tokens"},
		{`{"input": 1, "output": 2, "above": {"tokens": 10, "output": 5}}`, "above needs tokens"},
		{`{"input": 1, "output": 2, "above": {}}`, "above needs tokens"},
		{`{"input": 1, "output": 2, "above": {"tokens": 10, "input": 4, "output": 5, "cache_raed": 1}}`, "cache_raed"},
		{`{"input": 1, "output": 2, "above": {"tokens": 1.5, "input": 4, "output": 5}}`, "tokens"},
		{`{"input": 1, "output": 2, "above": 200000}`, "above"},
	} {
		if err := json.Unmarshal([]byte(tc.json), &p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %q", tc.json, err, tc.want)
		}
	}
	// A price without a tier marshals without one.
	b, err := json.Marshal(Price{Input: 1, Output: 2})
	if err != nil || strings.Contains(string(b), "above") {
		t.Errorf("Marshal = %s, %v: want no above", b, err)
	}
}

// TestValidateTier: a tier's errors name the field, through a table, the
// config's resolver and settings.prices alike.
func TestValidateTier(t *testing.T) {
	base := Price{Input: 1, Output: 2, CacheRead: 0.1, CacheWrite: 1.25}
	tier := func(f func(*Tier)) Price {
		p := base
		p.Above = Tier{Tokens: 100, Input: 2, Output: 4, CacheRead: 0.2, CacheWrite: 2.5}
		f(&p.Above)
		return p
	}
	for _, tc := range []struct {
		name string
		p    Price
		want string // "" ok
	}{
		{"valid", tier(func(*Tier) {}), ""},
		{"equal rates", tier(func(a *Tier) { *a = Tier{Tokens: 1, Input: 1, Output: 2, CacheRead: 0.1, CacheWrite: 1.25} }), ""},
		{"no tokens", tier(func(a *Tier) { a.Tokens = 0 }), "above.tokens must be a positive"},
		{"negative tokens", tier(func(a *Tier) { a.Tokens = -5 }), "above.tokens"},
		{"NaN input", tier(func(a *Tier) { a.Input = math.NaN() }), "above.input must be a number"},
		{"infinite output", tier(func(a *Tier) { a.Output = math.Inf(1) }), "above.output must be a number"},
		{"cache_read too big", tier(func(a *Tier) { a.CacheRead = 2 * MaxPrice }), "above.cache_read must be a number"},
		{"negative cache_write", tier(func(a *Tier) { a.CacheWrite = -1 }), "above.cache_write must be a number"},
		{"lower input", tier(func(a *Tier) { a.Input = 0.5 }), "above.input (0.5) must be at least input (1)"},
		{"lower output", tier(func(a *Tier) { a.Output = 1 }), "above.output (1) must be at least output (2)"},
		{"lower cache_read", tier(func(a *Tier) { a.CacheRead = 0.05 }), "above.cache_read"},
		{"lower cache_write", tier(func(a *Tier) { a.CacheWrite = 1 }), "above.cache_write"},
	} {
		err := Table{"tiered": tc.p}.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"tiered"`)):
			t.Errorf("%s: error %v, want one naming the model and %q", tc.name, err, tc.want)
		}
		if _, err2 := NewResolver(Table{"tiered": tc.p}, false); (err2 == nil) != (err == nil) {
			t.Errorf("%s: NewResolver: %v, Validate: %v", tc.name, err2, err)
		}
	}
	for _, tc := range []struct{ settings, want string }{
		{`{"prices": {"m": {"input": 1, "output": 2, "above": {"tokens": 0, "input": 2, "output": 4}}}}`, `settings.prices: price of model "m": above.tokens`},
		{`{"prices": {"m": {"input": 1, "output": 2, "above": {"tokens": 9, "input": 2, "output": 1}}}}`, `settings.prices: price of model "m": above.output`},
		{`{"prices": {"m": {"input": 1, "output": 2, "cache_read": 3, "above": {"tokens": 9, "input": 2, "output": 4}}}}`, `above.cache_read (2) must be at least cache_read (3)`},
		{`{"prices": {"m": {"input": 1, "output": 2, "above": {"input": 2, "output": 4}}}}`, `settings.prices["m"]: above needs tokens`},
	} {
		if _, err := FromSettings(json.RawMessage(tc.settings)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %q", tc.settings, err, tc.want)
		}
	}
	if err := Builtin().Validate(); err != nil {
		t.Errorf("built-in table: %v", err)
	}
}

// TestResolverTiers: an override replaces the whole price, tier included
// (a config entry without a tier removes the built-in one; a provider's
// tier wins over the config's), and dated and vendor names keep the tier.
func TestResolverTiers(t *testing.T) {
	configTier := Tier{Tokens: 1000, Input: 9, Output: 9, CacheRead: 9, CacheWrite: 9}
	r, err := NewResolver(Table{
		"claude-sonnet-4": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}, // no tier
		"house":           {Input: 1, Output: 1, CacheRead: 1, CacheWrite: 1, Above: configTier},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	prov := json.RawMessage(`{"prices": {"house": {"input": 2, "output": 2, "above": {"tokens": 50, "input": 3, "output": 4}}}}`)
	long := Usage{Prompt: 300_000, Completion: 1000}
	for _, tc := range []struct {
		settings, model string
		want            Tier
		cost            Nano
	}{
		{"", "claude-sonnet-4-5-20250929", sonnet1M.Above, 300_000*6000 + 1000*22500},
		{"", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", sonnet1M.Above, 300_000*6000 + 1000*22500},
		{"", "models/gemini-2.5-pro", builtin["gemini-2.5-pro"].Above, 300_000*2500 + 1000*15000},
		{"", "claude-sonnet-4-20250514", Tier{}, 300_000*3000 + 1000*15000}, // the config's, without a tier
		{"", "house", configTier, (301_000 * 9000)},
		{string(prov), "house", Tier{Tokens: 50, Input: 3, Output: 4, CacheRead: 3, CacheWrite: 3}, 300_000*3000 + 1000*4000},
	} {
		p, ok := r.Price("anthropic_native", json.RawMessage(tc.settings), tc.model)
		if !ok || p.Above != tc.want {
			t.Errorf("%s %s: %+v %v, want the tier %+v", tc.settings, tc.model, p, ok, tc.want)
		}
		if got := p.Cost(long); got != tc.cost {
			t.Errorf("%s %s: Cost = %d, want %d", tc.settings, tc.model, got, tc.cost)
		}
	}
	// Builtin is a copy: changing its tier changes nothing else.
	b := Builtin()
	p := b["gemini-2.5-pro"]
	p.Above.Input = 0
	b["gemini-2.5-pro"] = p
	if builtin["gemini-2.5-pro"].Above.Input != 2.5 {
		t.Error("Builtin shares its tiers with the built-in table")
	}
}
