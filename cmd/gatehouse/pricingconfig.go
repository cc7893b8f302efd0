package main

import (
	"fmt"
	"slices"

	"gatehouse/actors/gateway/pricing"
)

// pricingConfig is the config file's pricing section (docs/pricing.md):
// prices that override the built-in table, and whether calls to a model
// without a price are refused.
type pricingConfig struct {
	Models       map[string]modelPrice `json:"models"`
	RequireKnown bool                  `json:"require_known"`
}

// modelPrice is one model's price in USD per million tokens, decoded
// field by field so that the strict decoder names a misspelt key;
// cache_read and cache_write default to input. Above is its optional
// long-context tier (a value, not a pointer, for the strict decoder's
// sake: an empty "above": {} is no tier).
type modelPrice struct {
	Input      *float64  `json:"input"`
	Output     *float64  `json:"output"`
	CacheRead  *float64  `json:"cache_read"`
	CacheWrite *float64  `json:"cache_write"`
	Above      modelTier `json:"above,omitzero"`
}

// modelTier is a price's long-context tier: its rates apply to a call
// whose prompt exceeds tokens; cache_read and cache_write default to the
// tier's input.
type modelTier struct {
	Tokens     *int64   `json:"tokens"`
	Input      *float64 `json:"input"`
	Output     *float64 `json:"output"`
	CacheRead  *float64 `json:"cache_read"`
	CacheWrite *float64 `json:"cache_write"`
}

// table is the section's prices, validated: the error names the model.
func (c pricingConfig) table() (pricing.Table, error) {
	t := make(pricing.Table, len(c.Models))
	for _, m := range slices.Sorted(func(yield func(string) bool) {
		for k := range c.Models {
			if !yield(k) {
				return
			}
		}
	}) {
		mp := c.Models[m]
		if mp.Input == nil || mp.Output == nil {
			return nil, fmt.Errorf("price of model %q needs input and output", m)
		}
		p := pricing.Price{Input: *mp.Input, Output: *mp.Output, CacheRead: *mp.Input, CacheWrite: *mp.Input}
		if mp.CacheRead != nil {
			p.CacheRead = *mp.CacheRead
		}
		if mp.CacheWrite != nil {
			p.CacheWrite = *mp.CacheWrite
		}
		if a := mp.Above; a != (modelTier{}) {
			if a.Tokens == nil || a.Input == nil || a.Output == nil {
				return nil, fmt.Errorf("price of model %q: above needs tokens, input and output", m)
			}
			p.Above = pricing.NewTier(*a.Tokens, *a.Input, *a.Output, a.CacheRead, a.CacheWrite)
		}
		t[m] = p
	}
	return t, t.Validate()
}

// resolver is the gateway's price resolver of the section.
func (c pricingConfig) resolver() (*pricing.Resolver, error) {
	t, err := c.table()
	if err != nil {
		return nil, err
	}
	return pricing.NewResolver(t, c.RequireKnown)
}
