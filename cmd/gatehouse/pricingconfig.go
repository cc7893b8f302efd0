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
// cache_read and cache_write default to input.
type modelPrice struct {
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
