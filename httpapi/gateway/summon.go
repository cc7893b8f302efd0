package gateway

import (
	"context"
	"strings"

	"gatehouse/actors/gateway"
)

// regenerateIn is POST /v1/agents/{id}/regenerate.
type regenerateIn struct {
	ID string `path:"id" json:"-"`
	// Prompt says how to change the agent's configuration.
	Prompt string `json:"prompt"`
}

func (s *Server) resummon(ctx context.Context, c Caller, in idIn) (gateway.Agent, error) {
	a, err := s.d.Agents.Resummon(ctx, c.UserID, in.ID)
	if err != nil {
		return gateway.Agent{}, resource(err, errAgentNotFound, nil)
	}
	s.d.Runner.Summon(a, c.UserID)
	return a, nil
}

func (s *Server) regenerate(ctx context.Context, c Caller, in regenerateIn) (gateway.Agent, error) {
	if strings.TrimSpace(in.Prompt) == "" {
		return gateway.Agent{}, errInvalid("prompt must not be empty")
	}
	a, err := s.d.Runner.Regenerate(runContext(ctx), c.principal(), in.ID, in.Prompt)
	return a, resource(err, errAgentNotFound, nil)
}
