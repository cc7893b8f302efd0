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

type putDelegation struct {
	rec   delegationRec
	reply chan error
}

type queryDelegations struct {
	f     DelegationFilter
	id    uuid.UUID
	reply chan delegationReply
}

type delegationReply struct {
	list  []Delegation
	total int
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
	m := putDelegation{rec: delegationRec(d), reply: make(chan error, 1)}
	g.root.Send(g.registry, m)
	err, werr := await(ctx, m.reply)
	return d, cmpErr(err, werr)
}

func (r *registry) putDelegation(m putDelegation) error {
	d := m.rec
	if err := commit(r.log, r.part, entitySaved{&d}); err != nil {
		return fmt.Errorf("log delegation: %w", err)
	}
	return nil
}

func (r *registry) queryDelegations(m queryDelegations) delegationReply {
	ds := r.part.delegations.newest(func(d *delegationRec) bool {
		return (m.id == uuid.Nil || d.ID == m.id) && m.f.matches(d)
	})
	lo, hi := page(len(ds), m.f.Offset, m.f.Limit, 50)
	out := make([]Delegation, 0, hi-lo)
	for _, d := range ds[lo:hi] {
		out = append(out, d.view())
	}
	return delegationReply{list: out, total: len(ds)}
}

// Delegations lists delegations matching f, newest first, with the total.
func (g *Gateway) Delegations(ctx context.Context, f DelegationFilter) ([]Delegation, int, error) {
	reply := make(chan delegationReply, 1)
	g.root.Send(g.registry, queryDelegations{f: f, reply: reply})
	r, err := await(ctx, reply)
	return r.list, r.total, err
}

// Delegation returns one delegation; ErrNotFound.
func (g *Gateway) Delegation(ctx context.Context, id uuid.UUID) (Delegation, error) {
	reply := make(chan delegationReply, 1)
	g.root.Send(g.registry, queryDelegations{id: id, f: DelegationFilter{Limit: 1}, reply: reply})
	r, err := await(ctx, reply)
	if err != nil {
		return Delegation{}, err
	}
	if len(r.list) == 0 {
		return Delegation{}, ErrNotFound
	}
	return r.list[0], nil
}
