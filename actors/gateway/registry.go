package gateway

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/clock"
)

// registry owns providers and agents. Management traffic is light, so one
// actor serializes it; sealing happens in the caller's goroutine.
type registry struct {
	log       actors.EventLog
	clock     clock.Clock
	providers map[uuid.UUID]*Provider
	agents    map[uuid.UUID]*Agent
}

type provReply struct {
	p   Provider
	ps  []Provider
	err error
}

// putProvider creates (id not present) or replaces a provider. sealed nil
// keeps the current credential.
type putProvider struct {
	p      Provider
	create bool
	sealed *[]byte
	hint   string
	reply  chan provReply
}

type getProvider struct {
	ref   string
	reply chan provReply
}

type listProviders struct{ reply chan provReply }

type delProvider struct {
	ref   string
	reply chan provReply
}

type agentReply struct {
	a   Agent
	p   Provider // the agent's provider (resolve only)
	as  []Agent
	err error
}

type putAgent struct {
	ref   string // empty: create
	user  string
	in    AgentInput
	reply chan agentReply
}

type getAgent struct {
	ref     string
	user    string // "" skips the access check (chat resolution)
	resolve bool   // also return the provider
	reply   chan agentReply
}

type listAgents struct {
	user  string
	reply chan agentReply
}

type delAgent struct {
	ref   string
	user  string
	reply chan agentReply
}

type captureRegistry struct{ reply chan registryImage }

type registryImage struct {
	providers []Provider
	agents    []Agent
}

// Receive is the registry's mailbox entry point.
func (r *registry) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case putProvider:
		m.reply <- r.putProvider(m)
	case getProvider:
		p := r.provider(m.ref)
		if p == nil {
			m.reply <- provReply{err: ErrNotFound}
			return
		}
		m.reply <- provReply{p: *p}
	case listProviders:
		m.reply <- provReply{ps: r.listProviders()}
	case delProvider:
		m.reply <- r.delProvider(m.ref)
	case putAgent:
		m.reply <- r.putAgent(m)
	case getAgent:
		m.reply <- r.getAgent(m)
	case listAgents:
		m.reply <- r.listAgents(m.user)
	case delAgent:
		m.reply <- r.delAgent(m)
	case captureRegistry:
		m.reply <- registryImage{providers: r.listProviders(), agents: r.allAgents()}
	}
}

// provider finds a provider by id or name.
func (r *registry) provider(ref string) *Provider {
	if id, err := uuid.Parse(ref); err == nil {
		if p := r.providers[id]; p != nil {
			return p
		}
	}
	for _, p := range r.providers {
		if p.Name == ref {
			return p
		}
	}
	return nil
}

func (r *registry) putProvider(m putProvider) provReply {
	now := r.clock.Now().UTC()
	p := m.p
	cur := r.providers[p.ID]
	if m.create == (cur != nil) {
		if m.create {
			return provReply{err: ErrExists}
		}
		return provReply{err: ErrNotFound}
	}
	for _, o := range r.providers {
		if o.Name == p.Name && o.ID != p.ID {
			return provReply{err: fmt.Errorf("provider name %q: %w", p.Name, ErrExists)}
		}
	}
	p.CreatedAt, p.UpdatedAt = now, now
	if cur != nil {
		p.CreatedAt = cur.CreatedAt
		p.APIKeySealed, p.APIKeyHint = cur.APIKeySealed, cur.APIKeyHint
	}
	if m.sealed != nil {
		p.APIKeySealed, p.APIKeyHint = *m.sealed, m.hint
	}
	if _, err := r.log.Append(jsonRecord(recProviderPut, p)); err != nil {
		return provReply{err: fmt.Errorf("log provider: %w", err)}
	}
	r.providers[p.ID] = &p
	return provReply{p: p}
}

