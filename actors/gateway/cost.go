package gateway

import (
	"encoding/json"
	"slices"
	"strings"

	"gatehouse/actors/gateway/pricing"
)

// Prices (docs/pricing.md): every LLM call is priced when the gateway
// records its run, at the price its model has on its provider then
// (pricing.Resolver: the provider's settings.prices, the config's
// pricing.models, the built-in table). A model without a price costs 0
// and its span says price_known false.

// PriceOf is model's price on a provider of type providerType with
// settings; false when it has none.
func (g *Gateway) PriceOf(providerType string, settings json.RawMessage, model string) (pricing.Price, bool) {
	return g.cfg.Pricing.Price(providerType, settings, model)
}

// RequireKnownPrices reports pricing.require_known: calls to a model
// without a price are refused before anything is sent.
func (g *Gateway) RequireKnownPrices() bool { return g.cfg.Pricing.RequireKnown() }

// priceTrace sets the cost of t's LLM spans (and so of t) at the prices
// of their providers as they are now. A span that made no call (every key
// skipped) costs 0 and has no price_known.
func (g *Gateway) priceTrace(t *Trace) {
	var reg regView
	t.CostNano = 0
	for i := range t.Spans {
		sp := &t.Spans[i]
		if sp.Kind != SpanLLM || strings.HasPrefix(sp.Error, "skipped:") {
			continue
		}
		if reg.part == nil {
			reg = g.reader()
		}
		typ, settings := sp.ProviderType, json.RawMessage(nil)
		if p, err := reg.getProvider(sp.Provider); err == nil {
			typ, settings = cmpOr(typ, p.ProviderType), p.Settings
		}
		price, known := g.PriceOf(typ, settings, sp.Model)
		sp.CostNano = 0
		if known {
			sp.CostNano = int64(price.Cost(pricing.Usage{Prompt: sp.PromptTokens, Completion: sp.CompletionTokens,
				CacheRead: sp.CacheReadTokens, CacheWrite: sp.CacheWriteTokens}))
		}
		sp.CostUSD, sp.PriceKnown = pricing.Nano(sp.CostNano).USD(), &known
		t.CostNano = satAdd(t.CostNano, sp.CostNano)
	}
	t.CostUSD = pricing.Nano(t.CostNano).USD()
}

// CostOf is what spans cost at their providers' prices now, as RecordRun
// prices a trace (a session's turn is charged what its run cost).
func (g *Gateway) CostOf(spans []Span) int64 {
	t := Trace{Spans: slices.Clone(spans)}
	g.priceTrace(&t)
	return t.CostNano
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// cost is the run's cost (its spans' sum) and whether every call had a
// price (nil: no priced span, e.g. recorded before prices).
func (r *runRec) cost() (int64, *bool) {
	var nano int64
	var known *bool
	for _, s := range r.Spans {
		if s.PriceKnown == nil {
			continue
		}
		nano = satAdd(nano, s.CostNano)
		k := *s.PriceKnown && (known == nil || *known)
		known = &k
	}
	return nano, known
}

// satAdd is a+b for a, b ≥ 0, saturating.
func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}
