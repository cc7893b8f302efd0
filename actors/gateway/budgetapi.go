package gateway

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// The budgets' API: create, read, update, delete and list, each budget
// shown with its ledger's numbers (asked of the ledger's tenant shard).

// CreateBudget creates a budget. ErrInvalid (naming the field),
// ErrNotFound (the agent or API
// key), ErrExists (the subject has a budget of that period).
func (g *Gateway) CreateBudget(ctx context.Context, in BudgetInput) (Budget, error) {
	return g.budgetCmd(ctx, g.newID(kindBudget), in, true)
}

// UpdateBudget changes budget id; absent fields keep their value.
func (g *Gateway) UpdateBudget(ctx context.Context, id string, in BudgetInput) (Budget, error) {
	uid, err := uuid.Parse(id)
	if err != nil {
		return Budget{}, ErrNotFound
	}
	return g.budgetCmd(ctx, uid, in, false)
}

func (g *Gateway) budgetCmd(ctx context.Context, id uuid.UUID, in BudgetInput, create bool) (Budget, error) {
	if in.Subject != nil && in.Subject.Type == SubjectAPIKey && create {
		kid, err := uuid.Parse(in.Subject.ID)
		if err != nil {
			return Budget{}, fmt.Errorf("subject.id: an API key id: %w", ErrInvalid)
		}
		keys, err := g.ListAPIKeys(ctx)
		if err != nil {
			return Budget{}, err
		}
		if !slices.ContainsFunc(keys, func(k APIKey) bool { return k.ID == kid }) {
			return Budget{}, fmt.Errorf("subject.id: API key %s: %w", kid, ErrNotFound)
		}
	}
	b, err := call(ctx, g, func(r *registry) (*budgetRec, error) { return r.putBudget(id, create, in) })
	if err != nil {
		return Budget{}, err
	}
	return g.budgetView(ctx, b)
}

// GetBudget returns budget id with its spend; ErrNotFound.
func (g *Gateway) GetBudget(ctx context.Context, id string) (Budget, error) {
	b, err := g.budgetRec(id)
	if err != nil {
		return Budget{}, err
	}
	return g.budgetView(ctx, b)
}

func (g *Gateway) budgetRec(id string) (*budgetRec, error) {
	uid, err := uuid.Parse(id)
	if err != nil {
		return nil, ErrNotFound
	}
	b, ok := g.view.Load().budgets.rows[uid]
	if !ok {
		return nil, ErrNotFound
	}
	return b, nil
}

// ListBudgets returns every budget with its spend, by subject then
// period.
func (g *Gateway) ListBudgets(ctx context.Context) ([]Budget, error) {
	v := g.view.Load()
	recs := make([]*budgetRec, 0, len(v.budgets.rows))
	for _, b := range v.budgets.rows {
		recs = append(recs, b)
	}
	return g.budgetViews(ctx, recs)
}

// MyBudgets returns the budgets that bind user: their own (or the
// default user budget), those of their API keys and those of the agents
// they own.
func (g *Gateway) MyBudgets(ctx context.Context, user string) ([]Budget, error) {
	if user == "" {
		return []Budget{}, nil
	}
	v := g.view.Load()
	recs := v.budgetsOf(BudgetSubject{SubjectUser, user}, nil)
	if len(recs) == 0 {
		if d, ok := g.defaultBudgetOf(user); ok {
			recs = append(recs, d)
		}
	}
	keys, err := g.ListAPIKeys(ctx)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k.UserID == user {
			recs = v.budgetsOf(BudgetSubject{SubjectAPIKey, k.ID.String()}, recs)
		}
	}
	for _, a := range v.agents.rows {
		if a.OwnerID == user {
			recs = v.budgetsOf(BudgetSubject{SubjectAgent, a.ID.String()}, recs)
		}
	}
	return g.budgetViews(ctx, recs)
}

// DeleteBudget removes budget id and its ledger; ErrNotFound.
func (g *Gateway) DeleteBudget(ctx context.Context, id string) error {
	uid, err := uuid.Parse(id)
	if err != nil {
		return ErrNotFound
	}
	if err := do(ctx, g, func(r *registry) error { return r.delBudget(uid) }); err != nil {
		return err
	}
	return g.dropLedger(ctx, uid)
}

// budgetView is b with its ledger's numbers.
func (g *Gateway) budgetView(ctx context.Context, b *budgetRec) (Budget, error) {
	vs, err := g.budgetViews(ctx, []*budgetRec{b})
	if err != nil {
		return Budget{}, err
	}
	return vs[0], nil
}

// budgetViews shows recs with their spend (asking each ledger's shard),
// sorted by subject, then period.
func (g *Gateway) budgetViews(ctx context.Context, recs []*budgetRec) ([]Budget, error) {
	now := g.clock.Now().UTC()
	out := make([]Budget, 0, len(recs))
	for _, b := range recs {
		sp, err := g.spendOf(ctx, b, now)
		if err != nil {
			return nil, fmt.Errorf("budget %s: %w", b.ID, err)
		}
		out = append(out, b.view(sp, now))
	}
	slices.SortFunc(out, func(x, y Budget) int {
		return cmp.Or(strings.Compare(x.Subject.Type, y.Subject.Type), strings.Compare(x.Subject.ID, y.Subject.ID),
			strings.Compare(x.Period, y.Period), cmpUUID(x.ID, y.ID))
	})
	return out, nil
}
