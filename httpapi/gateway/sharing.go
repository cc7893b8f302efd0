package gateway

import (
	"context"

	"gatehouse/actors/gateway"
)

// SharingStore is what the sharing routes need. user is the caller's
// user; ref the agent's id or agent_key. Safe for concurrent use.
type SharingStore interface {
	// AgentShares errors: ErrNotFound (a stranger), ErrForbidden (shared
	// with the user as user, not operator).
	AgentShares(ctx context.Context, user, ref string) ([]gateway.Share, error)
	// ShareAgent errors: ErrNotFound, ErrForbidden (not the owner), ErrInvalid.
	ShareAgent(ctx context.Context, user, ref string, share gateway.Share) ([]gateway.Share, error)
	// UnshareAgent errors: ErrNotFound (also: not shared with target), ErrForbidden.
	UnshareAgent(ctx context.Context, user, ref, target string) error
}

var _ SharingStore = (*gateway.Gateway)(nil)

type shareList struct {
	Data []gateway.Share `json:"data"`
}

type shareIn struct {
	ID string `path:"id" json:"-"`
	gateway.Share
}

type unshareIn struct {
	ID     string `path:"id" json:"-"`
	UserID string `path:"userID" json:"-"`
}

func (s *Server) listShares(ctx context.Context, c Caller, in idIn) (shareList, error) {
	sh, err := s.d.Sharing.AgentShares(ctx, c.UserID, in.ID)
	if err != nil {
		return shareList{}, resource(err, errAgentNotFound, nil)
	}
	return shareList{Data: sh}, nil
}

func (s *Server) shareAgent(ctx context.Context, c Caller, in shareIn) (shareList, error) {
	sh, err := s.d.Sharing.ShareAgent(ctx, c.UserID, in.ID, in.Share)
	if err != nil {
		return shareList{}, resource(err, errAgentNotFound, nil)
	}
	return shareList{Data: sh}, nil
}

func (s *Server) unshareAgent(ctx context.Context, c Caller, in unshareIn) (None, error) {
	return None{}, s.d.Sharing.UnshareAgent(ctx, c.UserID, in.ID, in.UserID)
}
