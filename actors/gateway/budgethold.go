package gateway

import (
	"cmp"
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
	// Remaining is the least left after the reservation.
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
	if g.cfg.NodeID != "" {
		return nil // cluster mode: not enforced per node (CreateBudget refuses; Start warns)
	}
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
// it, each durable before it returns; the budgets' shards reserve at
// once (their appends share the WAL's group commit). A budget it does not
// fit refuses the call with a *BudgetExceeded (ErrBudgetExceeded), and
// the reservations made are released. With no budget, the hold is empty
// (Active false) and nothing is written.
func (g *Gateway) ReserveBudgets(ctx context.Context, c BudgetCall) (*BudgetHold, error) {
	h := &BudgetHold{Remaining: BudgetRemaining{Nano: -1, Tokens: -1}}
	bs := g.budgetsFor(c)
	if len(bs) == 0 {
		return h, nil
	}
	h.id = g.newID(kindBudgetLedger)
	type reply struct {
		b   *budgetRec
		res reserveResult
		err error
	}
	replies := make(chan reply, len(bs))
	g.tenantAsks.Add(float64(len(bs)))
	for _, b := range bs {
		g.root.Send(g.tenants[g.tenantFor(budgetTenant(b.ID))], tenantCommand{run: func(t *tenantShard) {
			res, err := t.reserveBudget(b, h.id, c.Nano, c.Tokens)
			replies <- reply{b, res, err}
		}})
	}
	var first error
	for range bs {
		r, err := await(ctx, replies)
		if err != nil { // ctx ended: the shards may still reserve; the releases, sent after, undo it
			first = err
			break
		}
		switch {
		case r.err != nil:
			first = cmp.Or(first, r.err)
		case r.res.cap != "":
			g.budgetMx.refusals.WithLabelValues(r.b.Subject.Type).Inc()
			if first == nil {
				be := &BudgetExceeded{BudgetID: r.b.ID, Subject: r.b.Subject, Period: r.b.Period, Cap: r.res.cap, ResetsAt: r.res.resets}
				if !r.res.resets.IsZero() {
					be.RetryAfter = max(r.res.resets.Sub(g.clock.Now()), time.Second)
				}
				first = be
			}
		default:
			h.Remaining = h.Remaining.least(r.res.remNano, r.res.remTokens)
		}
	}
	h.budgets = bs
	if first != nil {
		g.SettleBudgets(h, 0, 0) // release: a no-op on the budgets that refused
		return nil, first
	}
	return h, nil
}

// SettleBudgets settles h at the call's actual cost and tokens and
// releases the rest. It does not wait: each budget's shard settles after
// the reservation (its mailbox is in order), and every later read of the
// budget sees it. A settlement that fails to be written is logged; the
// hold then stays outstanding and is settled at its full amount at the
// next start, as is one the process dies before writing.
func (g *Gateway) SettleBudgets(h *BudgetHold, nano, tokens int64) {
	if !h.Active() {
		return
	}
	id := h.id
	g.tenantAsks.Add(float64(len(h.budgets)))
	for _, b := range h.budgets {
		g.root.Send(g.tenants[g.tenantFor(budgetTenant(b.ID))], tenantCommand{run: func(t *tenantShard) {
			settled, err := t.settleBudget(b, id, nano, tokens)
			switch {
			case err != nil:
				t.lg.Warn("settle budget", "budget", b.ID, "err", err)
			case settled && nano > 0:
				g.budgetMx.spent.WithLabelValues(b.Subject.Type).Add(nanoUSD(nano))
			}
		}})
	}
	h.budgets = nil
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

// settleBudget settles hold id of budget b at nano and tokens; false
// when it is settled already (or its ledger deleted).
func (t *tenantShard) settleBudget(b *budgetRec, hold uuid.UUID, nano, tokens int64) (bool, error) {
	l := t.part.ledgers[b.ID]
	if l == nil || l.hold(hold) < 0 {
		return false, nil
	}
	ev := budgetSettled{Budget: b.ID, Hold: hold, Nano: nano, Tokens: tokens}
	if err := commitAll(t.log, t.part, ev); err != nil {
		return false, fmt.Errorf("log budget settlement: %w", err)
	}
	return true, nil
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
	if g.cfg.NodeID != "" {
		if n := len(g.view.Load().budgets.rows); n > 0 {
			g.lg.Warn("budgets are not enforced in cluster mode yet (docs/budgets.md)", "budgets", n)
		}
		return nil // the holds in the log may be other nodes' calls in flight
	}
	_, err := eachTenant(ctx, g, nil, func(t *tenantShard) (struct{}, error) { return struct{}{}, t.settleInterrupted() })
	return err
}
