package agentrun

import (
	"context"
	"time"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun/llm"
)

// What the admin's provider routes ask of the runtime: a provider's
// health (its keys' states and its last error), its model list, and a
// verification call. These use the provider's pool like a run does: the
// first ready key; a key refused here is set aside for runs too.

// ProviderHealth returns what the runtime knows of p's calls since it
// started (or since p was last updated): each key ready, cooling down or
// refused, masked, and the last error.
func (rt *Runtime) ProviderHealth(p gateway.Provider) ProviderHealth {
	pp, err := rt.pools.get(p)
	if err != nil {
		return ProviderHealth{Keys: []KeyHealth{}, LastError: "credential: cannot be opened"}
	}
	return pp.health(time.Now())
}

// ProviderModels lists the models p's own API lists. Errors: a
// *ProviderError (ErrProvider), ctx's.
func (rt *Runtime) ProviderModels(ctx context.Context, p gateway.Provider) ([]llm.Model, error) {
	var out []llm.Model
	err := rt.withKey(ctx, p, func(c llm.Client) error {
		var err error
		out, err = c.Models(ctx)
		return err
	})
	if out == nil && err == nil {
		out = []llm.Model{}
	}
	return out, err
}

// VerifyProvider makes p's cheapest authenticated call and returns how
// long it took. Errors: a *ProviderError (ErrProvider), ctx's.
func (rt *Runtime) VerifyProvider(ctx context.Context, p gateway.Provider) (time.Duration, error) {
	t0 := time.Now()
	err := rt.withKey(ctx, p, func(c llm.Client) error { return c.Verify(ctx) })
	return time.Since(t0), err
}

// withKey runs f with the client of p's next ready key, recording a
// refusal or rate limit against the key. With every key set aside it
// tries the first one anyway: the admin asked.
func (rt *Runtime) withKey(ctx context.Context, p gateway.Provider, f func(llm.Client) error) error {
	pp, err := rt.pools.get(p)
	if err != nil {
		return providerError("credential cannot be opened")
	}
	slot, _ := pp.pick(time.Now())
	if slot == nil {
		slot = pp.slots[0]
	}
	err = f(slot.client)
	if le, ok := asLLMError(err); ok {
		wait := le.RetryAfter
		if wait <= 0 {
			wait = defaultCooldown
		}
		pp.failed(slot, le, wait, time.Now())
		return &ProviderError{Detail: newRedactor(pp.keys...).preview(le.Error()), cause: le}
	}
	if err != nil && ctx.Err() == nil {
		return providerError(err.Error())
	}
	return err
}
