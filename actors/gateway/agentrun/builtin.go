package agentrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
)

// The built-in tools every run gets, when the Recorder provides what they
// need: delegate (another agent the user may use runs the task),
// memory_search and memory_save (the agent's and its user's memory).

// Memory is the memory the built-ins read and write.
type Memory interface {
	SearchMemory(ctx context.Context, agent uuid.UUID, user, query string, k int) ([]gateway.MemoryEntry, error)
	SaveMemory(ctx context.Context, in gateway.MemoryInput) (gateway.MemoryEntry, error)
}

// Skills reads the files of the skills a run's plan names (skill_read).
type Skills interface {
	ReadSkillFile(ctx context.Context, viewer, ref string, version int, file string) ([]byte, error)
}

// maxSkillRead bounds what skill_read returns.
const maxSkillRead = 64 << 10

// skillsPrompt is the system message naming a run's skills.
func skillsPrompt(skills []gateway.RunSkill) string {
	var b strings.Builder
	b.WriteString("Skills you have (read one with the skill_read tool when the task matches it):\n")
	for _, s := range skills {
		fmt.Fprintf(&b, "- %s: %s\n", s.Slug, s.Description)
	}
	return b.String()
}

// Delegations records finished delegations.
type Delegations interface {
	RecordDelegation(ctx context.Context, d gateway.Delegation) (gateway.Delegation, error)
}

// MaxDelegationDepth bounds chains of delegations (A asks B asks C …).
const MaxDelegationDepth = 3

// memorySearchHits is how many entries memory_search returns at most.
const memorySearchHits = 5

type chainKey struct{}

// chainOf is the agents whose runs led to this one, outermost first.
func chainOf(ctx context.Context) []uuid.UUID {
	c, _ := ctx.Value(chainKey{}).([]uuid.UUID)
	return c
}

var (
	errDelegationCycle = errors.New("delegation cycle: that agent is already working on this task's chain")
	errDelegationDepth = fmt.Errorf("delegations nest at most %d deep", MaxDelegationDepth)
)

