package gateway

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"unicode/utf8"

	"github.com/google/uuid"
)

func errNoProvider(a *agentRec) error {
	return fmt.Errorf("agent %s has no provider: %w", a.AgentKey, ErrNotFound)
}

// owned finds the agent ref for a change by user: ErrNotFound when user
// cannot see it, ErrForbidden (and the agent) when user sees it but does
// not own it.
func (r *registry) owned(ref, user string) (*agentRec, error) {
	a, ok := r.part.agents.get(ref)
	if !ok || !a.canUse(user) {
		return nil, ErrNotFound
	}
	if a.OwnerID != user {
		return a, ErrForbidden
	}
	return a, nil
}

// editable finds the agent ref for an update by user: the owner may change
// anything, an operator it is shared with only the system prompt.
func (r *registry) editable(ref, user string, in AgentInput) (*agentRec, error) {
	a, err := r.owned(ref, user)
	if errors.Is(err, ErrForbidden) && a.roleOf(user) == ShareOperator && in.onlyPrompt() {
		return a, nil
	}
	return a, err
}

// putAgent creates agent id for user (ref "") or changes the agent ref
// (its id or agent_key).
func (r *registry) putAgent(id uuid.UUID, ref, user string, in AgentInput) (Agent, error) {
	now := r.clock.Now().UTC()
	var a agentRec
	if ref == "" {
		if r.agentsOf(user) >= r.quota.Agents {
			return Agent{}, errQuota("agents", "agents_per_user", int64(r.quota.Agents))
		}
		a = agentRec{ID: id, OwnerID: user, Status: AgentActive, TimeoutSeconds: 60, CreatedAt: now}
	} else {
		cur, err := r.editable(ref, user, in)
		if err != nil {
			return Agent{}, err
		}
		a = *cur
	}
	if err := r.fillAgent(&a, in, ref == ""); err != nil {
		return Agent{}, err
	}
	if ref == "" && a.Description != "" && a.SystemPrompt == "" {
		a.Status, a.SummonNode = AgentSummoning, r.node // its provider writes the prompt: see Gateway.FinishSummon
	}
	a.UpdatedAt = now
	verb := verbOf(ref == "")
	au := audit{action: "agent." + verb, entityType: string(kindAgent), entityID: a.ID.String(),
		summary: fmt.Sprintf("%sd agent %q (model %s)", verb, a.AgentKey, a.Model)}
	if err := r.commit(au, entitySaved{&a}); err != nil {
		return Agent{}, fmt.Errorf("log agent: %w", err)
	}
	return a.view(&r.part.providers), nil
}

// agentsOf is how many agents user owns.
func (r *registry) agentsOf(user string) int {
	n := 0
	for _, a := range r.part.agents.rows {
		if a.OwnerID == user {
			n++
		}
	}
	return n
}

var agentKeyRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// fillAgent validates in and sets its fields on a.
func (r *registry) fillAgent(a *agentRec, in AgentInput, create bool) error {
	if create && (in.AgentKey == nil || in.Provider == nil || in.Model == nil) {
		return fmt.Errorf("agent_key, provider and model are required: %w", ErrInvalid)
	}
	if in.AgentKey != nil {
		k := *in.AgentKey
		if !agentKeyRE.MatchString(k) {
			return fmt.Errorf("agent_key must match %s: %w", agentKeyRE, ErrInvalid)
		}
		if _, err := uuid.Parse(k); err == nil {
			return fmt.Errorf("agent_key must not be a UUID: %w", ErrInvalid)
		}
		if o, ok := r.part.agents.named(k); ok && o.ID != a.ID {
			return fmt.Errorf("agent_key %q: %w", k, ErrExists)
		}
		a.AgentKey = k
	}
	if in.DisplayName != nil {
		if utf8.RuneCountInString(*in.DisplayName) > 100 {
			return fmt.Errorf("display_name must be at most 100 characters: %w", ErrInvalid)
		}
		a.DisplayName = *in.DisplayName
	}
	if a.DisplayName == "" {
		a.DisplayName = a.AgentKey
	}
	if in.Provider != nil {
		p, ok := r.part.providers.get(*in.Provider)
		if !ok {
			return fmt.Errorf("provider %q does not exist: %w", *in.Provider, ErrInvalid)
		}
		a.ProviderID = p.ID
	}
	if err := fillAgentSettings(a, in); err != nil {
		return err
	}
	return r.fillFallbacks(a, in.Fallbacks)
}

