package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Instances and user context files. An agent has an instance per user,
// created by that user's first run (derived from the run records, like
// usage). Each instance has context files: the agent-level SYSTEM.md (its
// system prompt, read-only here) and the user's own USER.md, which only
// that user may write and which reaches the provider in that user's runs
// and nobody else's.

// UserFileName is the one context file a user may write.
const UserFileName = "USER.md"

// SystemFileName is the agent-level context file (its system prompt).
const SystemFileName = "SYSTEM.md"

// MaxUserFileBytes caps a USER.md.
const MaxUserFileBytes = 32 << 10

// Instance is an agent's instance for one user.
type Instance struct {
	AgentID   uuid.UUID `json:"agent_id"`
	UserID    string    `json:"user_id"`
	CreatedAt time.Time `json:"created_at"`
	LastRunAt time.Time `json:"last_run_at"`
	Runs      int64     `json:"runs"`
}

// ContextFile is one of an instance's context files.
type ContextFile struct {
	Name      string    `json:"name"`
	Size      int       `json:"size"`
	Editable  bool      `json:"editable"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	Content   string    `json:"content"`
}

type queryInstances struct {
	agent uuid.UUID
	reply chan []Instance
}

// access finds the agent for caller: ErrNotFound for a stranger.
func (r regView) access(ref, caller string) (*agentRec, bool, error) {
	a, ok := r.part.agents.get(ref)
	if !ok || !a.canUse(caller) {
		return nil, false, ErrNotFound
	}
	return a, a.OwnerID == caller || a.roleOf(caller) == ShareOperator, nil
}

func (r *registry) putUserFile(ref, caller, user, name, content string) ([]ContextFile, error) {
	a, _, err := r.access(ref, caller)
	switch {
	case err != nil:
		return nil, err
	case caller != user:
		return nil, fmt.Errorf("only %s may write their own %s: %w", user, UserFileName, ErrForbidden)
	case name != UserFileName:
		return nil, fmt.Errorf("only %s can be updated, not %q: %w", UserFileName, name, ErrForbidden)
	}
	f := &userFileRec{ID: userFileID(a.ID, user, name), AgentID: a.ID, UserID: user, Name: name,
		Content: content, UpdatedAt: r.clock.Now().UTC()}
	au := audit{action: "user_file.update", entityType: string(kindAgent), entityID: a.ID.String(),
		summary: fmt.Sprintf("updated %s of user %q on agent %q (%d bytes)", name, user, a.AgentKey, len(content))}
	if err := r.commit(au, entitySaved{f}); err != nil {
		return nil, fmt.Errorf("log user file: %w", err)
	}
	return r.files(a, user), nil
}

func (r regView) listUserFiles(ref, caller, user string) ([]ContextFile, error) {
	a, manager, err := r.access(ref, caller)
	switch {
	case err != nil:
		return nil, err
	case caller != user && !manager:
		return nil, fmt.Errorf("another user's files: %w", ErrForbidden)
	}
	return r.files(a, user), nil
}

// userContext is user's USER.md for agent ("" when none).
func (r regView) userContext(agent uuid.UUID, user string) string {
	if f := r.part.userFiles.rows[userFileID(agent, user, UserFileName)]; f != nil {
		return f.Content
	}
	return ""
}

// files lists user's context files for agent a.
func (r regView) files(a *agentRec, user string) []ContextFile {
	out := []ContextFile{{Name: SystemFileName, Size: len(a.SystemPrompt), UpdatedAt: a.UpdatedAt, Content: a.SystemPrompt}}
	f, ok := r.part.userFiles.rows[userFileID(a.ID, user, UserFileName)]
	uf := ContextFile{Name: UserFileName, Editable: true}
	if ok {
		uf.Size, uf.UpdatedAt, uf.Content = len(f.Content), f.UpdatedAt, f.Content
	}
	return append(out, uf)
}

// PutUserFile stores user's USER.md for the agent ref; caller must be user
// (ErrForbidden otherwise, and for any other name). ErrNotFound when the
// agent is not user's nor shared with them; ErrInvalid over
// MaxUserFileBytes or not UTF-8.
func (g *Gateway) PutUserFile(ctx context.Context, caller, ref, user, name, content string) ([]ContextFile, error) {
	if len(content) > MaxUserFileBytes {
		return nil, fmt.Errorf("%s must be at most %d bytes: %w", name, MaxUserFileBytes, ErrInvalid)
	}
	if !utf8.ValidString(content) {
		return nil, fmt.Errorf("%s must be UTF-8 text: %w", name, ErrInvalid)
	}
	return call(ctx, g, func(r *registry) ([]ContextFile, error) { return r.putUserFile(ref, caller, user, name, content) })
}

// UserFiles lists user's context files for the agent: for that user, and
// for the agent's owner and operators.
func (g *Gateway) UserFiles(ctx context.Context, caller, ref, user string) ([]ContextFile, error) {
	return read(ctx, g, func(r regView) ([]ContextFile, error) { return r.listUserFiles(ref, caller, user) })
}

// UserContext returns user's USER.md for agent ("" when none): what a run
// of that user sends the provider.
func (g *Gateway) UserContext(ctx context.Context, agent uuid.UUID, user string) (string, error) {
	return read(ctx, g, func(r regView) (string, error) { return r.userContext(agent, user), nil })
}

// Instances lists the agent's instances: every user's for its owner and
// operators, the caller's own for a user it is shared with.
func (g *Gateway) Instances(ctx context.Context, caller, ref string) ([]Instance, error) {
	type access struct {
		id      uuid.UUID
		manager bool
	}
	acc, err := read(ctx, g, func(r regView) (access, error) {
		a, manager, err := r.access(ref, caller)
		if err != nil {
			return access{}, err
		}
		return access{a.ID, manager}, nil
	})
	if err != nil {
		return nil, err
	}
	reply := make(chan []Instance, 1)
	g.root.Send(g.runs, queryInstances{agent: acc.id, reply: reply})
	all, err := await(ctx, reply)
	if err != nil {
		return nil, err
	}
	if !acc.manager {
		all = slices.DeleteFunc(all, func(in Instance) bool { return in.UserID != caller })
	}
	return all, nil
}

func (rs *runState) instancesOf(agent uuid.UUID) []Instance {
	out := []Instance{}
	for k, in := range rs.instances {
		if k.agent == agent {
			out = append(out, Instance(*in))
		}
	}
	slices.SortFunc(out, func(x, y Instance) int { return strings.Compare(x.UserID, y.UserID) })
	return out
}
