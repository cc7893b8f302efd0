package pricing

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestCost(t *testing.T) {
	sonnet := Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}
	for _, tc := range []struct {
		name string
		p    Price
		u    Usage
		want Nano
	}{
		{"zero", sonnet, Usage{}, 0},
		{"input only", sonnet, Usage{Prompt: 1_000_000}, 3_000_000_000},
		{"output only", sonnet, Usage{Completion: 1000}, 15_000_000},
		// 1000 plain at 3, 2000 read at 0.3, 500 written at 3.75, 100 out at 15.
		{"cache parts of the prompt", sonnet, Usage{Prompt: 3500, CacheRead: 2000, CacheWrite: 500, Completion: 100},
			1000*3000 + 2000*300 + 500*3750 + 100*15000},
		{"one token", Price{Input: 0.075}, Usage{Prompt: 1}, 75},
		{"one token at a sub-nano price rounds up", Price{Input: 0.0001}, Usage{Prompt: 1}, 1},
		{"sub-nano sums before rounding", Price{Input: 0.0001, Output: 0.0004}, Usage{Prompt: 3, Completion: 3}, 2}, // 0.3 + 1.2 nano
		{"exact thousandths do not round up", Price{Input: 0.00015}, Usage{Prompt: 1000}, 150},
		{"cache beyond the prompt", sonnet, Usage{Prompt: 10, CacheRead: 20}, 20 * 300},
		{"negative counts are 0", sonnet, Usage{Prompt: -5, Completion: -1}, 0},
		{"saturates", Price{Input: MaxPrice}, Usage{Prompt: math.MaxInt64}, math.MaxInt64 / 1000},
		{"free", Price{}, Usage{Prompt: 1e9, Completion: 1e9}, 0},
	} {
		if got := tc.p.Cost(tc.u); got != tc.want {
			t.Errorf("%s: Cost(%+v) = %d, want %d", tc.name, tc.u, got, tc.want)
		}
	}
}

func TestWorstCase(t *testing.T) {
	p := Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}
	// 100 bytes + 2 messages × 8 = 116 tokens at 3.75 (cache write is the
	// dearest input), 50 at 15.
	if got, want := p.WorstCase(100, 2, 50), Nano(116*3750+50*15000); got != want {
		t.Errorf("WorstCase = %d, want %d", got, want)
	}
	if got := p.WorstCase(-1, -1, -1); got != 0 {
		t.Errorf("WorstCase of negatives = %d, want 0", got)
	}
}

func TestNanoUSD(t *testing.T) {
	for _, tc := range []struct {
		usd  float64
		want Nano
	}{{0, 0}, {0.1, 100_000_000}, {1, 1e9}, {1e-10, 1}, {-1, 0}, {math.NaN(), 0}, {1e12, math.MaxInt64}, {0.000000001, 1}} {
		if got := FromUSD(tc.usd); got != tc.want {
			t.Errorf("FromUSD(%v) = %d, want %d", tc.usd, got, tc.want)
		}
	}
	if got := Nano(1_500_000_000).USD(); got != 1.5 {
		t.Errorf("USD = %v", got)
	}
}

func TestPriceJSON(t *testing.T) {
	var p Price
	if err := json.Unmarshal([]byte(`{"input": 2, "output": 8}`), &p); err != nil {
		t.Fatal(err)
	}
	if want := (Price{Input: 2, Output: 8, CacheRead: 2, CacheWrite: 2}); p != want {
		t.Errorf("absent cache prices: %+v, want %+v", p, want)
	}
	if err := json.Unmarshal([]byte(`{"input": 2, "output": 8, "cache_read": 0.2, "cache_write": 0}`), &p); err != nil {
		t.Fatal(err)
	}
	if want := (Price{Input: 2, Output: 8, CacheRead: 0.2, CacheWrite: 0}); p != want {
		t.Errorf("given cache prices: %+v, want %+v", p, want)
	}
	for _, bad := range []string{`{"output": 1}`, `{"input": 1}`, `[]`, `{"input": "1", "output": 1}`, `{"input": 1, "output": 1, "cache_reed": 0.1}`} {
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		t    Table
		want string // "" ok, else a part of the error
	}{
		{Table{"a": {Input: 1, Output: 2, CacheRead: 0, CacheWrite: 1}}, ""},
		{Table{"m1": {Input: -1}}, `"m1"`},
		{Table{"m2": {Output: math.Inf(1)}}, `"m2"`},
		{Table{"m3": {CacheRead: math.NaN()}}, "cache_read"},
		{Table{"m4": {CacheWrite: 2 * MaxPrice}}, "cache_write"},
		{Table{" ": {}}, "empty"},
	} {
		err := tc.t.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.t, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want one naming %s", tc.t, err, tc.want)
		}
	}
	if err := Builtin().Validate(); err != nil {
		t.Errorf("built-in table: %v", err)
	}
}

func TestFromSettings(t *testing.T) {
	for _, tc := range []struct {
		settings string
		want     Table
		err      string
	}{
		{``, nil, ""},
		{`null`, nil, ""},
		{`{"max_tokens": 10}`, nil, ""},
		{`{"prices": {"m": {"input": 1, "output": 2}}}`, Table{"m": {Input: 1, Output: 2, CacheRead: 1, CacheWrite: 1}}, ""},
		{`{"prices": {"m": {"input": -1, "output": 2}}}`, nil, `"m"`},
		{`{"prices": {"m": {"input": 1}}}`, nil, `"m"`},
		{`{"prices": ["m"]}`, nil, "settings.prices"},
		{`{"prices": {"m": 3}}`, nil, `"m"`},
	} {
		got, err := FromSettings(json.RawMessage(tc.settings))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.settings, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one with %s", tc.settings, err, tc.err)
		case tc.err == "" && len(got) != len(tc.want):
			t.Errorf("%s: %v, want %v", tc.settings, got, tc.want)
		}
		for m, p := range tc.want {
			if got[m] != p {
				t.Errorf("%s: [%s] = %+v, want %+v", tc.settings, m, got[m], p)
			}
		}
	}
}
