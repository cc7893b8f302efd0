package pricing

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestResolverLookup(t *testing.T) {
	b := Builtin()
	r, err := NewResolver(Table{
		"gpt-4o":          {Input: 1, Output: 1, CacheRead: 1, CacheWrite: 1}, // overrides the built-in
		"my-model":        {Input: 7, Output: 7, CacheRead: 7, CacheWrite: 7},
		"Claude-Sonnet-4": {Input: 9, Output: 9, CacheRead: 9, CacheWrite: 9}, // ties claude-sonnet-4: config wins
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	prov := json.RawMessage(`{"max_tokens": 100, "prices": {"gpt-4o": {"input": 5, "output": 6}, "local-": {"input": 1, "output": 1}, "house": {"input": 2, "output": 3}}}`)
	cfg := func(m string) Price { return r.config[m] }
	for _, tc := range []struct {
		typ, settings, model string
		want                 Price
		known                bool
	}{
		{"anthropic_native", "", "claude-sonnet-4-5", b["claude-sonnet-4-5"], true},
		{"anthropic_native", "", "claude-sonnet-4-5-20250929", b["claude-sonnet-4-5"], true},
		{"anthropic_native", "", "CLAUDE-SONNET-4-5-20250929", b["claude-sonnet-4-5"], true},
		{"bedrock", "", "anthropic.claude-sonnet-4-5-20250929-v1:0", b["claude-sonnet-4-5"], true},
		{"bedrock", "", "us.anthropic.claude-haiku-4-5-20251001-v1:0", b["claude-haiku-4-5"], true},
		{"bedrock", "", "global.anthropic.claude-opus-4-1-20250805-v1:0", b["claude-opus-4-1"], true},
		{"anthropic_native", "", "claude-opus-4-20250514", b["claude-opus-4"], true},
		{"vertex", "", "claude-sonnet-4-5@20250929", b["claude-sonnet-4-5"], true},
		{"anthropic_native", "", "claude-3-5-haiku-latest", b["claude-3-5-haiku"], true},
		{"gemini_native", "", "models/gemini-2.5-pro", b["gemini-2.5-pro"], true},
		{"gemini_native", "", "gemini-2.5-flash-lite-preview-09-2025", b["gemini-2.5-flash-lite"], true},
		{"gemini_native", "", "gemini-2.5-flash-preview-09-2025", b["gemini-2.5-flash"], true},
		{"openai", "", "gpt-4o-mini-2024-07-18", b["gpt-4o-mini"], true},
		{"openai", "", "gpt-4.1-nano-2025-04-14", b["gpt-4.1-nano"], true},
		{"openai", "", "gpt-5-mini", b["gpt-5-mini"], true},
		{"openai", "", "o4-mini-2025-04-16", b["o4-mini"], true},
		{"openai", "", "o3-pro", b["o3-pro"], true},
		{"groq", "", "meta-llama/llama-4-scout-17b-16e-instruct", b["llama-4-scout-17b-16e-instruct"], true},
		{"groq", "", "llama-3.3-70b-versatile", b["llama-3.3-70b-versatile"], true},
		{"xai", "", "grok-4-0709", b["grok-4"], true},
		{"xai", "", "grok-4-fast-reasoning", b["grok-4-fast"], true},
		{"deepseek", "", "deepseek-reasoner", b["deepseek-reasoner"], true},
		{"mistral", "", "mistral-large-latest", b["mistral-large"], true},
		// config over built-in, exact and by prefix; a config key wins a tie.
		{"openai", "", "gpt-4o", cfg("gpt-4o"), true},
		{"openai", "", "gpt-4o-2024-08-06", cfg("gpt-4o"), true},
		{"openai", "", "gpt-4o-mini", b["gpt-4o-mini"], true}, // the built-in's exact name beats the config's prefix
		{"anthropic_native", "", "claude-sonnet-4-20250514", cfg("claude-sonnet-4"), true},
		{"openai_compat", "", "my-model:latest", cfg("my-model"), true},
		// provider over config and built-in, also on local types.
		{"openai", string(prov), "gpt-4o", Price{Input: 5, Output: 6, CacheRead: 5, CacheWrite: 5}, true},
		{"openai", string(prov), "gpt-4o-mini", Price{Input: 5, Output: 6, CacheRead: 5, CacheWrite: 5}, true},
		{"echo", string(prov), "house", Price{Input: 2, Output: 3, CacheRead: 2, CacheWrite: 2}, true},
		{"openai", string(prov), "gpt-5", b["gpt-5"], true},
		// local types are free; unknown models are unknown.
		{"echo", "", "echo", Price{}, true},
		{"ollama", "", "llama3.2:3b", Price{}, true},
		{"ollama", "", "gpt-4o", Price{}, true},
		{"openai_compat", "", "llama3.2:3b", Price{}, false},
		{"openai", "", "gpt-4", Price{}, false},
		{"openai", "", "gpt-4oo", Price{}, false}, // no boundary
		{"openai", "", "", Price{}, false},
		{"openai", `{"prices": "bad"}`, "gpt-5", b["gpt-5"], true}, // invalid settings (never saved) are ignored
	} {
		got, known := r.Price(tc.typ, json.RawMessage(tc.settings), tc.model)
		if got != tc.want || known != tc.known {
			t.Errorf("Price(%s, %s, %q) = %+v %v, want %+v %v", tc.typ, tc.settings, tc.model, got, known, tc.want, tc.known)
		}
	}
}

func TestResolverNilAndRequireKnown(t *testing.T) {
	var r *Resolver
	if p, ok := r.Price("openai", nil, "gpt-5"); !ok || p != builtin["gpt-5"] {
		t.Errorf("nil resolver: %+v %v", p, ok)
	}
	if r.RequireKnown() {
		t.Error("nil resolver requires known prices")
	}
	r2, err := NewResolver(nil, true)
	if err != nil || !r2.RequireKnown() {
		t.Errorf("NewResolver(nil, true): %v %v", r2, err)
	}
	if _, err := NewResolver(Table{"bad-model": {Input: -3}}, false); err == nil || !strings.Contains(err.Error(), `"bad-model"`) {
		t.Errorf("bad config: %v, want an error naming the model", err)
	}
}

// TestBuiltinCovers checks every model the issue names has a built-in
// price.
func TestBuiltinCovers(t *testing.T) {
	for _, m := range []string{
		"claude-opus-4-1", "claude-opus-4", "claude-sonnet-4-5", "claude-sonnet-4", "claude-3-7-sonnet", "claude-haiku-4-5", "claude-3-5-haiku",
		"gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "o3", "o4-mini", "gpt-5", "gpt-5-mini", "gpt-5-nano",
		"gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite", "gemini-2.0-flash",
		"mistral-large", "mistral-small", "deepseek-chat", "deepseek-reasoner", "grok-4", "grok-3", "grok-3-mini",
		"llama-3.3-70b-versatile", "llama-3.1-8b-instant",
	} {
		p, ok := builtin[m]
		if !ok || p.Input <= 0 || p.Output <= 0 {
			t.Errorf("%s: %+v %v", m, p, ok)
		}
	}
}

func BenchmarkPrice(b *testing.B) {
	r, _ := NewResolver(nil, false)
	settings := json.RawMessage(`{"max_tokens": 100, "prices": {"x": {"input": 1, "output": 1}}}`)
	b.ReportAllocs()
	for b.Loop() {
		r.Price("anthropic_native", settings, "claude-sonnet-4-5-20250929")
	}
}

// TestResolverConcurrentSettings: many goroutines price models of more
// distinct provider settings than the cache holds; each gets its own
// provider's price.
func TestResolverConcurrentSettings(t *testing.T) {
	r, err := NewResolver(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				in := float64(g*1000 + i)
				settings := json.RawMessage(fmt.Sprintf(`{"prices": {"m": {"input": %g, "output": 1}}}`, in))
				if p, ok := r.Price("openai", settings, "m-1"); !ok || p.Input != in {
					t.Errorf("settings %s: %+v %v", settings, p, ok)
					return
				}
			}
		})
	}
	wg.Wait()
}
