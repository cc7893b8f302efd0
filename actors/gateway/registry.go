package gateway

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"gatehouse/actors"
	"gatehouse/actors/clock"
)

// regView is a read of the registry's part: the methods every get, list
// and search runs (read), on a published, frozen view, and that the
// registry's operations reuse on its own part (registry embeds it). It
// has no log and no commit, so a read cannot write: a write from a read
// does not compile.
type regView struct {
	part  *registryPart
	clock clock.Clock
	lg    *slog.Logger
}

// registry owns providers and agents (its registryPart). Management
// traffic is light, so one actor serializes it, which keeps checks such as
// "still in use" atomic; sealing happens in the caller's goroutine. Its
// reads are regView's, over its own part.
type registry struct {
	regView
	log actors.EventLog
	by  *Actor // who sent the message being handled (nil: internal)
	// pub receives a frozen copy of part after each change (publish);
	// pubVersion is the part's version it holds. nil on a reader.
	pub        *atomic.Pointer[registryPart]
	pubVersion uint64
	quota      Quotas
	node       string // Config.NodeID
}

// publish makes the part's current state the readers' view, if it
// changed since the last one.
func (r *registry) publish() {
	if r.pub != nil && (r.pub.Load() == nil || r.part.version != r.pubVersion) {
		r.pub.Store(r.part.freeze())
		r.pubVersion = r.part.version
	}
}

// Receive is the registry's mailbox entry point.
func (r *registry) Receive(ctx actor.Context) {
	r.handle(ctx.Message())
	r.publish()
}

// commit appends evs, and the audit entry of the change when an API
// caller made it, then applies them (commitAs).
func (r *registry) commit(au audit, evs ...event) error {
	return commitAs(r.log, r.part, r.by, r.clock.Now(), au, evs...)
}

// do is call for an operation that returns only an error.
func do(ctx context.Context, g *Gateway, fn func(r *registry) error) error {
	_, err := call(ctx, g, func(r *registry) (struct{}, error) { return struct{}{}, fn(r) })
	return err
}

// handle runs one message. Every operation arrives as a command (see call
// and read); the other cases are the session, memory and activity messages
// still to move onto it, the snapshot's capture and the start-up summon
// check.
func (r *registry) handle(msg any) {
	switch m := msg.(type) {
	case withActor:
		m.as(&r.by, r.handle)
	case command:
		m.run(r)
	case queryActivity:
		m.reply <- queryActivityLog(&r.part.activity, m.f)
	case captureMsg:
		m.reply <- r.part.entities(nil)
	case liveApply:
		applyForeign(r.part, m.seq, m.ev)
		r.publish() // before the answer: reads on this node see the change
		m.done <- struct{}{}
	}
}

func (r regView) getProvider(ref string) (Provider, error) {
	p, ok := r.part.providers.get(ref)
	if !ok {
		return Provider{}, ErrNotFound
	}
	return p.view(), nil
}

func (r regView) listProviders() []Provider {
	out := make([]Provider, 0, len(r.part.providers.rows))
	for _, p := range r.part.providers.rows {
		out = append(out, p.view())
	}
	slices.SortFunc(out, func(a, b Provider) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// getAgent finds the agent ref that user may use (EveryUser: any agent;
// "": none).
func (r regView) getAgent(ref, user string) (*agentRec, error) {
	a, ok := r.part.agents.get(ref)
	if !ok || user != EveryUser && !a.canUse(user) {
		return nil, ErrNotFound
	}
	return a, nil
}

// resolveAgent finds the agent ref with its provider, for a run.
func (r regView) resolveAgent(ref string) (Agent, Provider, error) {
	a, err := r.getAgent(ref, EveryUser)
	if err != nil {
		return Agent{}, Provider{}, err
	}
	p, ok := r.part.providers.rows[a.ProviderID]
	if !ok {
		return Agent{}, Provider{}, errNoProvider(a)
	}
	return a.view(&r.part.providers), p.view(), nil
}

func (r regView) listAgents(user string) []Agent {
	var out []Agent
	for _, a := range r.part.agents.rows {
		if user == EveryUser || a.canUse(user) {
			out = append(out, a.view(&r.part.providers))
		}
	}
	slices.SortFunc(out, func(a, b Agent) int { return strings.Compare(a.AgentKey, b.AgentKey) })
	return out
}
