package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gatehouse/actors/gateway/pricing"
)

// TestPricingConfig: the pricing section is read (cache prices default to
// input), built into a resolver whose config prices win over the built-in
// table, and a bad price stops the start with an error naming the model
// and the key.
func TestPricingConfig(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, file string
		wantErr    string
		check      func(t *testing.T, c fileConfig)
	}{
		{name: "absent", file: `{}`, check: func(t *testing.T, c fileConfig) {
			if len(c.Pricing.Models) != 0 || c.Pricing.RequireKnown {
				t.Errorf("pricing = %+v, want none", c.Pricing)
			}
		}},
		{name: "models", file: `{"pricing":{"require_known":true,"models":{"house-model":{"input":2,"output":8},"gpt-5":{"input":1,"output":2,"cache_read":0.1,"cache_write":1}}}}`,
			check: func(t *testing.T, c fileConfig) {
				tbl, err := c.Pricing.table()
				if err != nil || !c.Pricing.RequireKnown || tbl["house-model"] != (pricing.Price{Input: 2, Output: 8, CacheRead: 2, CacheWrite: 2}) {
					t.Errorf("pricing = %+v: %v, %v", c.Pricing, tbl, err)
				}
				r, err := c.Pricing.resolver()
				if err != nil {
					t.Fatal(err)
				}
				if p, ok := r.Price("openai", nil, "gpt-5-2025-08-07"); !ok || p.Input != 1 || p.CacheRead != 0.1 {
					t.Errorf("gpt-5 = %+v %v, want the config's price", p, ok)
				}
				if !r.RequireKnown() {
					t.Error("require_known not carried")
				}
			}},
		{name: "negative price", file: `{"pricing":{"models":{"bad-model":{"input":-1,"output":1}}}}`,
			wantErr: `config FILE: pricing.models must hold valid prices (USD per million tokens): price of model "bad-model": input must be`},
		{name: "missing output", file: `{"pricing":{"models":{"half-model":{"input":1}}}}`, wantErr: `price of model "half-model" needs input and output`},
		{name: "misspelt key", file: `{"pricing":{"models":{"m":{"input":1,"output":1,"cache_raed":1}}}}`,
			wantErr: `unknown key "pricing.models.m.cache_raed"; valid keys here: input, output, cache_read, cache_write`},
		{name: "not a number", file: `{"pricing":{"models":{"m":{"input":"1","output":1}}}}`, wantErr: `pricing.models.m.input: want`},
		{name: "unknown pricing key", file: `{"pricing":{"require_knwon":true}}`, wantErr: `unknown key "pricing.require_knwon"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".json")
			if err := os.WriteFile(p, []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := parseServe("serve", []string{"--config", p}, func(string) string { return "" }, io.Discard, io.Discard)
			if tt.wantErr != "" {
				if want := strings.ReplaceAll(tt.wantErr, "FILE", p); err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("parseServe() = %v, want an error containing %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseServe() = %v", err)
			}
			tt.check(t, c)
		})
	}
}
