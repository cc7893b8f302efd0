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

// share shares the agent ref, owned by user, as sh says, or with remove
// stops sharing it with sh.UserID.
func (r *registry) share(ref, user string, sh Share, remove bool) ([]Share, error) {
	a, err := r.owned(ref, user)
	if err != nil {
		return nil, err
	}
	u := sh.UserID
	next := *a
	switch {
	case remove && !slices.Contains(a.SharedWith, u):
		return nil, fmt.Errorf("agent %s is not shared with %q: %w", a.AgentKey, u, ErrNotFound)
	case remove:
		next.SharedWith = without(a.SharedWith, u)
		next.Operators = without(a.Operators, u)
	default:
		next.SharedWith = withSorted(a.SharedWith, u)
		next.Operators = without(a.Operators, u)
		if sh.Role == ShareOperator {
			next.Operators = withSorted(next.Operators, u)
		}
	}
	next.UpdatedAt = r.clock.Now().UTC()
	au := audit{action: "agent.share", entityType: string(kindAgent), entityID: a.ID.String(),
		summary: fmt.Sprintf("shared agent %q with %q as %s", a.AgentKey, u, cmp.Or(string(sh.Role), string(ShareUser)))}
	if remove {
		au.action, au.summary = "agent.unshare", fmt.Sprintf("stopped sharing agent %q with %q", a.AgentKey, u)
	}
	if err := r.commit(au, entitySaved{&next}); err != nil {
		return nil, fmt.Errorf("log agent share: %w", err)
	}
	return next.shares(), nil
}

func (r regView) listShares(ref, user string) ([]Share, error) {
	a, ok := r.part.agents.get(ref)
	if !ok || !a.canUse(user) {
		return nil, ErrNotFound
	}
	if a.OwnerID != user && a.roleOf(user) != ShareOperator {
		return nil, ErrForbidden
	}
	return a.shares(), nil
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
	return g.shareCmd(ctx, ref, user, share, false)
}

// UnshareAgent revokes target's access; only the owner may. ErrNotFound
// when the agent is not shared with target.
func (g *Gateway) UnshareAgent(ctx context.Context, user, ref, target string) error {
	_, err := g.shareCmd(ctx, ref, user, Share{UserID: target}, true)
	return err
}

func (g *Gateway) shareCmd(ctx context.Context, ref, user string, share Share, remove bool) ([]Share, error) {
	return call(ctx, g, func(r *registry) ([]Share, error) { return r.share(ref, user, share, remove) })
}

// AgentShares lists the agent's shares, for its owner and its operators
// (ErrForbidden for a user it is shared with as user; ErrNotFound for a
// stranger).
func (g *Gateway) AgentShares(ctx context.Context, user, ref string) ([]Share, error) {
	return read(ctx, g, func(r regView) ([]Share, error) { return r.listShares(ref, user) })
}
