package gateway

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
)

// Allowances: a budget's calls do not each write to the log. The ledger's
// tenant shard reserves a chunk of the budget for this node, an
// allowance (a hold, record 74, durable before any call spends from it),
// and the calls spend from it in memory: a call takes its worst case from
// the allowance before the provider is called and gives back the rest
// when it ends. Every flush interval the shard settles (record 75) what
// the finished calls cost, and gives back the unspent rest of an allowance
// nobody spent from since the last flush, or that can no longer be spent
// (its period or, for a tokens-per-minute budget, its second is over).
//
// The invariant holds because a call only ever spends what a durable hold
// reserved: settled spend + holds never exceed the caps, and a call's
// actual cost is at most its worst case. A crash loses the allowance's
// in-memory figures; the restart settles each of this node's holds at its
// full amount (the calls since the last settlement may have been paid
// for), so a crash counts at most one allowance per budget as spent that
// was not (docs/budgets.md: chunkCalls and chunkShare bound it).
//
// In cluster mode each node takes its own allowances, under the budget's
// cluster lock, on a ledger that holds every hold taken before (the lock's
// rule), so two nodes never reserve the same money. A node that dies
// leaves its holds outstanding; it settles them at full when it starts
// again, or the others do once it has been gone OrphanedSummonAfter.
//
// The allowance is the only budget state outside the ledger's actor: the
// actor decides and records every hold; the calls only spend, under the
// allowance's own mutex (held for a few arithmetic operations), what the
// actor has recorded. It is what makes a budgeted call cost no message
// and no write.

// An allowance is this node's holds on one budget.
type allowance struct {
	mu     sync.Mutex
	grants []*grant // oldest first
	// rec is the budget as last drawn from (a default user budget is in
	// no registry view); seen the ledger's figures as its shard last
	// wrote them, for the callers' Remaining.
	rec  atomic.Pointer[budgetRec]
	seen atomic.Pointer[seenSpend]
}

// seenSpend is a ledger's spend in period.
type seenSpend struct {
	period string
	sp     spend
}

// recOf is the budget as a's holds were last taken under (nil: none).
func (a *allowance) recOf() *budgetRec {
	if a == nil {
		return nil
	}
	return a.rec.Load()
}

// A grant is one hold of this node: its amounts as the ledger holds them,
// and what this node's calls did with them since its last settlement.
type grant struct {
	id     uuid.UUID
	period string
	at     int64 // Unix second it was taken
	perSec bool  // the budget caps tokens per minute: spent from in second at only
	// nano, tokens are the hold's amounts in the ledger.
	nano, tokens int64
	// in* are the worst cases of the calls in flight; done* those of the
	// calls finished since the last settlement (W: worst case, A: actual).
	inN, inT       int64
	doneWN, doneWT int64
	doneAN, doneAT int64
	drawn          bool // a call spent from it since the last settlement
	closing        bool // giving back its rest: no call spends from it
}

// free is what is left to spend.
func (g *grant) free() (nano, tokens int64) {
	return g.nano - g.inN - g.doneWN, g.tokens - g.inT - g.doneWT
}

// usable reports whether a call of period at second now may spend from g.
func (g *grant) usable(period string, now int64) bool {
	return !g.closing && g.period == period && (!g.perSec || g.at == now)
}

// A draw is one call's worst case taken from a grant of a budget.
type draw struct {
	b            *budgetRec
	a            *allowance
	g            *grant
	nano, tokens int64
}

// take spends a call's worst case from a usable grant (the newest that
// fits); nil when none does.
func (a *allowance) take(period string, now, nano, tokens int64) *grant {
	for i := len(a.grants) - 1; i >= 0; i-- {
		g := a.grants[i]
		if !g.usable(period, now) {
			continue
		}
		if fn, ft := g.free(); fn >= nano && ft >= tokens {
			g.inN += nano
			g.inT += tokens
			g.drawn = true
			return g
		}
	}
	return nil
}

// end ends draw d: the call cost nano and tokens (0 if it was never made).
func (d draw) end(nano, tokens int64, made bool) {
	d.a.mu.Lock()
	defer d.a.mu.Unlock()
	d.g.inN -= d.nano
	d.g.inT -= d.tokens
	if made {
		d.g.doneWN += d.nano
		d.g.doneWT += d.tokens
		d.g.doneAN += nano
		d.g.doneAT += tokens
	}
}

// shown is a ledger's spend in period as this node shows it: the cost of
// the calls the allowance has not settled yet counted as spent, and the
// part of its holds that no call in flight holds not counted as reserved.
func (a *allowance) shown(sp spend, period string) spend {
	if a == nil {
		return sp
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, g := range a.grants {
		if g.period != period {
			continue
		}
		sp.spentNano += g.doneAN
		sp.spentTokens += g.doneAT
		sp.reservedNano -= g.nano - g.inN
		sp.reservedTokens -= g.tokens - g.inT
	}
	return sp
}

// settlement is one grant's settlement being written: what the ledger is
// told, and what the grant's figures lose once it is written.
type settlement struct {
	g              *grant
	ev             budgetSettled
	wN, wT, aN, aT int64 // done figures settled
	retN, retT     int64 // rest given back
}

// settlements computes the settlements of a's grants (written by node
// by) due at second now in period: every grant with finished calls, and every grant whose rest
// goes back (all; nobody spent from it since the last settlement; it can
// no longer be spent from). The grants being given back are closed.
func (a *allowance) settlements(budget uuid.UUID, by, period string, now int64, all bool, dst []settlement) []settlement {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, g := range a.grants {
		s := settlement{g: g, wN: g.doneWN, wT: g.doneWT, aN: g.doneAN, aT: g.doneAT}
		if all || !g.drawn || !g.usable(period, now) {
			s.retN, s.retT = g.free()
			g.closing = true
		}
		g.drawn = false
		if s.wN == 0 && s.wT == 0 && s.aN == 0 && s.aT == 0 && s.retN == 0 && s.retT == 0 &&
			(g.nano != 0 || g.tokens != 0 || g.inN != 0 || g.inT != 0) {
			continue // nothing to tell the ledger
		}
		s.ev = budgetSettled{Budget: budget, Hold: g.id, By: by, Nano: s.aN, Tokens: s.aT,
			KeepNano: g.nano - s.wN - s.retN, KeepTokens: g.tokens - s.wT - s.retT}
		dst = append(dst, s)
	}
	return dst
}

// settled applies the outcome of writing ss: written, the grants lose
// what was settled and given back, and those left with nothing go;
// otherwise they reopen, their figures kept for the next flush.
func (a *allowance) settled(ss []settlement, written bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range ss {
		g := s.g
		if !written {
			g.closing = false
			continue
		}
		g.doneWN -= s.wN
		g.doneWT -= s.wT
		g.doneAN -= s.aN
		g.doneAT -= s.aT
		g.nano, g.tokens = s.ev.KeepNano, s.ev.KeepTokens
	}
	a.grants = slices.DeleteFunc(a.grants, func(g *grant) bool {
		return g.nano == 0 && g.tokens == 0 && g.inN == 0 && g.inT == 0 && g.doneAN == 0 && g.doneAT == 0
	})
}

// drop forgets grant id (the ledger settled it: another node did, for a
// node it took for gone; or the budget was deleted).
func (a *allowance) drop(id uuid.UUID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.grants = slices.DeleteFunc(a.grants, func(g *grant) bool { return g.id == id })
}