func (r *registry) listProviders() []Provider {
	out := make([]Provider, 0, len(r.providers))
	for _, p := range r.providers {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Provider) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (r *registry) delProvider(ref string) provReply {
	p := r.provider(ref)
	if p == nil {
		return provReply{err: ErrNotFound}
	}
	for _, a := range r.agents {
		if a.ProviderID == p.ID {
			return provReply{err: fmt.Errorf("provider %s is used by agent %s: %w", p.Name, a.AgentKey, ErrInUse)}
		}
	}
	if _, err := r.log.Append(idRecord(recProviderDel, p.ID)); err != nil {
		return provReply{err: fmt.Errorf("log provider delete: %w", err)}
	}
	delete(r.providers, p.ID)
	return provReply{}
}

// agent finds an agent by id or agent_key.
func (r *registry) agent(ref string) *Agent {
	if id, err := uuid.Parse(ref); err == nil {
		if a := r.agents[id]; a != nil {
			return a
		}
	}
	for _, a := range r.agents {
		if a.AgentKey == ref {
			return a
		}
	}
	return nil
}

func (r *registry) getAgent(m getAgent) agentReply {
	a := r.agent(m.ref)
	if a == nil || m.user != "" && !a.CanUse(m.user) {
		return agentReply{err: ErrNotFound}
	}
	out := agentReply{a: *a}
	if m.resolve {
		p := r.providers[a.ProviderID]
		if p == nil {
			return agentReply{err: fmt.Errorf("agent %s has no provider: %w", a.AgentKey, ErrNotFound)}
		}
		out.p = *p
	}
	return out
}

func (r *registry) listAgents(user string) agentReply {
	var out []Agent
	for _, a := range r.agents {
		if a.CanUse(user) {
			out = append(out, *a)
		}
	}
	sortAgents(out)
	return agentReply{as: out}
}

func (r *registry) allAgents() []Agent {
	out := make([]Agent, 0, len(r.agents))
	for _, a := range r.agents {
		out = append(out, *a)
	}
	sortAgents(out)
	return out
}

func sortAgents(as []Agent) {
	slices.SortFunc(as, func(a, b Agent) int { return strings.Compare(a.AgentKey, b.AgentKey) })
}

func (r *registry) putAgent(m putAgent) agentReply {
	now := r.clock.Now().UTC()
	var a Agent
	if m.ref == "" {
		a = Agent{ID: uuid.New(), OwnerID: m.user, Status: AgentActive, TimeoutSeconds: 60, CreatedAt: now}
	} else {
		cur := r.agent(m.ref)
		if cur == nil || !cur.CanUse(m.user) {
			return agentReply{err: ErrNotFound}
		}
		if cur.OwnerID != m.user {
			return agentReply{err: ErrForbidden}
		}
		a = *cur
	}
	if err := r.applyAgentInput(&a, m.in, m.ref == ""); err != nil {
		return agentReply{err: err}
	}
	a.UpdatedAt = now
	if _, err := r.log.Append(jsonRecord(recAgentPut, a)); err != nil {
		return agentReply{err: fmt.Errorf("log agent: %w", err)}
	}
	r.agents[a.ID] = &a
	return agentReply{a: a}
}

var agentKeyRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

func (r *registry) applyAgentInput(a *Agent, in AgentInput, create bool) error {
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
		for _, o := range r.agents {
			if o.AgentKey == k && o.ID != a.ID {
				return fmt.Errorf("agent_key %q: %w", k, ErrExists)
			}
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
		p := r.provider(*in.Provider)
		if p == nil {
			return fmt.Errorf("provider %q does not exist: %w", *in.Provider, ErrInvalid)
		}
		a.ProviderID = p.ID
	}
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
	if in.SharedWith != nil {
		sw := slices.Clone(*in.SharedWith)
		slices.Sort(sw)
		a.SharedWith = slices.Compact(sw)
	}
	return nil
}

func (r *registry) delAgent(m delAgent) agentReply {
	a := r.agent(m.ref)
	if a == nil || !a.CanUse(m.user) {
		return agentReply{err: ErrNotFound}
	}
	if a.OwnerID != m.user {
		return agentReply{err: ErrForbidden}
	}
	if _, err := r.log.Append(idRecord(recAgentDel, a.ID)); err != nil {
		return agentReply{err: fmt.Errorf("log agent delete: %w", err)}
	}
	delete(r.agents, a.ID)
	return agentReply{}
}
