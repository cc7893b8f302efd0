package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gatehouse/actors/gateway/pricing"
)

// TestPricingConfigTiers: a price's above tier is read from the config
// file (its cache prices default to its input), prices calls whose prompt
// exceeds it, and a bad tier stops the start with an error naming the
// model and the field.
func TestPricingConfigTiers(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, file string
		wantErr    string
		want       pricing.Price
		wantCost   pricing.Nano // of 1001 prompt tokens and 10 out
	}{
		{name: "tier", file: `{"pricing":{"models":{"long-model":{"input":1,"output":2,"cache_read":0.1,
			"above":{"tokens":1000,"input":2,"output":3,"cache_read":0.2}}}}}`,
			want: pricing.Price{Input: 1, Output: 2, CacheRead: 0.1, CacheWrite: 1,
				Above: pricing.Tier{Tokens: 1000, Input: 2, Output: 3, CacheRead: 0.2, CacheWrite: 2}},
			wantCost: 1001*2000 + 10*3000},
		{name: "empty tier", file: `{"pricing":{"models":{"long-model":{"input":1,"output":2,"above":{}}}}}`,
			want: pricing.Price{Input: 1, Output: 2, CacheRead: 1, CacheWrite: 1}, wantCost: 1001*1000 + 10*2000},
		{name: "tier without tokens", file: `{"pricing":{"models":{"long-model":{"input":1,"output":2,"above":{"input":2,"output":3}}}}}`,
			wantErr: `price of model "long-model": above needs tokens, input and output`},
		{name: "tier lowers output", file: `{"pricing":{"models":{"long-model":{"input":1,"output":2,"above":{"tokens":10,"input":2,"output":1}}}}}`,
			wantErr: `pricing.models must hold valid prices (USD per million tokens): price of model "long-model": above.output (1) must be at least output (2)`},
		{name: "zero tokens", file: `{"pricing":{"models":{"long-model":{"input":1,"output":2,"above":{"tokens":0,"input":2,"output":3}}}}}`,
			wantErr: `price of model "long-model": above.tokens must be a positive number`},
		{name: "misspelt tier key", file: `{"pricing":{"models":{"m":{"input":1,"output":1,"above":{"tokens":5,"input":1,"output":1,"cache_raed":1}}}}}`,
			wantErr: `unknown key "pricing.models.m.above.cache_raed"; valid keys here: tokens, input, output, cache_read, cache_write`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".json")
			if err := os.WriteFile(p, []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := parseServe("serve", []string{"--config", p}, func(string) string { return "" }, io.Discard, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseServe() = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseServe() = %v", err)
			}
			r, err := c.Pricing.resolver()
			if err != nil {
				t.Fatal(err)
			}
			got, ok := r.Price("openai", nil, "long-model")
			if !ok || got != tt.want {
				t.Fatalf("price = %+v %v, want %+v", got, ok, tt.want)
			}
			// 1001 tokens of prompt: above a tier of 1000, all of it at the tier.
			if c := got.Cost(pricing.Usage{Prompt: 1001, Completion: 10}); c != tt.wantCost {
				t.Errorf("cost = %d, want %d", c, tt.wantCost)
			}
		})
	}
}
