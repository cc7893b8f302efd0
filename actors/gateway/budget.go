package gateway

import (
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
)

// Budgets cap what a user, an agent or a gateway API key may spend, in
// USD and tokens per UTC day, UTC month or in total, and in tokens per
// minute (docs/budgets.md). A budget's definition is a registry entity
// (kind budget, read from the registry's view by every call); its spend,
// the ledger, lives on the tenant shard of its id (budgetledger.go), which
// serializes the reservations of the calls charged to it.

// Budget subject types.
const (
	SubjectUser   = "user"
	SubjectAgent  = "agent"
	SubjectAPIKey = "api_key"
)

// Budget periods.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
	PeriodTotal = "total"
)

// BudgetSubject is who a budget caps.
type BudgetSubject struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

func (s BudgetSubject) String() string { return s.Type + " " + s.ID }

// Budget is a budget as the API shows it, with its spend in the current
// period. MaxUSD, MaxTokens and MaxTokensPerMinute are nil when unset.
type Budget struct {
	ID                 uuid.UUID     `json:"id"`
	Subject            BudgetSubject `json:"subject"`
	Period             string        `json:"period"`
	MaxUSD             *float64      `json:"max_usd"`
	MaxTokens          *int64        `json:"max_tokens"`
	MaxTokensPerMinute *int64        `json:"max_tokens_per_minute"`
	SpentUSD           float64       `json:"spent_usd"`
	SpentTokens        int64         `json:"spent_tokens"`
	ReservedUSD        float64       `json:"reserved_usd"`
	ReservedTokens     int64         `json:"reserved_tokens"`
	// ResetsAt is when the period ends (nil for total).
	ResetsAt  *time.Time `json:"resets_at"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	// Default marks the configured default user budget
	// (gateway.default_user_budget) shown for a user without one.
	Default bool `json:"default,omitempty"`
}

// BudgetInput creates or replaces a budget. On update, absent fields keep
// their value; the subject cannot change.
type BudgetInput struct {
	Subject            *BudgetSubject `json:"subject"`
	Period             *string        `json:"period"`
	MaxUSD             *float64       `json:"max_usd"`
	MaxTokens          *int64         `json:"max_tokens"`
	MaxTokensPerMinute *int64         `json:"max_tokens_per_minute"`
}

// DefaultBudget is gateway.default_user_budget: the budget of every user
// without one of their own. Zero (Period ""): none.
type DefaultBudget struct {
	Period    string  `json:"period"`
	MaxUSD    float64 `json:"max_usd,omitempty"`
	MaxTokens int64   `json:"max_tokens,omitempty"`
}

// Validate names the bad field.
func (d DefaultBudget) Validate() error {
	if d.Period == "" && d.MaxUSD == 0 && d.MaxTokens == 0 {
		return nil
	}
	switch {
	case !validPeriod(d.Period):
		return fmt.Errorf("gateway.default_user_budget.period: day, month or total")
	case d.MaxUSD < 0 || d.MaxTokens < 0 || math.IsNaN(d.MaxUSD) || math.IsInf(d.MaxUSD, 0):
		return fmt.Errorf("gateway.default_user_budget: max_usd and max_tokens must be >= 0")
	case d.MaxUSD == 0 && d.MaxTokens == 0:
		return fmt.Errorf("gateway.default_user_budget: max_usd or max_tokens required")
	}
	return nil
}

// budgetRec is a budget's definition (kind budget, data v1).
type budgetRec struct {
	ID          uuid.UUID     `json:"id"`
	Subject     BudgetSubject `json:"subject"`
	Period      string        `json:"period"`
	MaxNano     int64         `json:"max_nano,omitempty"`
	HasUSD      bool          `json:"has_usd,omitempty"`
	MaxTokens   int64         `json:"max_tokens,omitempty"`
	MaxTPM      int64         `json:"max_tokens_per_minute,omitempty"`
	CreatedAt   time.Time     `json:"created_at"`
	UpdatedAt   time.Time     `json:"updated_at"`
	defaultUser bool          // the configured default user budget (never logged)
}

func (b *budgetRec) ref() (kind, uuid.UUID) { return kindBudget, b.ID }

// budgetName is the registry's unique index of budgets: one per subject
// and period.
func budgetName(b *budgetRec) string { return subjectPeriod(b.Subject, b.Period) }

func subjectPeriod(s BudgetSubject, period string) string {
	return s.Type + "\x00" + s.ID + "\x00" + period
}

// limits are the budget's caps as the ledger checks them.
func (b *budgetRec) limits() budgetLimits {
	l := budgetLimits{period: b.Period, tokens: b.MaxTokens, tpm: b.MaxTPM, nano: -1}
	if b.HasUSD {
		l.nano = b.MaxNano
	}
	return l
}

// view is the budget as the API shows it, with its ledger's numbers as
// of now.
func (b *budgetRec) view(sp spend, now time.Time) Budget {
	v := Budget{ID: b.ID, Subject: b.Subject, Period: b.Period, CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt,
		SpentUSD: nanoUSD(sp.spentNano), SpentTokens: sp.spentTokens,
		ReservedUSD: nanoUSD(sp.reservedNano), ReservedTokens: sp.reservedTokens, Default: b.defaultUser}
	if b.HasUSD {
		usd := nanoUSD(b.MaxNano)
		v.MaxUSD = &usd
	}
	if b.MaxTokens > 0 {
		v.MaxTokens = &b.MaxTokens
	}
	if b.MaxTPM > 0 {
		v.MaxTokensPerMinute = &b.MaxTPM
	}
	if r, ok := resetOf(b.Period, now); ok {
		v.ResetsAt = &r
	}
	return v
}

func validPeriod(p string) bool { return p == PeriodDay || p == PeriodMonth || p == PeriodTotal }

// defaultBudgetNS is the namespace of the default user budget's ids.
var defaultBudgetNS = uuid.MustParse("0d7b6e0c-51a2-4c47-9a8e-3b2f7c1e9d44")

// defaultBudgetOf is user's default budget (the configured one), with an
// id derived from the user, so its ledger is found again after a restart.
func (g *Gateway) defaultBudgetOf(user string) (*budgetRec, bool) {
	d := g.cfg.DefaultUserBudget
	if user == "" || d.Period == "" {
		return nil, false
	}
	b := &budgetRec{ID: uuid.NewSHA1(defaultBudgetNS, []byte(user)), Subject: BudgetSubject{SubjectUser, user},
		Period: d.Period, MaxTokens: d.MaxTokens, defaultUser: true}
	if d.MaxUSD > 0 {
		b.HasUSD, b.MaxNano = true, usdNano(d.MaxUSD)
	}
	return b, true
}

// putBudget validates and logs a budget's new state.
func (r *registry) putBudget(id uuid.UUID, create bool, in BudgetInput) (*budgetRec, error) {
	now := r.clock.Now().UTC()
	var b budgetRec
	if create {
		b = budgetRec{ID: id, CreatedAt: now}
		if in.Subject == nil {
			return nil, fmt.Errorf("subject: required: %w", ErrInvalid)
		}
		b.Subject = *in.Subject
	} else {
		cur, ok := r.part.budgets.rows[id]
		if !ok {
			return nil, ErrNotFound
		}
		b = *cur
		if in.Subject != nil && *in.Subject != cur.Subject {
			return nil, fmt.Errorf("subject: cannot change (delete the budget and create another): %w", ErrInvalid)
		}
	}
	if in.Period != nil {
		b.Period = *in.Period
	}
	if err := r.applyMax(&b, in); err != nil {
		return nil, err
	}
	if err := r.checkSubject(&b); err != nil {
		return nil, err
	}
	if o, ok := r.part.budgets.named(budgetName(&b)); ok && o.ID != b.ID {
		return nil, fmt.Errorf("budget of %s per %s: %w", b.Subject, b.Period, ErrExists)
	}
	b.UpdatedAt = now
	verb := verbOf(create)
	au := audit{action: "budget." + verb, entityType: string(kindBudget), entityID: b.ID.String(),
		summary: fmt.Sprintf("%sd the %s budget of %s", verb, b.Period, b.Subject)}
	if err := r.commit(au, entitySaved{&b}); err != nil {
		return nil, fmt.Errorf("log budget: %w", err)
	}
	return &b, nil
}

// applyMax sets b's caps from in and checks that one is set.
func (r *registry) applyMax(b *budgetRec, in BudgetInput) error {
	if in.MaxUSD != nil {
		switch usd := *in.MaxUSD; {
		case usd < 0 || math.IsNaN(usd) || usd > 1e9:
			return fmt.Errorf("max_usd: must be in 0..1e9: %w", ErrInvalid)
		default:
			b.HasUSD, b.MaxNano = true, usdNano(usd)
		}
	}
	if in.MaxTokens != nil {
		if *in.MaxTokens < 0 {
			return fmt.Errorf("max_tokens: must be >= 0: %w", ErrInvalid)
		}
		b.MaxTokens = *in.MaxTokens
	}
	if in.MaxTokensPerMinute != nil {
		if *in.MaxTokensPerMinute < 0 {
			return fmt.Errorf("max_tokens_per_minute: must be >= 0: %w", ErrInvalid)
		}
		b.MaxTPM = *in.MaxTokensPerMinute
	}
	switch {
	case !validPeriod(b.Period):
		return fmt.Errorf("period: day, month or total: %w", ErrInvalid)
	case !b.HasUSD && b.MaxTokens == 0 && b.MaxTPM == 0:
		return fmt.Errorf("max_usd, max_tokens or max_tokens_per_minute: at least one required: %w", ErrInvalid)
	}
	return nil
}

// checkSubject checks b's subject and puts an agent's in its canonical
// form (the id, also when given by agent_key).
func (r *registry) checkSubject(b *budgetRec) error {
	s := &b.Subject
	switch s.Type {
	case SubjectUser:
		if s.ID == "" || len(s.ID) > 256 {
			return fmt.Errorf("subject.id: a user id of 1..256 characters: %w", ErrInvalid)
		}
	case SubjectAgent:
		a, ok := r.part.agents.get(s.ID)
		if !ok {
			return fmt.Errorf("subject.id: agent %q: %w", s.ID, ErrNotFound)
		}
		s.ID = a.ID.String()
	case SubjectAPIKey:
		if _, err := uuid.Parse(s.ID); err != nil {
			return fmt.Errorf("subject.id: an API key id: %w", ErrInvalid)
		}
		// The key lives on its key shard: Gateway.budgetCmd checked it.
	default:
		return fmt.Errorf("subject.type: user, agent or api_key: %w", ErrInvalid)
	}
	return nil
}

func (r *registry) delBudget(id uuid.UUID) error {
	b, ok := r.part.budgets.rows[id]
	if !ok {
		return ErrNotFound
	}
	au := audit{action: "budget.delete", entityType: string(kindBudget), entityID: b.ID.String(),
		summary: fmt.Sprintf("deleted the %s budget of %s", b.Period, b.Subject)}
	if err := r.commit(au, entityDeleted{kind: kindBudget, id: id}); err != nil {
		return fmt.Errorf("log budget delete: %w", err)
	}
	return nil
}

// budgetsOf lists the budgets of subject s (one per period at most).
// Every provider call looks its budgets up: the names are built on the
// stack (a map lookup by string(bytes) does not allocate).
func (p *registryPart) budgetsOf(s BudgetSubject, dst []*budgetRec) []*budgetRec {
	var buf [64]byte
	return p.budgetsOfID(s.Type, append(buf[:0], s.ID...), dst)
}

// budgetsOfID is budgetsOf for a subject whose id is in bytes (an agent's
// or a key's uuid, formatted on the caller's stack).
func (p *registryPart) budgetsOfID(typ string, id []byte, dst []*budgetRec) []*budgetRec {
	if len(p.budgets.rows) == 0 {
		return dst
	}
	var buf [96]byte
	k := append(append(append(append(buf[:0], typ...), 0), id...), 0)
	for _, period := range [...]string{PeriodDay, PeriodMonth, PeriodTotal} {
		if b, ok := p.budgets.namedBytes(append(k, period...)); ok {
			dst = append(dst, b)
		}
	}
	return dst
}

// appendUUID appends u in its canonical text form (uuid.UUID.String,
// without the allocation).
func appendUUID(dst []byte, u uuid.UUID) []byte {
	const hexd = "0123456789abcdef"
	for i, b := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hexd[b>>4], hexd[b&0xf])
	}
	return dst
}

// nanoUSD shows nano-USD as USD (pricing.Nano.USD; the gateway's state
// does not depend on the pricing package).
func nanoUSD(n int64) float64 { return float64(n) / 1e9 }

// usdNano is USD in nano-USD, rounded up (pricing.FromUSD); float noise
// below a thousandth of a nano is not rounded up.
func usdNano(usd float64) int64 { return int64(math.Ceil(usd*1e9 - 1e-3)) } // 1e-3: float noise is not a nano
