package agentrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun/llm"
)

// Budgets (docs/budgets.md): before each provider call of a run, the
// call's worst case is reserved against every budget that binds the run
// (the calling API key's, the user's or the default user budget, the
// agent's); after it, whatever its outcome, its actual cost is settled and
// the rest released. Tool-loop iterations, retries, fallbacks and
// delegations are calls of their own, each charged to the same budgets (a
// delegation runs for the same user and key).

// Budgets is what the runtime needs to enforce budgets: the gateway.
type Budgets interface {
	// BudgetsFor is the budgets that bind c.
	BudgetsFor(c gateway.BudgetCall) gateway.BudgetSet
	// ReserveBudgetsIn reserves c against set, the budgets that bind it:
	// a *gateway.BudgetExceeded when one refuses (the others released).
	ReserveBudgetsIn(ctx context.Context, set gateway.BudgetSet, c gateway.BudgetCall) (*gateway.BudgetHold, error)
	// SettleBudgets settles h at the actual nano-USD and tokens, whatever
	// the caller's context.
	SettleBudgets(h *gateway.BudgetHold, nano, tokens int64)
}

// Prices prices a model's calls (the gateway's price table, package
// pricing: Price.WorstCase and Price.Cost, in nano-USD).
type Prices interface {
	// WorstCaseNano is the most a call to model on p may cost: input
	// tokens at most promptBytes + 8 per message at the higher of the
	// input and cache-write prices, plus maxTokens at the output price;
	// known false when the model has no price (it then costs 0).
	WorstCaseNano(p gateway.Provider, model string, promptBytes int64, messages int, maxTokens int64) (nano int64, known bool)
	// CostNano is what a call to model on p that used these tokens costs
	// (llm.Result's convention: prompt includes the cache parts).
	CostNano(p gateway.Provider, model string, prompt, completion, cacheRead, cacheWrite int64) int64
}

var (
	_ Budgets = (*gateway.Gateway)(nil)
	_ Prices  = (*gateway.Gateway)(nil)
)

// budgetHook is the runtime's budgets (nil: none enforced).
type budgetHook struct {
	b            Budgets
	prices       Prices
	requireKnown bool
	bounds       sync.Map // provider id → *providerBound
}

// providerBound is a provider's settings that bound a call's output, as
// of its UpdatedAt (read once per version, not per call).
type providerBound struct {
	updatedAt                 time.Time
	maxTokens, thinkingBudget int
}

// boundOf is p's providerBound.
func (bh *budgetHook) boundOf(p gateway.Provider) *providerBound {
	if v, ok := bh.bounds.Load(p.ID); ok {
		if pb := v.(*providerBound); pb.updatedAt.Equal(p.UpdatedAt) {
			return pb
		}
	}
	var st struct {
		MaxTokens      int `json:"max_tokens"`
		ThinkingBudget int `json:"thinking_budget_tokens"`
	}
	if len(p.Settings) > 0 {
		_ = json.Unmarshal(p.Settings, &st) // the provider's settings were validated when saved
	}
	pb := &providerBound{updatedAt: p.UpdatedAt, maxTokens: st.MaxTokens, thinkingBudget: st.ThinkingBudget}
	bh.bounds.Store(p.ID, pb)
	return pb
}

// DefaultBudgetMaxTokens is the max_tokens a call bound by a budget is
// sent with when neither the client, the agent nor the provider's
// settings.max_tokens set one: the gateway reserves for what it sends.
const DefaultBudgetMaxTokens = 4096

// ErrBudget: a budget refused a call (errors.Is on a *BudgetError).
var ErrBudget = errors.New("runtime: budget exceeded")

// BudgetError ends a run whose next provider call does not fit a budget:
// nothing was sent to the provider.
type BudgetError struct {
	// Subject and Period name the budget; Cap is the cap that refused.
	Subject gateway.BudgetSubject
	Period  string
	Cap     string
	// RetryAfter is the wait until the budget resets (0 for a total
	// budget: it never does).
	RetryAfter time.Duration
	cause      error
}

func (e *BudgetError) Error() string { return e.cause.Error() }

