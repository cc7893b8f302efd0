package gateway

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// Summoning: an agent created with a description (other_config) and no
// system prompt starts in status summoning; a background turn of the
// agent runtime (runtime.Runtime.Summon, which the runtime owns and its
// Close ends) asks its provider to write the prompt, then FinishSummon
// makes the agent active, or summon_failed with the error kept. Resummon retries. A summon the process died during
// never stays stuck: Start turns every agent still summoning into
// summon_failed ("interrupted by a restart"). In cluster mode a summon
// runs on the node that started it (the record names it, SummonNode), and
// only that node fails it when it starts again: another node's start must
// not fail a summon still running elsewhere.

// interruptedSummon is the SummonError of a summon a restart cut short.
const interruptedSummon = "interrupted by a restart; resummon to retry"

func (r *registry) finishSummon(id uuid.UUID, prompt, failure string) (Agent, error) {
	a, ok := r.part.agents.rows[id]
	if !ok {
		return Agent{}, ErrNotFound
	}
	if a.Status != AgentSummoning {
		// Finished meanwhile (the owner activated it, or a restart failed it).
		return a.view(), fmt.Errorf("agent %s is %s, not summoning: %w", a.AgentKey, a.Status, ErrInUse)
	}
	next := *a
	next.SummonNode = ""
	if failure != "" {
		next.Status, next.SummonError = AgentSummonFailed, failure
	} else {
		next.Status, next.SummonError, next.SystemPrompt = AgentActive, "", prompt
	}
	next.UpdatedAt = r.clock.Now().UTC()
	if err := commit(r.log, r.part, entitySaved{&next}); err != nil {
		return Agent{}, fmt.Errorf("log summon: %w", err)
	}
	return next.view(), nil
}

func (r *registry) resummon(ref, user string) (Agent, error) {
	a, err := r.owned(ref, user)
	switch {
	case err != nil:
		return Agent{}, err
	case a.Status == AgentSummoning:
		return Agent{}, fmt.Errorf("agent %s is summoning already: %w", a.AgentKey, ErrInUse)
	case a.Description == "":
		return Agent{}, fmt.Errorf("other_config.description is empty: nothing to summon from: %w", ErrInvalid)
	}
	next := *a
	next.Status, next.SummonError, next.SummonNode, next.UpdatedAt = AgentSummoning, "", r.node, r.clock.Now().UTC()
	au := audit{action: "agent.resummon", entityType: string(kindAgent), entityID: a.ID.String(), summary: fmt.Sprintf("resummoned agent %q", a.AgentKey)}
	if err := r.commit(au, entitySaved{&next}); err != nil {
		return Agent{}, fmt.Errorf("log resummon: %w", err)
	}
	return next.view(), nil
}

func (r *registry) failInterrupted() {
	for _, a := range r.part.agents.rows {
		if a.Status != AgentSummoning || (a.SummonNode != "" && a.SummonNode != r.node) {
			continue // not summoning, or summoning on another node of the cluster
		}
		next := *a
		next.Status, next.SummonError, next.SummonNode, next.UpdatedAt = AgentSummonFailed, interruptedSummon, "", r.clock.Now().UTC()
		if err := commit(r.log, r.part, entitySaved{&next}); err != nil {
			r.lg.Error("interrupted summon not logged", "agent", a.AgentKey, "err", err)
		}
	}
}

// FinishSummon ends agent id's summoning: prompt becomes its system prompt
// and it is active, or, with failure set, it is summon_failed with that
// error. ErrInUse when it is no longer summoning.
func (g *Gateway) FinishSummon(ctx context.Context, id uuid.UUID, prompt, failure string) (Agent, error) {
	return call(ctx, g, func(r *registry) (Agent, error) { return r.finishSummon(id, prompt, failure) })
}

// Resummon puts the agent (owned by user) back into summoning, for the
// caller to start the summon run. ErrInUse while it is summoning,
// ErrInvalid without a description, ErrNotFound, ErrForbidden.
func (g *Gateway) Resummon(ctx context.Context, user, ref string) (Agent, error) {
	return call(ctx, g, func(r *registry) (Agent, error) { return r.resummon(ref, user) })
}
