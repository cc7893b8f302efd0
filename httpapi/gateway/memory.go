package gateway

import (
	"context"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
)

// MemoryStore is what memory and delegations need from the gateway. Safe
// for concurrent use.
type MemoryStore interface {
	SaveMemory(ctx context.Context, in gateway.MemoryInput) (gateway.MemoryEntry, error)
	Memory(ctx context.Context, f gateway.MemoryFilter) ([]gateway.MemoryEntry, int, error)
	DeleteMemory(ctx context.Context, id uuid.UUID, user string) error
	Delegations(ctx context.Context, f gateway.DelegationFilter) ([]gateway.Delegation, int, error)
	Delegation(ctx context.Context, id uuid.UUID) (gateway.Delegation, error)
}

var _ MemoryStore = (*gateway.Gateway)(nil)

type memoryIn struct {
	AgentID string `query:"agent_id" json:"-"`
	UserID  string `query:"user_id" json:"-"`
	Q       string `query:"q" json:"-"`
	Limit   int    `query:"limit" json:"-"`
	Offset  int    `query:"offset" json:"-"`
}

type memoryPage struct {
	Data   []gateway.MemoryEntry `json:"data"`
	Total  int                   `json:"total"`
	Limit  int                   `json:"limit"`
	Offset int                   `json:"offset"`
}

// listMemory: entries filtered by agent and user, ranked by q (BM25)
// when given, else newest first. Non-admin callers see their user's
// entries only.
func (s *Server) listMemory(ctx context.Context, c Caller, in memoryIn) (memoryPage, error) {
	limit, err := pageBounds(in.Limit, in.Offset)
	if err != nil {
		return memoryPage{}, err
	}
	user, err := ownUser(c, in.UserID)
	if err != nil {
		return memoryPage{}, err
	}
	agent, err := s.agentRefID(ctx, in.AgentID)
	if err != nil {
		return memoryPage{}, err
	}
	es, total, err := s.d.Memory.Memory(ctx, gateway.MemoryFilter{AgentID: agent, UserID: user, Query: in.Q, Limit: limit, Offset: in.Offset})
	if err != nil {
		return memoryPage{}, err
	}
	return memoryPage{Data: nonNil(es), Total: total, Limit: limit, Offset: in.Offset}, nil
}

// parseTimes reads optional from and to (RFC 3339) filters.
func parseTimes(from, to string) (f, t time.Time, err error) {
	if from != "" {
		if f, err = time.Parse(time.RFC3339, from); err != nil {
			return f, t, errInvalid("from must be an RFC 3339 time")
		}
	}
	if to != "" {
		if t, err = time.Parse(time.RFC3339, to); err != nil {
			return f, t, errInvalid("to must be an RFC 3339 time")
		}
	}
	return f, t, nil
}

// agentRefID resolves an agent id or agent_key ("": uuid.Nil) for a
// filter or a reference whose records the caller's user bounds anyway.
func (s *Server) agentRefID(ctx context.Context, ref string) (uuid.UUID, error) {
	if ref == "" {
		return uuid.Nil, nil
	}
	a, err := s.d.Agents.GetAgent(ctx, gateway.EveryUser, ref)
	if err != nil {
		return uuid.Nil, resource(err, errAgentNotFound, nil)
	}
	return a.ID, nil
}

type memoryCreateIn struct {
	gateway.MemoryInput
}

// createMemory: a non-admin caller writes for their own user (user_id
// defaults to it); an admin for anyone, or for nobody (an agent-wide or
// global entry).
func (s *Server) createMemory(ctx context.Context, c Caller, in memoryCreateIn) (gateway.MemoryEntry, error) {
	var err error
	if in.UserID, err = ownUser(c, in.UserID); err != nil {
		return gateway.MemoryEntry{}, err
	}
	if _, err := s.agentRefID(ctx, in.Agent); err != nil {
		return gateway.MemoryEntry{}, err
	}
	return s.d.Memory.SaveMemory(ctx, in.MemoryInput)
}

func (s *Server) deleteMemory(ctx context.Context, c Caller, in idIn) (None, error) {
	id, err := uuid.Parse(in.ID)
	if err != nil {
		return None{}, errNotFound
	}
	user, err := ownUser(c, "") // "": a trusted caller deletes anyone's
	if err != nil {
		return None{}, err
	}
	return None{}, s.d.Memory.DeleteMemory(ctx, id, user)
}

type delegationsIn struct {
	SourceAgentID string `query:"source_agent_id" json:"-"`
	TargetAgentID string `query:"target_agent_id" json:"-"`
	UserID        string `query:"user_id" json:"-"`
	Status        string `query:"status" json:"-"`
	Limit         int    `query:"limit" json:"-"`
	Offset        int    `query:"offset" json:"-"`
}

type delegationPage struct {
	Data   []gateway.Delegation `json:"data"`
	Total  int                  `json:"total"`
	Limit  int                  `json:"limit"`
	Offset int                  `json:"offset"`
}

func (s *Server) listDelegations(ctx context.Context, c Caller, in delegationsIn) (delegationPage, error) {
	limit, err := pageBounds(in.Limit, in.Offset)
	if err != nil {
		return delegationPage{}, err
	}
	f := gateway.DelegationFilter{Status: in.Status, Limit: limit, Offset: in.Offset}
	if f.UserID, err = ownUser(c, in.UserID); err != nil {
		return delegationPage{}, err
	}
	if f.SourceAgentID, err = s.agentRefID(ctx, in.SourceAgentID); err != nil {
		return delegationPage{}, err
	}
	if f.TargetAgentID, err = s.agentRefID(ctx, in.TargetAgentID); err != nil {
		return delegationPage{}, err
	}
	ds, total, err := s.d.Memory.Delegations(ctx, f)
	if err != nil {
		return delegationPage{}, err
	}
	return delegationPage{Data: ds, Total: total, Limit: limit, Offset: in.Offset}, nil
}

func (s *Server) getDelegation(ctx context.Context, c Caller, in idIn) (gateway.Delegation, error) {
	id, err := uuid.Parse(in.ID)
	if err != nil {
		return gateway.Delegation{}, errNotFound
	}
	d, err := s.d.Memory.Delegation(ctx, id)
	if err != nil {
		return d, err
	}
	if !c.principal().MayRead(d.UserID) {
		return gateway.Delegation{}, errNotFound
	}
	return d, nil
}
