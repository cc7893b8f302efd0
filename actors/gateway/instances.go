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

type putUserFile struct {
	ref, caller, user, name, content string
	reply                            chan filesReply
}

type listUserFiles struct {
	ref, caller, user string
	reply             chan filesReply
}

// agentAccess resolves ref for caller: the agent and whether caller may
// see every user's instance (its owner and operators).
type agentAccess struct {
	ref, caller string
	reply       chan accessReply
}

type accessReply struct {
	id      uuid.UUID
	manager bool
	err     error
}

func (r accessReply) failure() error { return r.err }

type userContext struct {
	agent uuid.UUID
	user  string
	reply chan string
}

type filesReply struct {
	files []ContextFile
	err   error
}

func (r filesReply) failure() error { return r.err }

type queryInstances struct {
	agent uuid.UUID
	reply chan []Instance
}

// access finds the agent for caller: ErrNotFound for a stranger.
func (r *registry) access(ref, caller string) (*agentRec, bool, error) {
	a, ok := r.part.agents.get(ref)
	if !ok || !a.canUse(caller) {
		return nil, false, ErrNotFound
	}
	return a, a.OwnerID == caller || a.roleOf(caller) == ShareOperator, nil
}

func (r *registry) putUserFile(m putUserFile) filesReply {
	a, _, err := r.access(m.ref, m.caller)
	switch {
	case err != nil:
		return filesReply{err: err}
	case m.caller != m.user:
		return filesReply{err: fmt.Errorf("only %s may write their own %s: %w", m.user, UserFileName, ErrForbidden)}
	case m.name != UserFileName:
		return filesReply{err: fmt.Errorf("only %s can be updated, not %q: %w", UserFileName, m.name, ErrForbidden)}
	}
	f := &userFileRec{ID: userFileID(a.ID, m.user, m.name), AgentID: a.ID, UserID: m.user, Name: m.name,
		Content: m.content, UpdatedAt: r.clock.Now().UTC()}
	au := audit{action: "user_file.update", entityType: string(kindAgent), entityID: a.ID.String(),
		summary: fmt.Sprintf("updated %s of user %q on agent %q (%d bytes)", m.name, m.user, a.AgentKey, len(m.content))}
	if err := r.commit(au, entitySaved{f}); err != nil {
		return filesReply{err: fmt.Errorf("log user file: %w", err)}
	}
	return filesReply{files: r.files(a, m.user)}
}

func (r *registry) listUserFiles(m listUserFiles) filesReply {
	a, manager, err := r.access(m.ref, m.caller)
	switch {
	case err != nil:
		return filesReply{err: err}
	case m.caller != m.user && !manager:
		return filesReply{err: fmt.Errorf("another user's files: %w", ErrForbidden)}
	}
	return filesReply{files: r.files(a, m.user)}
}

// files lists user's context files for agent a.
func (r *registry) files(a *agentRec, user string) []ContextFile {
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
	reply := make(chan filesReply, 1)
	r, err := ask(ctx, g, putUserFile{ref: ref, caller: caller, user: user, name: name, content: content, reply: reply}, reply)
	return r.files, err
}

// UserFiles lists user's context files for the agent: for that user, and
// for the agent's owner and operators.
func (g *Gateway) UserFiles(ctx context.Context, caller, ref, user string) ([]ContextFile, error) {
	reply := make(chan filesReply, 1)
	r, err := ask(ctx, g, listUserFiles{ref: ref, caller: caller, user: user, reply: reply}, reply)
	return r.files, err
}

// UserContext returns user's USER.md for agent ("" when none): what a run
// of that user sends the provider.
func (g *Gateway) UserContext(ctx context.Context, agent uuid.UUID, user string) (string, error) {
	reply := make(chan string, 1)
	g.send(ctx, g.registry, userContext{agent: agent, user: user, reply: reply})
	return await(ctx, reply)
}

// Instances lists the agent's instances: every user's for its owner and
// operators, the caller's own for a user it is shared with.
func (g *Gateway) Instances(ctx context.Context, caller, ref string) ([]Instance, error) {
	ar := make(chan accessReply, 1)
	acc, err := ask(ctx, g, agentAccess{ref: ref, caller: caller, reply: ar}, ar)
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
