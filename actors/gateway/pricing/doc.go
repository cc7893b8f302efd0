// Package pricing prices LLM calls (issue 34, docs/pricing.md): a price
// per model in USD per million input, output, cache-read and cache-write
// tokens, with an optional long-context tier (the whole call at higher
// rates when its prompt exceeds a threshold); a dated built-in table of
// the well-known models; a Resolver that looks a model up in a provider's
// settings.prices, the config's pricing.models and the built-in table;
// and the cost of a call, or its worst case before it is made, in integer
// nano-USD rounded up.
//
// Token counts follow llm.Result's convention: the prompt count includes
// the cache reads and writes, the completion count includes reasoning.
// The package is pure: it depends on nothing of the gateway.
package pricing