// builtins returns the built-in tools of rn.
func (rt *Runtime) builtins(rn *Run, req Request) []Tool {
	var out []Tool
	if rt.delegations != nil {
		out = append(out, Tool{
			Name: "delegate", Kind: gateway.SpanDelegation,
			Description: "Ask another agent to do a task and get its answer. agent is its agent_key or id.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"agent":{"type":"string","description":"the agent's agent_key or id"},"task":{"type":"string","description":"what to do, with everything it needs to know"}},"required":["agent","task"]}`),
			Call: func(ctx context.Context, args json.RawMessage) (string, error) {
				return rt.delegate(ctx, rn, req.User, args)
			},
		})
	}
	if rt.skills != nil && len(rn.skills) > 0 {
		skills := rn.skills
		out = append(out, Tool{
			Name: "skill_read", Kind: gateway.SpanTool,
			Description: "Read one of your skills: its SKILL.md (no path) or one of its files.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"skill":{"type":"string","description":"the skill's slug"},"path":{"type":"string","description":"a file of the skill; empty for SKILL.md"}},"required":["skill"]}`),
			Call: func(ctx context.Context, args json.RawMessage) (string, error) {
				var in struct{ Skill, Path string }
				if err := json.Unmarshal(args, &in); err != nil || in.Skill == "" {
					return "", errors.New("skill: required")
				}
				i := slices.IndexFunc(skills, func(s gateway.RunSkill) bool { return s.Slug == in.Skill })
				if i < 0 {
					return "", fmt.Errorf("no skill %q", in.Skill)
				}
				b, err := rt.skills.ReadSkillFile(ctx, gateway.EveryUser, skills[i].Slug, skills[i].Version, in.Path)
				if err != nil {
					return "", fmt.Errorf("skill %s: %s: %w", in.Skill, in.Path, err)
				}
				if len(b) > maxSkillRead {
					b = append(b[:maxSkillRead], "\n[truncated]"...)
				}
				return string(b), nil
			},
		})
	}
	if rt.memory != nil {
		agent, user := rn.Agent.ID, req.User
		out = append(out, Tool{
			Name: "memory_search", Kind: gateway.SpanTool,
			Description: "Search the notes kept for you and your user; returns the best matches.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`),
			Call: func(ctx context.Context, args json.RawMessage) (string, error) {
				var in struct{ Query string }
				if err := json.Unmarshal(args, &in); err != nil || in.Query == "" {
					return "", errors.New("query: required")
				}
				hits, err := rt.memory.SearchMemory(ctx, agent, user, in.Query, memorySearchHits)
				if err != nil {
					return "", err
				}
				type hit struct {
					Content string   `json:"content"`
					Tags    []string `json:"tags,omitempty"`
					Score   float64  `json:"score"`
				}
				out := make([]hit, len(hits))
				for i, h := range hits {
					out[i] = hit{h.Content, h.Tags, h.Score}
				}
				b, _ := json.Marshal(out)
				return string(b), nil
			},
		}, Tool{
			Name: "memory_save", Kind: gateway.SpanTool,
			Description: "Keep a note for later runs with this user (facts, preferences).",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"content":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}},"required":["content"]}`),
			Call: func(ctx context.Context, args json.RawMessage) (string, error) {
				var in struct {
					Content string
					Tags    []string
				}
				if err := json.Unmarshal(args, &in); err != nil {
					return "", errors.New("arguments: {content, tags}")
				}
				e, err := rt.memory.SaveMemory(ctx, gateway.MemoryInput{Content: in.Content, Agent: agent.String(), UserID: user, Tags: in.Tags})
				if err != nil {
					return "", err
				}
				return "saved " + e.ID.String(), nil
			},
		})
	}
	return out
}

// delegate runs the task on another agent for the same user and records
// the delegation.
func (rt *Runtime) delegate(ctx context.Context, rn *Run, user string, args json.RawMessage) (string, error) {
	var in struct{ Agent, Task string }
	if err := json.Unmarshal(args, &in); err != nil || in.Agent == "" || in.Task == "" {
		return "", errors.New("agent and task: required")
	}
	chain := append(slices.Clone(chainOf(ctx)), rn.Agent.ID)
	if len(chain) > MaxDelegationDepth {
		return "", errDelegationDepth
	}
	// The delegating run acts with its own run's rights: its user's
	// agents, or any agent for a run for no user (a trusted backend's).
	p := gateway.Principal{User: user, Trusted: user == ""}
	req := Request{Agent: in.Agent, User: user, Endpoint: "delegate", Channel: "internal",
		Messages: []Message{{Role: "user", Content: in.Task}}, KeyID: rn.keyID} // the same key's budgets
	pl, err := rt.plan(ctx, in.Agent, p, true, req)
	switch {
	case errors.Is(err, ErrAgentNotFound):
		return "", fmt.Errorf("no agent %q", in.Agent) // none, or not the user's: do not reveal it
	case err != nil:
		return "", err
	case slices.Contains(chain, pl.Agent.ID):
		return "", errDelegationCycle
	}
	sub, err := rt.prepare(ctx, pl, req)
	if err != nil {
		return "", err
	}
	d := gateway.Delegation{SourceAgentID: rn.Agent.ID, TargetAgentID: sub.Agent.ID, UserID: user, Task: in.Task,
		TraceID: sub.ID, CreatedAt: rt.now()}
	t0 := time.Now()
	res, err := rt.execute(context.WithValue(ctx, chainKey{}, chain), sub, nil)
	d.DurationMs, d.CompletedAt, d.Status, d.Result = time.Since(t0).Milliseconds(), rt.now(), gateway.RunOK, res.Content
	if err != nil {
		d.Status, d.Error = gateway.RunFailed, sub.redact.preview(err.Error())
		var te *TimeoutError
		if errors.As(err, &te) {
			d.Status = gateway.RunTimeout
		}
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, rerr := rt.delegations.RecordDelegation(rctx, d); rerr != nil && err == nil {
		err = fmt.Errorf("delegation not recorded: %w", rerr)
	}
	if err != nil {
		return "", fmt.Errorf("agent %s: %w", sub.Agent.AgentKey, err)
	}
	return res.Content, nil
}
