package gateway

import (
	"context"
	"time"

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
}

var _ AgentStore = (*gateway.Gateway)(nil)

type agentReq struct {
	AgentKey    *string `json:"agent_key,omitempty"`
	DisplayName *string `json:"display_name,omitempty"`
	// Provider is the provider's name or id.
	Provider       *string   `json:"provider,omitempty"`
	Model          *string   `json:"model,omitempty"`
	SystemPrompt   *string   `json:"system_prompt,omitempty"`
	Status         *string   `json:"status,omitempty"`
	TimeoutSeconds *int      `json:"timeout_seconds,omitempty"`
	SharedWith     *[]string `json:"shared_with,omitempty"`
}

// agentUpdate is PUT /v1/agents/{id}: absent fields keep their value.
type agentUpdate struct {
	ID string `path:"id" json:"-"`
	agentReq
}

type agentView struct {
	ID             uuid.UUID `json:"id"`
	AgentKey       string    `json:"agent_key"`
	DisplayName    string    `json:"display_name"`
	OwnerID        string    `json:"owner_id"`
	ProviderID     uuid.UUID `json:"provider_id"`
	Model          string    `json:"model"`
	SystemPrompt   string    `json:"system_prompt"`
	Status         string    `json:"status"`
	TimeoutSeconds int       `json:"timeout_seconds"`
	SharedWith     []string  `json:"shared_with"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

type agentList struct {
	Data []agentView `json:"data"`
}

func viewAgent(a gateway.Agent) agentView {
	sw := a.SharedWith
	if sw == nil {
		sw = []string{}
	}
	return agentView{
		ID: a.ID, AgentKey: a.AgentKey, DisplayName: a.DisplayName, OwnerID: a.OwnerID, ProviderID: a.ProviderID,
		Model: a.Model, SystemPrompt: a.SystemPrompt, Status: a.Status, TimeoutSeconds: a.TimeoutSeconds,
		SharedWith: sw, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt,
	}
}

func (q agentReq) input() gateway.AgentInput {
	return gateway.AgentInput{
		AgentKey: q.AgentKey, DisplayName: q.DisplayName, Provider: q.Provider, Model: q.Model,
		SystemPrompt: q.SystemPrompt, Status: q.Status, TimeoutSeconds: q.TimeoutSeconds, SharedWith: q.SharedWith,
	}
}

func (s *Server) listAgents(ctx context.Context, c Caller, _ None) (agentList, error) {
	as, err := s.d.Agents.ListAgents(ctx, c.UserID)
	if err != nil {
		return agentList{}, err
	}
	out := agentList{Data: make([]agentView, 0, len(as))}
	for _, a := range as {
		out.Data = append(out.Data, viewAgent(a))
	}
	return out, nil
}

func (s *Server) createAgent(ctx context.Context, c Caller, req agentReq) (agentView, error) {
	a, err := s.d.Agents.CreateAgent(ctx, c.UserID, req.input())
	if err != nil {
		return agentView{}, resource(err, nil, errAgentExists)
	}
	return viewAgent(a), nil
}

func (s *Server) getAgent(ctx context.Context, c Caller, in idIn) (agentView, error) {
	a, err := s.d.Agents.GetAgent(ctx, c.UserID, in.ID)
	if err != nil {
		return agentView{}, resource(err, errAgentNotFound, nil)
	}
	return viewAgent(a), nil
}

func (s *Server) updateAgent(ctx context.Context, c Caller, in agentUpdate) (agentView, error) {
	a, err := s.d.Agents.UpdateAgent(ctx, c.UserID, in.ID, in.input())
	if err != nil {
		return agentView{}, resource(err, errAgentNotFound, errAgentExists)
	}
	return viewAgent(a), nil
}

func (s *Server) deleteAgent(ctx context.Context, c Caller, in idIn) (None, error) {
	return None{}, resource(s.d.Agents.DeleteAgent(ctx, c.UserID, in.ID), errAgentNotFound, nil)
}
