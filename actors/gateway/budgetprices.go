package gateway

import "gatehouse/actors/gateway/pricing"

// The prices budgets reserve and settle at (agentrun.Prices): a model's
// price on its provider now (PriceOf), the same the run's trace is priced
// at when it is recorded.

// WorstCaseNano is the most a call to model on p may cost
// (pricing.Price.WorstCase): at the higher of the base and the
// long-context tier's rates once the conservative input count exceeds the
// tier's threshold, so the reservation covers a prompt that turns out
// above it. False when the model has no price.
func (g *Gateway) WorstCaseNano(p Provider, model string, promptBytes int64, messages int, maxTokens int64) (int64, bool) {
	price, ok := g.PriceOf(p.ProviderType, p.Settings, model)
	if !ok {
		return 0, false
	}
	return int64(price.WorstCase(promptBytes, messages, maxTokens)), true
}

// CostNano is what a call to model on p that used these tokens costs
// (pricing.Price.Cost: all of it at the tier's rates when the reported
// prompt exceeds the tier's threshold; 0 without a price).
func (g *Gateway) CostNano(p Provider, model string, prompt, completion, cacheRead, cacheWrite int64) int64 {
	price, ok := g.PriceOf(p.ProviderType, p.Settings, model)
	if !ok {
		return 0
	}
	return int64(price.Cost(pricing.Usage{Prompt: prompt, Completion: completion, CacheRead: cacheRead, CacheWrite: cacheWrite}))
}
