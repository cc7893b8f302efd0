package gateway

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Delegations: one agent's run asking another agent (the delegate
// built-in). Each ends in one record, kept in the registry's newest
// Config.MaxActivity.

// Delegation statuses are the run statuses (RunOK, RunFailed, RunTimeout).

// Delegation is one delegated task.
type Delegation struct {
	ID            uuid.UUID `json:"id"`
	SourceAgentID uuid.UUID `json:"source_agent_id"`
	TargetAgentID uuid.UUID `json:"target_agent_id"`
	UserID        string    `json:"user_id"`
	Task          string    `json:"task"`
	Status        string    `json:"status"`
	Result        string    `json:"result"`
	Error         string    `json:"error"`
	DurationMs    int64     `json:"duration_ms"`
	TraceID       string    `json:"trace_id"`
	CreatedAt     time.Time `json:"created_at"`
	CompletedAt   time.Time `json:"completed_at"`
}

// MaxDelegationText bounds a delegation's task and result as kept.
const MaxDelegationText = 2000

type delegationRec Delegation

func (d *delegationRec) ref() (kind, uuid.UUID) { return kindDelegation, d.ID }
func (d *delegationRec) view() Delegation       { return Delegation(*d) }

// DelegationFilter selects delegations; zero fields match everything.
type DelegationFilter struct {
	SourceAgentID, TargetAgentID uuid.UUID
	UserID, Status               string
	Limit, Offset                int // Limit 0: 50
}

func (f DelegationFilter) matches(d *delegationRec) bool {
	return (f.SourceAgentID == uuid.Nil || d.SourceAgentID == f.SourceAgentID) &&
		(f.TargetAgentID == uuid.Nil || d.TargetAgentID == f.TargetAgentID) &&
		(f.UserID == "" || d.UserID == f.UserID) && (f.Status == "" || d.Status == f.Status)
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// RecordDelegation stores a finished delegation (task and result
// truncated to MaxDelegationText); its ID is drawn when zero.
func (g *Gateway) RecordDelegation(ctx context.Context, d Delegation) (Delegation, error) {
	if d.ID == uuid.Nil {
		id, err := uuid.NewV7()
		if err != nil {
			return d, err
		}
		d.ID = id
	}
	d.Task, d.Result = truncateText(d.Task, MaxDelegationText), truncateText(d.Result, MaxDelegationText)
	d.CreatedAt, d.CompletedAt = d.CreatedAt.UTC(), d.CompletedAt.UTC()
	rec := delegationRec(d)
	return d, do(ctx, g, func(r *registry) error { return r.putDelegation(rec) })
}

func (r *registry) putDelegation(d delegationRec) error {
	if err := commit(r.log, r.part, entitySaved{&d}); err != nil {
		return fmt.Errorf("log delegation: %w", err)
	}
	return nil
}

// queryDelegations returns the delegations matching f (and id, unless
// uuid.Nil), newest first.
func (r regView) queryDelegations(f DelegationFilter, id uuid.UUID) []*delegationRec {
	return r.part.delegations.newest(func(d *delegationRec) bool {
		return (id == uuid.Nil || d.ID == id) && f.matches(d)
	})
}

// Delegations lists delegations matching f, newest first, with the total.
func (g *Gateway) Delegations(ctx context.Context, f DelegationFilter) ([]Delegation, int, error) {
	ds, err := g.delegations(ctx, f, uuid.Nil)
	if err != nil {
		return nil, 0, err
	}
	lo, hi := page(len(ds), f.Offset, f.Limit, 50)
	out := make([]Delegation, 0, hi-lo)
	for _, d := range ds[lo:hi] {
		out = append(out, d.view())
	}
	return out, len(ds), nil
}

// delegations reads the delegations matching f and id (uuid.Nil: any),
// newest first.
func (g *Gateway) delegations(ctx context.Context, f DelegationFilter, id uuid.UUID) ([]*delegationRec, error) {
	return read(ctx, g, func(r regView) ([]*delegationRec, error) { return r.queryDelegations(f, id), nil })
}

// Delegation returns one delegation; ErrNotFound.
func (g *Gateway) Delegation(ctx context.Context, id uuid.UUID) (Delegation, error) {
	ds, err := g.delegations(ctx, DelegationFilter{}, id)
	if err != nil {
		return Delegation{}, err
	}
	if len(ds) == 0 {
		return Delegation{}, ErrNotFound
	}
	return ds[0].view(), nil
}
