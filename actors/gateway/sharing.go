package gateway

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// Sharing: an agent's owner shares it with other users, each with a role
// (ShareUser: read and run; ShareOperator: also edit the system prompt).
// The shares are part of the agent's record, so a share is a new agent
// record: atomic with everything else about the agent.

type shareAgent struct {
	ref, user string // the agent, the caller (must own it)
	share     Share
	remove    bool // unshare share.UserID
	reply     chan shareReply
}

type listShares struct {
	ref, user string
	reply     chan shareReply
}

type shareReply struct {
	shares []Share
	err    error
}

func (r shareReply) failure() error { return r.err }

func (r *registry) share(m shareAgent) shareReply {
	a, err := r.owned(m.ref, m.user)
	if err != nil {
		return shareReply{err: err}
	}
	u := m.share.UserID
	next := *a
	switch {
	case m.remove && !slices.Contains(a.SharedWith, u):
		return shareReply{err: fmt.Errorf("agent %s is not shared with %q: %w", a.AgentKey, u, ErrNotFound)}
	case m.remove:
		next.SharedWith = without(a.SharedWith, u)
		next.Operators = without(a.Operators, u)
	default:
		next.SharedWith = withSorted(a.SharedWith, u)
		next.Operators = without(a.Operators, u)
		if m.share.Role == ShareOperator {
			next.Operators = withSorted(next.Operators, u)
		}
	}
	next.UpdatedAt = r.clock.Now().UTC()
	au := audit{action: "agent.share", entityType: string(kindAgent), entityID: a.ID.String(),
		summary: fmt.Sprintf("shared agent %q with %q as %s", a.AgentKey, u, cmp.Or(string(m.share.Role), string(ShareUser)))}
	if m.remove {
		au.action, au.summary = "agent.unshare", fmt.Sprintf("stopped sharing agent %q with %q", a.AgentKey, u)
	}
	if err := r.commit(au, entitySaved{&next}); err != nil {
		return shareReply{err: fmt.Errorf("log agent share: %w", err)}
	}
	return shareReply{shares: next.shares()}
}

func (r *registry) listShares(m listShares) shareReply {
	a, ok := r.part.agents.get(m.ref)
	if !ok || !a.canUse(m.user) {
		return shareReply{err: ErrNotFound}
	}
	if a.OwnerID != m.user && a.roleOf(m.user) != ShareOperator {
		return shareReply{err: ErrForbidden}
	}
	return shareReply{shares: a.shares()}
}

// without returns a copy of list without u (nil when empty, as a record
// decodes it).
func without(list []string, u string) []string {
	var out []string
	for _, x := range list {
		if x != u {
			out = append(out, x)
		}
	}
	return out
}

// withSorted returns a sorted copy of list with u added once.
func withSorted(list []string, u string) []string {
	out := append(slices.Clone(list), u)
	slices.Sort(out)
	return slices.Clip(slices.Compact(out))
}

// ShareAgent shares the agent (id or agent_key) with share.UserID in
// share.Role, replacing the role it had; only the owner may. Errors:
// ErrNotFound (user cannot see it), ErrForbidden (not the owner),
// ErrInvalid (bad user or role, or the owner itself).
func (g *Gateway) ShareAgent(ctx context.Context, user, ref string, share Share) ([]Share, error) {
	switch {
	case !ValidUserID(share.UserID):
		return nil, fmt.Errorf("user_id must be 1-255 printable characters: %w", ErrInvalid)
	case share.Role == "":
		share.Role = ShareUser
	case share.Role != ShareUser && share.Role != ShareOperator:
		return nil, fmt.Errorf("role must be %q or %q: %w", ShareUser, ShareOperator, ErrInvalid)
	}
	if share.UserID == user {
		return nil, fmt.Errorf("user_id: the owner cannot share an agent with itself: %w", ErrInvalid)
	}
	return g.shareCmd(ctx, shareAgent{ref: ref, user: user, share: share})
}

// UnshareAgent revokes target's access; only the owner may. ErrNotFound
// when the agent is not shared with target.
func (g *Gateway) UnshareAgent(ctx context.Context, user, ref, target string) error {
	_, err := g.shareCmd(ctx, shareAgent{ref: ref, user: user, share: Share{UserID: target}, remove: true})
	return err
}

func (g *Gateway) shareCmd(ctx context.Context, m shareAgent) ([]Share, error) {
	m.reply = make(chan shareReply, 1)
	r, err := ask(ctx, g, m, m.reply)
	return r.shares, err
}

// AgentShares lists the agent's shares, for its owner and its operators
// (ErrForbidden for a user it is shared with as user; ErrNotFound for a
// stranger).
func (g *Gateway) AgentShares(ctx context.Context, user, ref string) ([]Share, error) {
	reply := make(chan shareReply, 1)
	r, err := ask(ctx, g, listShares{ref: ref, user: user, reply: reply}, reply)
	return r.shares, err
}
