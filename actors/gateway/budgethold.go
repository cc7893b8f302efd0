package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/actors"
)

// Enforcement: ReserveBudgets before each provider call, SettleBudgets
// after it (actors/gateway/agentrun/budget.go calls them). A call spends
// from this node's allowance on each budget (budgetallow.go); only when an
// allowance runs dry does the call ask the ledger's tenant shard for
// another, durable before the call is made, under the budget's cluster
// lock in cluster mode.

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
	draws []draw
	// Remaining is the least left after the reservation.
	Remaining BudgetRemaining
}

// Active reports whether the hold reserved anything (a budget applied).
func (h *BudgetHold) Active() bool { return h != nil && len(h.draws) > 0 }

// budgetMetrics are the budgets' Prometheus series.
type budgetMetrics struct {
	spent    *prometheus.CounterVec
	refusals *prometheus.CounterVec
	// spentBy are spent's series by subject type, looked up once (every
	// budgeted call adds to them).
	spentBy map[string]prometheus.Counter
}

func newBudgetMetrics() *budgetMetrics {
	m := &budgetMetrics{
		spent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_budget_spent_usd_total",
			Help: "USD settled against budgets, by subject type (a call charged to several budgets counts in each).",
		}, []string{"subject_type"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_budget_refusals_total",
			Help: "Provider calls refused because their worst case did not fit a budget, by the refusing budget's subject type.",
		}, []string{"subject_type"}),
		spentBy: map[string]prometheus.Counter{},
	}
	for _, s := range []string{SubjectUser, SubjectAgent, SubjectAPIKey} {
		m.spentBy[s] = m.spent.WithLabelValues(s)
	}
	return m
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
	if len(v.budgets.rows) == 0 && g.cfg.DefaultUserBudget.Period == "" {
		return nil
	}
	out := make([]*budgetRec, 0, 4)
	var idb [36]byte
	if c.KeyID != uuid.Nil {
		out = v.budgetsOfID(SubjectAPIKey, appendUUID(idb[:0], c.KeyID), out)
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
		out = v.budgetsOfID(SubjectAgent, appendUUID(idb[:0], c.Agent), out)
	}
	slices.SortFunc(out, func(x, y *budgetRec) int { return cmpUUID(x.ID, y.ID) })
	return out
}

// BudgetSet is the budgets that bind a call (BudgetsFor).
type BudgetSet struct{ bs []*budgetRec }

// Empty reports whether no budget binds the call.
func (s BudgetSet) Empty() bool { return len(s.bs) == 0 }

// BudgetsFor is the budgets that bind call c (its amounts are not read).
func (g *Gateway) BudgetsFor(c BudgetCall) BudgetSet { return BudgetSet{g.budgetsFor(c)} }

// ReserveBudgets reserves c's worst case against every budget that binds
// it, from this node's allowance on each; an allowance that runs dry is
// refilled by the budget's shard, durable before it returns. A budget it
// does not fit refuses the call with a *BudgetExceeded
// (ErrBudgetExceeded), and what was reserved on the others is given back.
// With no budget, the hold is empty (Active false).
func (g *Gateway) ReserveBudgets(ctx context.Context, c BudgetCall) (*BudgetHold, error) {
	return g.ReserveBudgetsIn(ctx, g.BudgetsFor(c), c)
}

// ReserveBudgetsIn is ReserveBudgets against set, the budgets BudgetsFor
// found for c.
func (g *Gateway) ReserveBudgetsIn(ctx context.Context, set BudgetSet, c BudgetCall) (*BudgetHold, error) {
	h := &BudgetHold{Remaining: BudgetRemaining{Nano: -1, Tokens: -1}}
	bs := set.bs
	if len(bs) == 0 {
		return h, nil
	}
	now := g.clock.Now().UTC()
	h.draws = make([]draw, 0, len(bs))
	for _, b := range bs {
		d, res, err := g.drawBudget(ctx, b, c.Nano, c.Tokens, now)
		if err == nil && res.cap != "" {
			g.budgetMx.refusals.WithLabelValues(b.Subject.Type).Inc()
			err = &BudgetExceeded{BudgetID: b.ID, Subject: b.Subject, Period: b.Period, Cap: res.cap, ResetsAt: res.resets}
			if !res.resets.IsZero() {
				err.(*BudgetExceeded).RetryAfter = max(res.resets.Sub(g.clock.Now()), time.Second)
			}
		}
		if err != nil {
			for _, d := range h.draws {
				d.end(0, 0, false)
			}
			return nil, err
		}
		h.draws = append(h.draws, d)
		h.Remaining = h.Remaining.least(res.remNano, res.remTokens)
	}
	return h, nil
}

