package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
)

// Enforcement: ReserveBudgets before each provider call, SettleBudgets
// after it (actors/gateway/runtime/budget.go calls them). Each budget's
// reservation is one operation of its ledger's tenant shard, so the
// reservations of one budget are serialized by one actor, and each is
// durable before the call is made.

// ErrBudgetExceeded: a call's worst case does not fit a budget.
var ErrBudgetExceeded = errors.New("gateway: budget exceeded")

// BudgetExceeded is the refusal of a call by a budget: which one, which
// cap, and when its period resets (zero for a total budget).
type BudgetExceeded struct {
	BudgetID uuid.UUID
	Subject  BudgetSubject
	Period   string
	Cap      string // max_usd, max_tokens or max_tokens_per_minute
	ResetsAt time.Time
	// RetryAfter is ResetsAt less the gateway clock's now (0 for total).
	RetryAfter time.Duration
}

func (e *BudgetExceeded) Error() string {
	what := "the " + e.Period + " budget"
	if e.Cap == "max_tokens_per_minute" {
		what = "the tokens-per-minute limit of the " + e.Period + " budget"
	}
	return fmt.Sprintf("%s of %s %s is spent (%s)", what, e.Subject.Type, e.Subject.ID, e.Cap)
}

// Is makes errors.Is(err, ErrBudgetExceeded) true.
func (e *BudgetExceeded) Is(target error) bool { return target == ErrBudgetExceeded }

// BudgetCall is one provider call to charge: who it is for, and its worst
// case.
type BudgetCall struct {
	KeyID  uuid.UUID // the calling API key (uuid.Nil: none)
	User   string    // the run's user ("" : none)
	Agent  uuid.UUID // the agent that runs
	Nano   int64     // nano-USD (pricing.Nano)
	Tokens int64
}

// BudgetRemaining is the least left among the budgets of a call: USD
// and tokens, each -1 when no budget caps it.
type BudgetRemaining struct {
	Nano   int64
	Tokens int64
}

// least keeps the smaller of each figure (-1: none).
func (r BudgetRemaining) least(nano, tokens int64) BudgetRemaining {
	if nano >= 0 && (r.Nano < 0 || nano < r.Nano) {
		r.Nano = nano
	}
	if tokens >= 0 && (r.Tokens < 0 || tokens < r.Tokens) {
		r.Tokens = tokens
	}
	return r
}

// BudgetHold is a call's reservations, to settle once with SettleBudgets.
type BudgetHold struct {
	id      uuid.UUID
	budgets []*budgetRec
	// Remaining is the least left after the reservation (after
	// SettleBudgets: after the settlement).
	Remaining BudgetRemaining
}

// Active reports whether the hold reserved anything (a budget applied).
func (h *BudgetHold) Active() bool { return h != nil && len(h.budgets) > 0 }

// budgetMetrics are the budgets' Prometheus series.
type budgetMetrics struct {
	spent    *prometheus.CounterVec
	refusals *prometheus.CounterVec
}

func newBudgetMetrics() *budgetMetrics {
	return &budgetMetrics{
		spent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_budget_spent_usd_total",
			Help: "USD settled against budgets, by subject type (a call charged to several budgets counts in each).",
		}, []string{"subject_type"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_budget_refusals_total",
			Help: "Provider calls refused because their worst case did not fit a budget, by the refusing budget's subject type.",
		}, []string{"subject_type"}),
	}
}

// startBudgets registers the budgets' metrics on reg (nil: none).
func (g *Gateway) startBudgets(reg prometheus.Registerer) error {
	g.budgetMx = newBudgetMetrics()
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{g.budgetMx.spent, g.budgetMx.refusals} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("budget metrics: %w", err)
		}
	}
	return nil
}

// budgetsFor lists the budgets that bind call c: the key's, the user's (or
// the default user budget) and the agent's, by id.
func (g *Gateway) budgetsFor(c BudgetCall) []*budgetRec {
	v := g.view.Load()
	var out []*budgetRec
	if c.KeyID != uuid.Nil {
		out = v.budgetsOf(BudgetSubject{SubjectAPIKey, c.KeyID.String()}, out)
	}
	if c.User != "" {
		n := len(out)
		out = v.budgetsOf(BudgetSubject{SubjectUser, c.User}, out)
		if len(out) == n {
			if d, ok := g.defaultBudgetOf(c.User); ok {
				out = append(out, d)
			}
		}
	}
	if c.Agent != uuid.Nil {
		out = v.budgetsOf(BudgetSubject{SubjectAgent, c.Agent.String()}, out)
	}
	slices.SortFunc(out, func(x, y *budgetRec) int { return cmpUUID(x.ID, y.ID) })
	return out
}