// fillFallbacks sets a's fallbacks from in (nil keeps them) and checks
// the result against a's provider and model: no pair twice.
func (r *registry) fillFallbacks(a *agentRec, in *[]FallbackInput) error {
	if in != nil {
		if len(*in) > MaxFallbacks {
			return fmt.Errorf("fallbacks must hold at most %d entries: %w", MaxFallbacks, ErrInvalid)
		}
		var fbs []fallbackRec // nil when empty, as a record decodes it
		for i, f := range *in {
			if err := validName(fmt.Sprintf("fallbacks[%d].model", i), f.Model, 200); err != nil {
				return err
			}
			p, ok := r.part.providers.get(f.Provider)
			if !ok {
				return fmt.Errorf("fallbacks[%d].provider %q does not exist: %w", i, f.Provider, ErrInvalid)
			}
			fbs = append(fbs, fallbackRec{ProviderID: p.ID, Model: f.Model})
		}
		a.Fallbacks = fbs
	}
	seen := map[fallbackRec]bool{{ProviderID: a.ProviderID, Model: a.Model}: true}
	for i, f := range a.Fallbacks {
		if seen[f] {
			return fmt.Errorf("fallbacks[%d] repeats provider %s with model %s: %w", i, r.providerName(f.ProviderID), f.Model, ErrInvalid)
		}
		seen[f] = true
	}
	return nil
}

// providerName is provider id's name (its id when unknown).
func (r *registry) providerName(id uuid.UUID) string {
	if p, ok := r.part.providers.rows[id]; ok {
		return p.Name
	}
	return id.String()
}

// fillAgentSettings validates and sets the fields that need no lookup.
func fillAgentSettings(a *agentRec, in AgentInput) error {
	if in.Model != nil {
		if err := validName("model", *in.Model, 200); err != nil {
			return err
		}
		a.Model = *in.Model
	}
	if in.SystemPrompt != nil {
		if len(*in.SystemPrompt) > 64<<10 {
			return fmt.Errorf("system_prompt must be at most 64 KiB: %w", ErrInvalid)
		}
		a.SystemPrompt = *in.SystemPrompt
	}
	if in.Status != nil {
		if *in.Status != AgentActive && *in.Status != AgentDisabled {
			return fmt.Errorf("status must be %q or %q: %w", AgentActive, AgentDisabled, ErrInvalid)
		}
		a.Status = *in.Status
	}
	if in.TimeoutSeconds != nil {
		if *in.TimeoutSeconds < 1 || *in.TimeoutSeconds > 600 {
			return fmt.Errorf("timeout_seconds must be in 1..600: %w", ErrInvalid)
		}
		a.TimeoutSeconds = *in.TimeoutSeconds
	}
	if in.OtherConfig != nil {
		if len(in.OtherConfig.Description) > 16<<10 {
			return fmt.Errorf("other_config.description must be at most 16 KiB: %w", ErrInvalid)
		}
		if in.OtherConfig.MaxTokens < 0 || in.OtherConfig.MaxTokens > MaxAgentMaxTokens {
			return fmt.Errorf("other_config.max_tokens must be in 0..%d: %w", MaxAgentMaxTokens, ErrInvalid)
		}
		a.Description, a.MaxTokens = in.OtherConfig.Description, in.OtherConfig.MaxTokens
	}
	if in.MaxToolIterations != nil {
		if *in.MaxToolIterations < 1 || *in.MaxToolIterations > 100 {
			return fmt.Errorf("max_tool_iterations must be in 1..100: %w", ErrInvalid)
		}
		a.MaxToolIterations = *in.MaxToolIterations
	}
	if in.IsDefault != nil {
		a.IsDefault = *in.IsDefault
	}
	if in.SharedWith != nil {
		sw := slices.Clone(*in.SharedWith)
		slices.Sort(sw)
		a.SharedWith = slices.Clip(slices.Compact(sw))
		if len(a.SharedWith) == 0 {
			a.SharedWith = nil // as a record decodes it
		}
		// Operators keep their role only while the agent is still shared
		// with them.
		var ops []string
		for _, u := range a.Operators {
			if slices.Contains(a.SharedWith, u) {
				ops = append(ops, u)
			}
		}
		a.Operators = ops
	}
	return nil
}

func (r *registry) delAgent(ref, user string) (uuid.UUID, error) {
	a, err := r.owned(ref, user)
	if err != nil {
		return uuid.Nil, err
	}
	for _, c := range r.part.channels.rows {
		if c.AgentID == a.ID {
			return uuid.Nil, fmt.Errorf("agent %s is used by channel instance %s: %w", a.AgentKey, c.Name, ErrInUse)
		}
	}
	// The agent's tools, grants, users' files and budgets go with it, in
	// the same write; its sessions, memory entries and budget ledgers,
	// which tenant shards own, go next (DeleteAgent).
	evs := []event{entityDeleted{kind: kindAgent, id: a.ID}}
	// By kind (the calls in kind order), then id (deletes).
	evs = r.part.tools.deletes(evs, func(t *customToolRec) bool { return t.AgentID == a.ID })
	evs = r.part.mcpGrants.deletes(evs, func(g *mcpGrantRec) bool { return g.SubjectType == GrantAgent && g.Subject == a.ID.String() })
	evs = r.part.skillGrants.deletes(evs, func(g *skillGrantRec) bool { return g.AgentID == a.ID })
	evs = r.part.userFiles.deletes(evs, func(f *userFileRec) bool { return f.AgentID == a.ID })
	evs = r.part.budgets.deletes(evs, func(b *budgetRec) bool { return b.Subject.Type == SubjectAgent && b.Subject.ID == a.ID.String() })
	au := audit{action: "agent.delete", entityType: string(kindAgent), entityID: a.ID.String(),
		summary: fmt.Sprintf("deleted agent %q with %d user files, tools and grants, and its sessions and memory entries", a.AgentKey, len(evs)-1)}
	if err := r.commit(au, evs...); err != nil {
		return uuid.Nil, fmt.Errorf("log agent delete: %w", err)
	}
	return a.ID, nil
}