// Unwrap gives ErrBudget and the gateway's refusal.
func (e *BudgetError) Unwrap() []error { return []error{ErrBudget, e.cause} }

// callHold is one call's reservation, settled by settle.
type callHold struct {
	h     *gateway.BudgetHold
	tg    target
	price bool // the target has a price
}

// reserve reserves the worst case of req to tg against rn's budgets, and
// sets req.MaxTokens to the bound it reserved for. With no budget binding
// the run, it only refuses an unpriced model under require_known.
func (bh *budgetHook) reserve(ctx context.Context, rn *Run, tg target, req *llm.Request) (*callHold, error) {
	if bh == nil {
		return nil, nil
	}
	c := gateway.BudgetCall{KeyID: rn.keyID, User: rn.user, Agent: rn.Agent.ID}
	set := bh.b.BudgetsFor(c)
	bound := !set.Empty()
	if bound {
		pb := bh.boundOf(tg.p)
		req.MaxTokens = boundFor(req.MaxTokens, pb.maxTokens, pb.thinkingBudget)
	}
	// Each tool costs a message's overhead too (its wrapping in the
	// provider's template), beyond its schema's bytes.
	in, parts := promptBytes(req), len(req.Messages)+len(req.Tools)
	known := false
	if bh.prices != nil {
		c.Nano, known = bh.prices.WorstCaseNano(tg.p, tg.model, in, parts, int64(req.MaxTokens))
	}
	if !known && bh.requireKnown {
		return nil, fmt.Errorf("model %q of provider %s has no price and pricing.require_known is set: %w", tg.model, tg.p.Name, gateway.ErrDisabled)
	}
	if !bound {
		return nil, nil
	}
	c.Tokens = in + 8*int64(parts) + int64(req.MaxTokens)
	h, err := bh.b.ReserveBudgetsIn(ctx, set, c)
	var be *gateway.BudgetExceeded
	if errors.As(err, &be) {
		return nil, &BudgetError{Subject: be.Subject, Period: be.Period, Cap: be.Cap, RetryAfter: be.RetryAfter, cause: err}
	}
	if err != nil {
		return nil, fmt.Errorf("reserve budgets: %w", err)
	}
	return &callHold{h: h, tg: tg, price: known}, nil
}

// settle settles ch at the cost of res (a failed call that reported no
// usage costs nothing), whatever the call's context.
func (bh *budgetHook) settle(ch *callHold, res Result) {
	if ch == nil {
		return
	}
	var nano int64
	if ch.price {
		nano = bh.prices.CostNano(ch.tg.p, ch.tg.model, res.PromptTokens, res.CompletionTokens, res.CacheReadTokens, res.CacheWriteTokens)
	}
	bh.b.SettleBudgets(ch.h, nano, res.PromptTokens+res.CompletionTokens)
}

// promptBytes is what a call sends as input: its messages' content, tool
// calls and results, and its tools' schemas.
func promptBytes(req *llm.Request) int64 {
	var n int64
	for _, m := range req.Messages {
		n += int64(len(m.Role) + len(m.Content) + len(m.ToolCallID))
		for _, tc := range m.ToolCalls {
			n += int64(len(tc.ID) + len(tc.Function.Name) + len(tc.Function.Arguments))
		}
		for _, th := range m.Thinking {
			n += int64(len(th.Text) + len(th.Signature) + len(th.Redacted))
		}
	}
	for _, t := range req.Tools {
		n += int64(len(t.Function.Name) + len(t.Function.Description) + len(t.Function.Parameters))
	}
	return n
}

// boundFor is the max_tokens a call bound by a budget is sent with: n,
// else the provider's settings.max_tokens (maxTokens), else
// DefaultBudgetMaxTokens; above settings.thinking_budget_tokens
// (thinkingBudget) when there is one (raised as the
// Anthropic client would raise it, so that what is sent is what was
// reserved).
func boundFor(n, maxTokens, thinkingBudget int) int {
	if n <= 0 {
		n = maxTokens
	}
	if n <= 0 {
		n = DefaultBudgetMaxTokens
	}
	if thinkingBudget > 0 && n <= thinkingBudget {
		n = thinkingBudget + llm.DefaultMaxTokens
	}
	return n
}
