package gateway

import (
	"context"
	"strconv"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
)

// Budgets (docs/budgets.md): admins set them on users, agents and API
// keys; a user reads their own with GET /v1/budgets?mine=true (their user
// budget or the default one, their keys', their agents'). Chat answers
// carry X-Gateway-Budget-Remaining when a budget binds the run.

// BudgetStore is what the budget routes need from the gateway. Safe for
// concurrent use.
type BudgetStore interface {
	CreateBudget(ctx context.Context, in gateway.BudgetInput) (gateway.Budget, error)
	UpdateBudget(ctx context.Context, id string, in gateway.BudgetInput) (gateway.Budget, error)
	GetBudget(ctx context.Context, id string) (gateway.Budget, error)
	ListBudgets(ctx context.Context) ([]gateway.Budget, error)
	MyBudgets(ctx context.Context, user string) ([]gateway.Budget, error)
	DeleteBudget(ctx context.Context, id string) error
	// BudgetRemainingFor is the least left among the budgets binding c
	// (false: none binds it).
	BudgetRemainingFor(ctx context.Context, c gateway.BudgetCall) (gateway.BudgetRemaining, bool, error)
}

var _ BudgetStore = (*gateway.Gateway)(nil)

// BudgetRemainingHeader is the header of chat answers that names the
// least left among the run's budgets: "usd=1.234567;tokens=12000" (each
// part only when a budget caps it).
const BudgetRemainingHeader = "X-Gateway-Budget-Remaining"

type budgetList struct {
	Data []gateway.Budget `json:"data"`
}

type budgetListIn struct {
	Mine bool `query:"mine" json:"-"`
}

// listBudgets lists every budget (admin), or the caller's own (mine=true,
// and always for a caller without the admin scope: it reads nothing
// else).
func (s *Server) listBudgets(ctx context.Context, c Caller, in budgetListIn) (budgetList, error) {
	if in.Mine || !c.Trusted() {
		if c.UserID == "" {
			return budgetList{}, errUserRequired
		}
		bs, err := s.d.Budgets.MyBudgets(ctx, c.UserID)
		return budgetList{Data: bs}, err
	}
	bs, err := s.d.Budgets.ListBudgets(ctx)
	return budgetList{Data: bs}, err
}

type budgetIn struct {
	gateway.BudgetInput
}

func (s *Server) createBudget(ctx context.Context, _ Caller, in budgetIn) (gateway.Budget, error) {
	return s.d.Budgets.CreateBudget(ctx, in.BudgetInput)
}

type budgetUpdateIn struct {
	ID string `path:"id" json:"-"`
	gateway.BudgetInput
}

func (s *Server) getBudget(ctx context.Context, _ Caller, in idIn) (gateway.Budget, error) {
	return s.d.Budgets.GetBudget(ctx, in.ID)
}

func (s *Server) updateBudget(ctx context.Context, _ Caller, in budgetUpdateIn) (gateway.Budget, error) {
	return s.d.Budgets.UpdateBudget(ctx, in.ID, in.BudgetInput)
}

func (s *Server) deleteBudget(ctx context.Context, _ Caller, in idIn) (None, error) {
	return None{}, s.d.Budgets.DeleteBudget(ctx, in.ID)
}

// budgetRemaining is the X-Gateway-Budget-Remaining value for a run of
// agent by c ("" when no budget binds it, or it cannot be read).
func (s *Server) budgetRemaining(ctx context.Context, c Caller, agent uuid.UUID) string {
	rem, ok, err := s.d.Budgets.BudgetRemainingFor(ctx, gateway.BudgetCall{KeyID: c.KeyID, User: c.UserID, Agent: agent})
	if err != nil || !ok {
		return ""
	}
	return formatRemaining(rem)
}

// formatRemaining renders rem as "usd=1.234567;tokens=12000" (one
// allocation: it is on every budgeted answer).
func formatRemaining(rem gateway.BudgetRemaining) string {
	var buf [64]byte
	b := buf[:0]
	if rem.Nano >= 0 {
		b = strconv.AppendFloat(append(b, "usd="...), float64(rem.Nano)/1e9, 'f', 6, 64)
	}
	if rem.Tokens >= 0 {
		if len(b) > 0 {
			b = append(b, ';')
		}
		b = strconv.AppendInt(append(b, "tokens="...), rem.Tokens, 10)
	}
	return string(b)
}

// budgetHeader is the X-Gateway-Budget-Remaining header of a chat
// answer for the body's user (nil when no budget binds the run).
func (s *Server) budgetHeader(ctx context.Context, c Caller, bodyUser string, agent uuid.UUID) map[string]string {
	if p, err := runPrincipal(c, bodyUser); err == nil {
		c.UserID = p.User // the run's user: a trusted caller may name it in the body
	}
	if rem := s.budgetRemaining(ctx, c, agent); rem != "" {
		return map[string]string{BudgetRemainingHeader: rem}
	}
	return nil
}