// CreateAgent creates an agent owned by user. ErrExists for a taken
// agent_key, ErrInvalid.
func (g *Gateway) CreateAgent(ctx context.Context, user string, in AgentInput) (Agent, error) {
	return g.agentCmd(ctx, g.newID(kindAgent), "", user, in)
}

// UpdateAgent changes the agent (id or agent_key). ErrNotFound when the
// user cannot see it, ErrForbidden when the user is not its owner.
func (g *Gateway) UpdateAgent(ctx context.Context, user, ref string, in AgentInput) (Agent, error) {
	return g.agentCmd(ctx, uuid.Nil, ref, user, in)
}

func (g *Gateway) agentCmd(ctx context.Context, id uuid.UUID, ref, user string, in AgentInput) (Agent, error) {
	if user == "" {
		return Agent{}, fmt.Errorf("user id is required: %w", ErrInvalid)
	}
	return call(ctx, g, func(r *registry) (Agent, error) { return r.putAgent(id, ref, user, in) })
}

// GetAgent finds an agent the user can use, by id or agent_key
// (EveryUser: any agent; "": ErrNotFound).
func (g *Gateway) GetAgent(ctx context.Context, user, ref string) (Agent, error) {
	return read(ctx, g, func(r regView) (Agent, error) {
		a, err := r.getAgent(ref, user)
		if err != nil {
			return Agent{}, err
		}
		return a.view(&r.part.providers), nil
	})
}

// ResolveAgent finds an agent by id or agent_key with its provider, for a
// run; no ownership check (the caller's token was authorized).
func (g *Gateway) ResolveAgent(ctx context.Context, ref string) (Agent, Provider, error) {
	type resolved struct {
		a Agent
		p Provider
	}
	res, err := read(ctx, g, func(r regView) (resolved, error) {
		a, p, err := r.resolveAgent(ref)
		return resolved{a, p}, err
	})
	return res.a, res.p, err
}

// ListAgents returns the agents user owns or that are shared with them,
// by agent_key; EveryUser lists every agent (a trusted backend's view),
// "" none.
func (g *Gateway) ListAgents(ctx context.Context, user string) ([]Agent, error) {
	return read(ctx, g, func(r regView) ([]Agent, error) { return r.listAgents(user), nil })
}

// DeleteAgent removes the agent; ErrNotFound, ErrForbidden as UpdateAgent.
//
// The registry deletes the agent (with what it owns) first, then every
// tenant shard its sessions and memory entries: a shard refuses new ones
// for the agent once the registry's view lacks it, and a crash in between
// is finished at the next start (tenantShard.purgeOrphans).
func (g *Gateway) DeleteAgent(ctx context.Context, user, ref string) error {
	var budgets []*budgetRec
	id, err := call(ctx, g, func(r *registry) (uuid.UUID, error) {
		if a, err := r.owned(ref, user); err == nil {
			budgets = r.part.budgetsOf(BudgetSubject{SubjectAgent, a.ID.String()}, nil)
		}
		return r.delAgent(ref, user)
	})
	if err != nil {
		return err
	}
	for _, b := range budgets {
		if err := g.dropLedger(ctx, b.ID); err != nil {
			return err
		}
	}
	return g.purgeAgentData(ctx, id)
}

// defaultAgent is the seed's third resolution step, "the agent named
// default", for user: the agent whose agent_key is default if user owns
// it, else the first (by agent_key) agent user owns and marked
// is_default. An agent shared with user never becomes their default: its
// owner's prompt, tools and the user's own grants would run without the
// user having chosen it. With no user (a trusted backend acting for
// nobody) only the operator's choice runs: Config.DefaultAgent.
func (r regView) defaultAgent(user, operators string) (Agent, error) {
	if user == "" {
		if operators == "" {
			return Agent{}, ErrNotFound
		}
		a, ok := r.part.agents.get(operators)
		if !ok {
			return Agent{}, ErrNotFound
		}
		return a.view(&r.part.providers), nil
	}
	if a, ok := r.part.agents.named("default"); ok && a.OwnerID == user {
		return a.view(&r.part.providers), nil
	}
	var best *agentRec
	for _, a := range r.part.agents.rows {
		if a.IsDefault && a.OwnerID == user && (best == nil || a.AgentKey < best.AgentKey) {
			best = a
		}
	}
	if best == nil {
		return Agent{}, ErrNotFound
	}
	return best.view(&r.part.providers), nil
}

// DefaultAgent resolves a run that names no agent for user (see
// registry.defaultAgent); ErrNotFound when there is none.
func (g *Gateway) DefaultAgent(ctx context.Context, user string) (Agent, error) {
	return read(ctx, g, func(r regView) (Agent, error) { return r.defaultAgent(user, g.cfg.DefaultAgent) })
}