// drawBudget takes a call's worst case from this node's allowance on b,
// asking b's shard for another hold when it runs dry.
func (g *Gateway) drawBudget(ctx context.Context, b *budgetRec, nano, tokens int64, now time.Time) (draw, reserveResult, error) {
	a := g.allowanceOf(b.ID)
	if r := a.recOf(); r != nil && r.UpdatedAt.Equal(b.UpdatedAt) { // a changed budget: its holds go back first
		period := periodKey(b.Period, now) // a hold never belongs to a later period than now's
		a.mu.Lock()
		gr := a.take(period, now.Unix(), nano, tokens)
		a.mu.Unlock()
		if gr != nil {
			return draw{b: b, a: a, g: gr, nano: nano, tokens: tokens}, g.remainingAfter(b, a, period), nil
		}
	}
	if g.budgetLock != nil {
		unlock, err := g.budgetLock.Lock(ctx, "budget/"+b.ID.String())
		if err != nil {
			return draw{}, reserveResult{}, fmt.Errorf("budget %s: %w", b.ID, err)
		}
		defer unlock()
	}
	// In cluster mode a hold is decided when the log applies it (a hold
	// another node appended first makes it void): a void one is decided
	// again, on a ledger that now holds the other.
	for range maxHoldTries {
		o, err := g.askGrant(ctx, b, nano, tokens, now)
		if err != nil || o.wait == nil {
			return o.d, o.res, err
		}
		h, err := awaitHold(ctx, o.wait)
		if err != nil {
			return draw{}, reserveResult{}, err
		}
		if !h.void {
			return h.d, h.res, nil
		}
	}
	return draw{}, reserveResult{}, fmt.Errorf("budget %s: %d holds in a row taken by other nodes first: %w", b.ID, maxHoldTries, actors.ErrUnavailable)
}

// askGrant asks b's shard for a draw or a new hold.
func (g *Gateway) askGrant(ctx context.Context, b *budgetRec, nano, tokens int64, now time.Time) (grantOut, error) {
	reply := make(chan grantOut, 1)
	g.tenantAsks.Inc()
	g.send(ctx, g.tenants[g.tenantFor(budgetTenant(b.ID))], tenantCommand{run: func(t *tenantShard) {
		reply <- t.grantBudget(g, b, nano, tokens, now)
	}})
	o, err := await(ctx, reply)
	if err != nil {
		// The caller left: the shard may still take the draw, which then
		// goes back when it does.
		go func() {
			o := <-reply
			if o.d.g != nil {
				o.d.end(0, 0, false)
			}
			if o.wait != nil {
				if h := <-o.wait; h.d.g != nil {
					h.d.end(0, 0, false)
				}
			}
		}()
		return grantOut{}, err
	}
	return o, o.err
}

// allowanceOf is this node's allowance on budget id (nil: none yet).
func (g *Gateway) allowanceOf(id uuid.UUID) *allowance {
	a, _ := g.allow.Load(id)
	al, _ := a.(*allowance)
	return al
}

// remainingAfter is what is left of b after a draw from a, as the
// ledger's figures last seen by a's shard show it (the header's figure:
// informative, not enforcing).
func (g *Gateway) remainingAfter(b *budgetRec, a *allowance, period string) reserveResult {
	var res reserveResult
	var sp spend
	if s := a.seen.Load(); s != nil && s.period == period {
		sp = s.sp
	}
	res.remNano, res.remTokens = a.shown(sp, period).remaining(b.limits())
	return res
}

// SettleBudgets ends h's draws at the call's actual cost and tokens: what
// the call did not use is free again at once, and the shards settle the
// cost at their next flush. It does not wait.
func (g *Gateway) SettleBudgets(h *BudgetHold, nano, tokens int64) {
	if !h.Active() {
		return
	}
	for _, d := range h.draws {
		d.end(nano, tokens, true)
		if nano > 0 {
			g.budgetMx.spentBy[d.b.Subject.Type].Add(nanoUSD(nano))
		}
	}
	h.draws = nil
}