// HasBudgets reports whether any budget binds call c (its amounts are
// not read).
func (g *Gateway) HasBudgets(c BudgetCall) bool { return len(g.budgetsFor(c)) > 0 }

// ReserveBudgets reserves c's worst case against every budget that binds
// it, each durable before it returns. A budget it does not fit refuses
// the call with a *BudgetExceeded (ErrBudgetExceeded), and the
// reservations already made are released. With no budget, the hold is
// empty (Active false) and nothing is written.
func (g *Gateway) ReserveBudgets(ctx context.Context, c BudgetCall) (*BudgetHold, error) {
	h := &BudgetHold{Remaining: BudgetRemaining{Nano: -1, Tokens: -1}}
	bs := g.budgetsFor(c)
	if len(bs) == 0 {
		return h, nil
	}
	h.id = g.newID(kindBudgetLedger)
	for _, b := range bs {
		res, err := callTenant(ctx, g, g.tenantFor(budgetTenant(b.ID)), func(t *tenantShard) (reserveResult, error) {
			return t.reserveBudget(b, h.id, c.Nano, c.Tokens)
		})
		if err == nil && res.cap != "" {
			g.budgetMx.refusals.WithLabelValues(b.Subject.Type).Inc()
			err = &BudgetExceeded{BudgetID: b.ID, Subject: b.Subject, Period: b.Period, Cap: res.cap, ResetsAt: res.resets}
			if !res.resets.IsZero() {
				err.(*BudgetExceeded).RetryAfter = max(res.resets.Sub(g.clock.Now()), time.Second)
			}
		}
		if err != nil {
			if res.cap == "" {
				// The wait failed (ctx ended): the shard may still make
				// this reservation; the release, sent after it, undoes it.
				h.budgets = append(h.budgets, b)
			}
			g.SettleBudgets(h, 0, 0) // release what was reserved
			return nil, err
		}
		h.budgets = append(h.budgets, b)
		h.Remaining = h.Remaining.least(res.remNano, res.remTokens)
	}
	return h, nil
}

// settleTimeout bounds a settlement, which runs even when the call's
// context has ended.
const settleTimeout = 10 * time.Second

// SettleBudgets settles h at the call's actual cost and tokens and
// releases the rest; it runs whatever the caller's context (a cancelled
// call settles too). A failure is logged: the hold stays outstanding and
// is settled at its full amount at the next start.
func (g *Gateway) SettleBudgets(h *BudgetHold, nano, tokens int64) {
	if !h.Active() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	rem := BudgetRemaining{Nano: -1, Tokens: -1}
	for _, b := range h.budgets {
		res, err := callTenant(ctx, g, g.tenantFor(budgetTenant(b.ID)), func(t *tenantShard) (reserveResult, error) {
			return t.settleBudget(b, h.id, nano, tokens)
		})
		if err != nil {
			g.lg.Warn("settle budget", "budget", b.ID, "err", err)
			continue
		}
		if nano > 0 {
			g.budgetMx.spent.WithLabelValues(b.Subject.Type).Add(nanoUSD(nano))
		}
		rem = rem.least(res.remNano, res.remTokens)
	}
	h.budgets = nil
	h.Remaining = rem
}

// BudgetRemainingFor is the least left among the budgets that bind c
// (false: none binds it).
func (g *Gateway) BudgetRemainingFor(ctx context.Context, c BudgetCall) (BudgetRemaining, bool, error) {
	bs := g.budgetsFor(c)
	rem := BudgetRemaining{Nano: -1, Tokens: -1}
	if len(bs) == 0 {
		return rem, false, nil
	}
	now := g.clock.Now()
	for _, b := range bs {
		sp, err := g.spendOf(ctx, b, now)
		if err != nil {
			return rem, true, err
		}
		rem = rem.least(sp.remaining(b.limits()))
	}
	return rem, true, nil
}

// reserveResult is a shard's answer to a reservation or settlement: the
// refused cap ("" : it fits) and what is left.
type reserveResult struct {
	cap                string
	resets             time.Time
	remNano, remTokens int64
}

