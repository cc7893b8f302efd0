package gateway

import (
	"errors"
	"fmt"
	"slices"
)

// budgetOp is the property test's budget command: create, change or
// delete a budget of a user or an agent, spend from the budgets of a
// user's run (records 74 and 75 through the allowances), or flush them.
// The gateway is its own model here: after each spend, no budget shows
// more spent than its caps.
func (p *prop) budgetOp() {
	c := ctx(p.t)
	switch x := p.r.IntN(10); {
	case x < 2:
		s := BudgetSubject{SubjectUser, pick(p, users)}
		if p.r.IntN(2) == 0 {
			_, id := p.anyAgent()
			if id == [16]byte{} {
				return
			}
			s = BudgetSubject{SubjectAgent, id.String()}
		}
		in := BudgetInput{Subject: &s, Period: ptr(pick(p, []string{PeriodDay, PeriodMonth, PeriodTotal})), MaxTokens: ptr(int64(5000 + p.r.IntN(50_000)))}
		if p.r.IntN(2) == 0 {
			in.MaxTokensPerMinute = ptr(int64(3000 + p.r.IntN(20_000)))
		}
		if _, err := p.gw.CreateBudget(c, in); err != nil && !errors.Is(err, ErrExists) && !errors.Is(err, ErrNotFound) {
			p.t.Fatalf("CreateBudget(%+v) = %v", in, err)
		}
	case x < 3 || x == 4:
		bs, err := p.gw.ListBudgets(c)
		if err != nil || len(bs) == 0 {
			return
		}
		b := pick(p, bs)
		if x == 4 {
			// Rather one that spent: its ledger goes too (71 budget_ledger).
			if spent := slices.DeleteFunc(slices.Clone(bs), func(b Budget) bool { return b.SpentTokens+b.ReservedTokens == 0 }); len(spent) > 0 {
				b = pick(p, spent)
			}
			if err := p.gw.DeleteBudget(c, b.ID.String()); err != nil {
				p.t.Fatalf("DeleteBudget = %v", err)
			}
			return
		}
		limit := int64(2000 + p.r.IntN(60_000))
		if limit < b.SpentTokens+b.ReservedTokens {
			p.lowered = append(p.lowered, b.ID) // spent may stay above it until the period ends
		}
		if _, err := p.gw.UpdateBudget(c, b.ID.String(), BudgetInput{MaxTokens: ptr(limit)}); err != nil {
			p.t.Fatalf("UpdateBudget = %v", err)
		}
	case x < 9:
		_, agent := p.anyAgent()
		call := BudgetCall{User: pick(p, users), Agent: agent, Tokens: int64(100 + p.r.IntN(3000))}
		for range 1 + p.r.IntN(5) {
			h, err := p.gw.ReserveBudgets(c, call)
			if errors.Is(err, ErrBudgetExceeded) {
				return
			}
			if err != nil {
				p.t.Fatalf("ReserveBudgets = %v", err)
			}
			p.gw.SettleBudgets(h, 0, p.r.Int64N(call.Tokens+1))
		}
		if p.r.IntN(3) == 0 { // as a tick would (record 75)
			if err := p.gw.FlushBudgets(c, false); err != nil {
				p.t.Fatal(err)
			}
		}
		p.checkBudgets()
	default:
		if err := p.gw.FlushBudgets(c, p.r.IntN(2) == 0); err != nil {
			p.t.Fatal(err)
		}
	}
}

// checkBudgets fails the test if a budget shows more spent and reserved
// than its caps.
func (p *prop) checkBudgets() {
	p.t.Helper()
	bs, err := p.gw.ListBudgets(ctx(p.t))
	if err != nil {
		p.t.Fatal(err)
	}
	for _, b := range bs {
		if b.MaxTokens != nil && b.SpentTokens > *b.MaxTokens && !slices.Contains(p.lowered, b.ID) {
			p.t.Fatalf("budget %s: %s", b.ID, fmt.Sprintf("spent %d tokens over its cap %d", b.SpentTokens, *b.MaxTokens))
		}
	}
}