// BudgetRemainingFor is the least left among the budgets that bind c
// (false: none binds it).
func (g *Gateway) BudgetRemainingFor(ctx context.Context, c BudgetCall) (BudgetRemaining, bool, error) {
	bs := g.budgetsFor(c)
	rem := BudgetRemaining{Nano: -1, Tokens: -1}
	if len(bs) == 0 {
		return rem, false, nil
	}
	now := g.clock.Now().UTC()
	for _, b := range bs {
		// From this node's allowance when it has one (no message: the
		// figures its shard last wrote, and its calls since), else from
		// the ledger's shard.
		if a := g.allowanceOf(b.ID); a != nil {
			if s := a.seen.Load(); s != nil && s.period == periodKey(b.Period, now) {
				res := g.remainingAfter(b, a, s.period)
				rem = rem.least(res.remNano, res.remTokens)
				continue
			}
		}
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

// Chunks: a hold is the call's worst case times chunkCalls, at most
// chunkShare of each cap (and an eighth of a tokens-per-minute cap), at
// least the call's worst case, at most what is left. A crash counts at
// most one hold per budget and node as spent that was not.
const (
	chunkCalls = 1024
	chunkShare = 32 // 1/32 of a cap
)

// chunk is the amount of one dimension to hold for a call needing need,
// under a cap (< 0: none) with avail left.
func chunk(need, capOf, avail int64, share int64) int64 {
	c := need * chunkCalls
	if capOf >= 0 {
		c = min(c, capOf/share)
	}
	c = max(c, need)
	if avail >= 0 {
		c = min(c, avail)
	}
	return c
}

// grantBudget spends a call's worst case from this node's allowance on b,
// or takes a new hold for it (durable when it returns), or refuses it
// when even the node's unspent holds given back would not make it fit.
func (t *tenantShard) grantBudget(g *Gateway, b *budgetRec, nano, tokens int64, now time.Time) grantOut {
	if cur, ok := g.view.Load().budgets.rows[b.ID]; ok {
		b = cur // the caller's view may be older than the shard's
	}
	a, changed := t.allowance(g, b)
	l := t.part.ledgers[b.ID]
	period := l.periodFor(b.Period, now)
	sec := now.Unix()
	if changed {
		// The budget changed (a lower cap, another period): what this
		// node holds was taken under the old one and goes back.
		if err := t.settleAllowance(b.ID, a, period, sec, true); err != nil {
			return grantOut{err: err}
		}
		a.rec.Store(b) // the callers' fast path is open again, on holds of this version only
		l = t.part.ledgers[b.ID]
	} else {
		a.mu.Lock()
		gr := a.take(period, sec, nano, tokens) // another call's hold came in meanwhile
		a.mu.Unlock()
		if gr != nil {
			return grantOut{d: draw{b: b, a: a, g: gr, nano: nano, tokens: tokens}, res: g.remainingAfter(b, a, period)}
		}
	}
	lim := b.limits()
	s := t.spendWith(a, l, period, sec)
	if s.refusal(lim, nano, tokens) != "" {
		// The rest of this node's holds may make it fit once given back.
		if err := t.settleAllowance(b.ID, a, period, sec, true); err != nil {
			return grantOut{err: err}
		}
		l = t.part.ledgers[b.ID]
		s = t.spendWith(a, l, period, sec)
	}
	if why := s.refusal(lim, nano, tokens); why != "" {
		res := reserveResult{cap: why}
		res.remNano, res.remTokens = s.remaining(lim)
		if why == "max_tokens_per_minute" {
			res.resets = t.minuteFrees(l, lim, tokens, now)
		} else if r, ok := resetOf(b.Period, now); ok {
			res.resets = r
		}
		return grantOut{res: res}
	}
	// What the ledger leaves for a hold (spent, and every node's holds,
	// this node's own included: the ledger's figures, not the shown
	// ones, which count this node's finished calls at their cost and its
	// unspent rests as free).
	holds := func() (holdN, holdT int64) {
		ls := t.part.ledgers[b.ID].spendAt(period, sec)
		availN, availT := int64(-1), int64(-1)
		if lim.nano >= 0 {
			availN = lim.nano - ls.spentNano - ls.reservedNano
		}
		if lim.tokens > 0 {
			availT = lim.tokens - ls.spentTokens - ls.reservedTokens
		}
		holdT = chunk(tokens, capOrNone(lim.tokens), availT, chunkShare)
		if lim.tpm > 0 {
			holdT = min(holdT, max(tokens, lim.tpm/8), lim.tpm-ls.minuteTokens)
		}
		return chunk(nano, lim.nano, availN, chunkShare), holdT
	}
	holdN, holdT := holds()
	if holdN < nano || holdT < tokens {
		// The shown figures fit but the ledger's do not yet: this node's
		// finished calls and unspent rests are not settled. Once they
		// are, the ledger shows what the shown figures did.
		if err := t.settleAllowance(b.ID, a, period, sec, true); err != nil {
			return grantOut{err: err}
		}
		if holdN, holdT = holds(); holdN < nano || holdT < tokens {
			res := reserveResult{cap: "max_usd"}
			if holdT < tokens {
				res.cap = "max_tokens"
			}
			if r, ok := resetOf(b.Period, now); ok {
				res.resets = r
			}
			return grantOut{res: res}
		}
	}
	id := g.newID(kindBudgetLedger)
	ev := budgetReserved{Budget: b.ID, Hold: id, Period: period, Nano: holdN, Tokens: holdT, At: sec, Node: g.cfg.NodeID}
	// The calls finished on this node's holds are settled in the same
	// write: the holds they emptied go, so an allowance keeps a few holds
	// however long between two flushes.
	ss := a.settlements(b.ID, t.node, period, sec, false, nil)
	evs := make([]event, 0, len(ss)+1)
	for _, s := range ss {
		evs = append(evs, s.ev)
	}
	if ev.Node != "" {
		return t.appendClusterHold(b, a, ev, nano, tokens, ss, evs)
	}
	err := commitAll(t.log, t.part, append(evs, ev)...)
	a.settled(ss, err == nil)
	if err != nil {
		return grantOut{err: fmt.Errorf("log budget reservation: %w", err)}
	}
	gr := &grant{id: id, period: period, at: sec, perSec: lim.tpm > 0, nano: holdN, tokens: holdT,
		inN: nano, inT: tokens, drawn: true}
	a.mu.Lock()
	a.grants = append(a.grants, gr)
	a.mu.Unlock()
	t.publishSeen(a, b.ID, period, sec)
	return grantOut{d: draw{b: b, a: a, g: gr, nano: nano, tokens: tokens}, res: g.remainingAfter(b, a, period)}
}

func capOrNone(c int64) int64 {
	if c > 0 {
		return c
	}
	return -1
}

// allowance is this node's allowance on budget b, made on first use;
// changed when its holds were taken under another version of b.
func (t *tenantShard) allowance(g *Gateway, b *budgetRec) (a *allowance, changed bool) {
	a = t.allow[b.ID]
	if a == nil {
		a = &allowance{}
		if t.allow == nil {
			t.allow = map[uuid.UUID]*allowance{}
		}
		t.allow[b.ID] = a
		g.allow.Store(b.ID, a)
		a.rec.Store(b)
	} else if r := a.rec.Load(); r == nil || !r.UpdatedAt.Equal(b.UpdatedAt) {
		changed = true // the caller stores b once the old holds are back
	}
	return a, changed
}

// publishSeen gives a the ledger's figures for the callers' Remaining.
func (t *tenantShard) publishSeen(a *allowance, id uuid.UUID, period string, now int64) {
	a.seen.Store(&seenSpend{period: period, sp: t.part.ledgers[id].spendAt(period, now)})
}

// spendWith is the ledger's spend in period as the API shows it: the
// node's unsettled calls counted as spent, and its holds' unspent parts
// not counted as reserved.
func (t *tenantShard) spendWith(a *allowance, l *ledgerRec, period string, now int64) spend {
	return a.shown(l.spendAt(period, now), period)
}

// settleAllowance writes the settlements of a's grants due now (all: give
// back every unspent rest).
func (t *tenantShard) settleAllowance(id uuid.UUID, a *allowance, period string, now int64, all bool) error {
	ss := a.settlements(id, t.node, period, now, all, nil)
	if len(ss) == 0 {
		return nil
	}
	evs := make([]event, len(ss))
	for i, s := range ss {
		evs[i] = s.ev
	}
	err := t.appendBudget(evs...)
	a.settled(ss, err == nil)
	if err != nil {
		return fmt.Errorf("log budget settlement: %w", err)
	}
	t.publishSeen(a, id, period, now)
	return nil
}

// flushBudgets settles every allowance of the shard (Tick; all: give back
// every unspent rest, at a graceful stop). An allowance whose budget is
// gone is forgotten.
func (t *tenantShard) flushBudgets(g *Gateway, now time.Time, all bool) error {
	v := g.view.Load()
	var errs []error
	for id, a := range t.allow {
		b, ok := v.budgets.rows[id]
		if !ok {
			b = a.rec.Load()
			ok = b != nil && b.defaultUser
		}
		if !ok || t.part.ledgers[id] == nil {
			delete(t.allow, id) // the budget is gone (its ledger with it)
			g.allow.Delete(id)
			continue
		}
		period := t.part.ledgers[id].periodFor(b.Period, now)
		if err := t.settleAllowance(id, a, period, now.Unix(), all); err != nil {
			errs = append(errs, fmt.Errorf("budget %s: %w", id, err))
		}
		a.mu.Lock()
		empty := len(a.grants) == 0
		a.mu.Unlock()
		if empty {
			delete(t.allow, id)
			g.allow.Delete(id)
		}
	}
	return errors.Join(errs...)
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

// settleInterrupted settles, at their full amount, the holds of the
// nodes whose holds must end (gone): this node's, which a restart found
// outstanding (their calls died with the process, and their providers may
// have been paid), or a node's that left the cluster. One write.
func (t *tenantShard) settleInterrupted(gone func(node string) bool) error {
	var evs []event
	ids := make([]uuid.UUID, 0, len(t.part.ledgers))
	for id := range t.part.ledgers {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, cmpUUID)
	for _, id := range ids {
		for _, h := range t.part.ledgers[id].Holds {
			if gone(h.Node) {
				evs = append(evs, budgetSettled{Budget: id, Hold: h.ID, By: t.node, Nano: h.Nano, Tokens: h.Tokens, Interrupted: true})
			}
		}
	}
	if len(evs) == 0 {
		return nil
	}
	return t.appendBudget(evs...)
}

// spendOf is b's spend in the period of now, from its ledger's shard,
// with this node's calls not settled yet counted as spent.
func (g *Gateway) spendOf(ctx context.Context, b *budgetRec, now time.Time) (spend, error) {
	return callTenant(ctx, g, g.tenantFor(budgetTenant(b.ID)), func(t *tenantShard) (spend, error) {
		l := t.part.ledgers[b.ID]
		return t.spendWith(t.allow[b.ID], l, l.periodFor(b.Period, now), now.Unix()), nil
	})
}

// dropLedger deletes budget id's ledger (after the budget).
func (g *Gateway) dropLedger(ctx context.Context, id uuid.UUID) error {
	_, err := callTenant(ctx, g, g.tenantFor(budgetTenant(id)), func(t *tenantShard) (struct{}, error) {
		delete(t.allow, id)
		g.allow.Delete(id)
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

// settleInterruptedHolds settles this node's holds a restart found
// outstanding (recoverAtStart): every hold on a single node; in cluster
// mode those this node took (the others' may be calls in flight).
func (g *Gateway) settleInterruptedHolds(ctx context.Context) error {
	self := g.cfg.NodeID
	_, err := eachTenant(ctx, g, nil, func(t *tenantShard) (struct{}, error) {
		return struct{}{}, t.settleInterrupted(func(node string) bool { return self == "" || node == self })
	})
	return err
}

// FlushBudgets settles what this node's budgeted calls cost since the
// last flush, and gives back every hold's unspent rest (all) or only
// those nobody spends from. Tick flushes; Close flushes all.
func (g *Gateway) FlushBudgets(ctx context.Context, all bool) error {
	now := g.clock.Now().UTC()
	_, err := eachTenant(ctx, g, nil, func(t *tenantShard) (struct{}, error) {
		return struct{}{}, t.flushBudgets(g, now, all)
	})
	if err != nil {
		return fmt.Errorf("flush budgets: %w", err)
	}
	return nil
}

// tickBudgets flushes the shards' allowances (Tick: not waiting).
func (g *Gateway) tickBudgets(now time.Time) {
	for _, pid := range g.tenants {
		g.root.Send(pid, tenantCommand{run: func(t *tenantShard) {
			if len(t.allow) == 0 {
				return
			}
			if err := t.flushBudgets(g, now, false); err != nil {
				t.lg.Warn("settle budgets", "err", err)
			}
		}})
	}
}

var _ actors.Flusher = (*Gateway)(nil)

// Flush settles every budget allowance and gives back its unspent rest
// (System.Close, before the final snapshot): a graceful stop counts
// nothing as spent that was not. It also appends the runs the runs
// actor is still gathering (runLinger) and waits for their commit.
func (g *Gateway) Flush(ctx context.Context) error {
	return errors.Join(g.FlushBudgets(ctx, true), g.syncRuns(ctx))
}