// reserveBudget reserves nano and tokens of budget b under hold id, unless
// they do not fit.
func (t *tenantShard) reserveBudget(b *budgetRec, hold uuid.UUID, nano, tokens int64) (reserveResult, error) {
	now := t.clock.Now().UTC()
	l := t.part.ledgers[b.ID]
	period := l.periodFor(b.Period, now)
	lim := b.limits()
	s := l.spendAt(period, now.Unix())
	if why := s.refusal(lim, nano, tokens); why != "" {
		res := reserveResult{cap: why}
		res.remNano, res.remTokens = s.remaining(lim)
		if why == "max_tokens_per_minute" {
			res.resets = t.minuteFrees(l, lim, tokens, now)
		} else if r, ok := resetOf(b.Period, now); ok {
			res.resets = r
		}
		return res, nil
	}
	ev := budgetReserved{Budget: b.ID, Hold: hold, Period: period, Nano: nano, Tokens: tokens, At: now.Unix()}
	if err := commitAll(t.log, t.part, ev); err != nil {
		return reserveResult{}, fmt.Errorf("log budget reservation: %w", err)
	}
	var res reserveResult
	res.remNano, res.remTokens = t.part.ledgers[b.ID].spendAt(period, now.Unix()).remaining(lim)
	return res, nil
}

// minuteFrees is when enough of the minute window has passed for tokens
// to fit lim.tpm (an estimate: settlements may free more sooner).
func (t *tenantShard) minuteFrees(l *ledgerRec, lim budgetLimits, tokens int64, now time.Time) time.Time {
	used := l.spendAt("", now.Unix()).minuteTokens
	for _, w := range l.Window {
		if w.At <= now.Unix()-tpmWindow {
			continue
		}
		if used+tokens <= lim.tpm {
			break
		}
		used -= w.Tokens
		if used+tokens <= lim.tpm {
			return time.Unix(w.At+tpmWindow, 0).UTC()
		}
	}
	return now.Add(tpmWindow * time.Second)
}

// settleBudget settles hold id of budget b at nano and tokens.
func (t *tenantShard) settleBudget(b *budgetRec, hold uuid.UUID, nano, tokens int64) (reserveResult, error) {
	l := t.part.ledgers[b.ID]
	if l == nil || l.hold(hold) < 0 {
		return reserveResult{remNano: -1, remTokens: -1}, nil // settled already (or its ledger deleted)
	}
	ev := budgetSettled{Budget: b.ID, Hold: hold, Nano: nano, Tokens: tokens}
	if err := commitAll(t.log, t.part, ev); err != nil {
		return reserveResult{}, fmt.Errorf("log budget settlement: %w", err)
	}
	now := t.clock.Now().UTC()
	var res reserveResult
	res.remNano, res.remTokens = l.spendAt(l.periodFor(b.Period, now), now.Unix()).remaining(b.limits())
	return res, nil
}

// settleInterrupted settles, at their full amount, the holds a restart
// found outstanding: their calls died with the process, and their
// providers may have been paid. One write; done before anyone calls.
func (t *tenantShard) settleInterrupted() error {
	var evs []event
	ids := make([]uuid.UUID, 0, len(t.part.ledgers))
	for id := range t.part.ledgers {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, cmpUUID)
	for _, id := range ids {
		for _, h := range t.part.ledgers[id].Holds {
			evs = append(evs, budgetSettled{Budget: id, Hold: h.ID, Nano: h.Nano, Tokens: h.Tokens, Interrupted: true})
		}
	}
	if len(evs) == 0 {
		return nil
	}
	return commitAll(t.log, t.part, evs...)
}

// spendOf is b's spend in the period of now, from its ledger's shard.
func (g *Gateway) spendOf(ctx context.Context, b *budgetRec, now time.Time) (spend, error) {
	return callTenant(ctx, g, g.tenantFor(budgetTenant(b.ID)), func(t *tenantShard) (spend, error) {
		l := t.part.ledgers[b.ID]
		return l.spendAt(l.periodFor(b.Period, now), now.Unix()), nil
	})
}

// dropLedger deletes budget id's ledger (after the budget).
func (g *Gateway) dropLedger(ctx context.Context, id uuid.UUID) error {
	_, err := callTenant(ctx, g, g.tenantFor(budgetTenant(id)), func(t *tenantShard) (struct{}, error) {
		if _, ok := t.part.ledgers[id]; !ok {
			return struct{}{}, nil
		}
		return struct{}{}, commitAll(t.log, t.part, entityDeleted{kind: kindBudgetLedger, id: id})
	})
	if err != nil {
		return fmt.Errorf("delete ledger of budget %s: %w", id, err)
	}
	return nil
}

// settleInterruptedHolds settles every hold a restart found outstanding
// (recoverAtStart).
func (g *Gateway) settleInterruptedHolds(ctx context.Context) error {
	_, err := eachTenant(ctx, g, nil, func(t *tenantShard) (struct{}, error) { return struct{}{}, t.settleInterrupted() })
	return err
}
