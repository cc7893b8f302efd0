package gateway

import (
	"context"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
)

// AgentStore is what the agents routes need. user is the caller's
// X-Gateway-User-Id; ref is an agent's id or agent_key. Safe for
// concurrent use.
type AgentStore interface {
	// CreateAgent errors: ErrExists, ErrInvalid.
	CreateAgent(ctx context.Context, user string, in gateway.AgentInput) (gateway.Agent, error)
	// UpdateAgent errors: ErrNotFound, ErrForbidden (not the owner),
	// ErrExists, ErrInvalid.
	UpdateAgent(ctx context.Context, user, ref string, in gateway.AgentInput) (gateway.Agent, error)
	// GetAgent returns an agent user owns or that is shared with user;
	// ErrNotFound for any other.
	GetAgent(ctx context.Context, user, ref string) (gateway.Agent, error)
	ListAgents(ctx context.Context, user string) ([]gateway.Agent, error)
	// DeleteAgent errors: ErrNotFound, ErrForbidden.
	DeleteAgent(ctx context.Context, user, ref string) error
	// Resummon puts an agent back into summoning: ErrInUse while it is,
	// ErrInvalid without a description, ErrNotFound, ErrForbidden.
	Resummon(ctx context.Context, user, ref string) (gateway.Agent, error)
	// FinishSummon records a summon's outcome; ErrInUse when the agent is
	// no longer summoning.
	FinishSummon(ctx context.Context, id uuid.UUID, prompt, failure string) (gateway.Agent, error)
	// DefaultAgent is the agent a run that names none uses for user: the
	// agent_key default, else an is_default agent; ErrNotFound.
	DefaultAgent(ctx context.Context, user string) (gateway.Agent, error)
}

var _ AgentStore = (*gateway.Gateway)(nil)

// agentUpdate is PUT /v1/agents/{id}: absent fields keep their value.
type agentUpdate struct {
	ID string `path:"id" json:"-"`
	gateway.AgentInput
}

type agentList struct {
	Data []gateway.Agent `json:"data"`
}

// listAgents lists the agents c's user may use; a trusted backend acting
// for no user (the gateway token without X-Gateway-User-Id) lists every
// agent, as /v1/models does. An untrusted key bound to no user has none
// to list.
func (s *Server) listAgents(ctx context.Context, c Caller, _ None) (agentList, error) {
	if c.UserID == "" && !c.Trusted() {
		return agentList{Data: []gateway.Agent{}}, nil
	}
	as, err := s.d.Agents.ListAgents(ctx, c.principal().AgentReader())
	if err != nil {
		return agentList{}, err
	}
	return agentList{Data: nonNil(as)}, nil
}

func (s *Server) createAgent(ctx context.Context, c Caller, req gateway.AgentInput) (gateway.Agent, error) {
	a, err := s.d.Agents.CreateAgent(ctx, c.UserID, req)
	if err != nil {
		return gateway.Agent{}, resource(err, nil, errAgentExists)
	}
	if a.Status == gateway.AgentSummoning {
		s.d.Runner.Summon(a, c.UserID)
	}
	return a, nil
}

func (s *Server) getAgent(ctx context.Context, c Caller, in idIn) (gateway.Agent, error) {
	a, err := s.d.Agents.GetAgent(ctx, c.principal().AgentReader(), in.ID)
	if err != nil {
		return gateway.Agent{}, resource(err, errAgentNotFound, nil)
	}
	return a, nil
}

func (s *Server) updateAgent(ctx context.Context, c Caller, in agentUpdate) (gateway.Agent, error) {
	a, err := s.d.Agents.UpdateAgent(ctx, c.UserID, in.ID, in.AgentInput)
	if err != nil {
		return gateway.Agent{}, resource(err, errAgentNotFound, errAgentExists)
	}
	return a, nil
}

func (s *Server) deleteAgent(ctx context.Context, c Caller, in idIn) (None, error) {
	return None{}, resource(s.d.Agents.DeleteAgent(ctx, c.UserID, in.ID), errAgentNotFound, nil)
}

// visibleAgent returns agent ref if c may see it: any agent for a trusted
// caller, else one c's user may use (a stranger's: errAgentNotFound).
func (s *Server) visibleAgent(ctx context.Context, c Caller, ref string) (gateway.Agent, error) {
	a, err := s.d.Agents.GetAgent(ctx, c.principal().ReaderOf(), ref)
	return a, resource(err, errAgentNotFound, nil)
}
