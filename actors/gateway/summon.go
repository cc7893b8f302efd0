package gateway

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// Summoning: an agent created with a description (other_config) and no
// system prompt starts in status summoning; a background turn of the
// agent runtime (agentrun.Runtime.Summon, which the runtime owns and its
// Close ends) asks its provider to write the prompt, then FinishSummon
// makes the agent active, or summon_failed with the error kept. Resummon retries. A summon the process died during
// never stays stuck: Start turns every agent still summoning into
// summon_failed ("interrupted by a restart"). In cluster mode a summon
// runs on the node that started it (the record names it, SummonNode), and
// only that node fails it when it starts again: another node's start must
// not fail a summon still running elsewhere. A node that never comes back
// would leave its summons stuck, so every node also watches the cluster's
// members (SetMembers): a summon whose node has been out of the cluster
// for OrphanedSummonAfter fails ("its node left the cluster"). Several
// nodes may record that failure; the records are the same but for the time.
// The summon's node, if it was only cut off and still finishes, finds the
// agent failed (ErrInUse) and its prompt is dropped: resummon retries.

// OrphanedSummonAfter is how long a summon's node must be out of the
// cluster before another node fails the summon: longer than a restart.
const OrphanedSummonAfter = 30 * time.Second

// summonSweepEvery is how often a node looks for orphaned summons.
const summonSweepEvery = 5 * time.Second

// interruptedSummon is the SummonError of a summon a restart cut short.
const interruptedSummon = "interrupted by a restart; resummon to retry"

// orphanedSummon is the SummonError of a summon whose node left the
// cluster and did not come back.
func orphanedSummon(node string) string {
	return "interrupted: node " + node + " left the cluster; resummon to retry"
}

// summonSweep is the state of the orphaned-summon sweep: at most one runs
// at a time; gone (owned by the sweep in flight) records since when each
// summon's node has been seen missing.
type summonSweep struct {
	running atomic.Bool
	last    atomic.Int64 // unix nanoseconds of the last sweep
	gone    map[uuid.UUID]time.Time
}

// SetMembers gives the gateway, in cluster mode, the ids of the live nodes
// of the cluster (called on every tick, from a goroutine of its own: it
// must not block for long). Without it no summon is failed for its node's
// absence.
func (g *Gateway) SetMembers(members func() []string) { g.members.Store(&members) }

// sweepOrphanedSummons starts a sweep when one is due (Tick must not
// block: the sweep runs on its own goroutine and then in the registry).
func (g *Gateway) sweepOrphanedSummons(now time.Time) {
	sw := &g.summons
	g.sweepMembers(now, &sw.running, &sw.last, func(ctx context.Context, alive map[string]bool) {
		if err := do(ctx, g, func(r *registry) error { r.failOrphaned(alive, now, sw); return nil }); err != nil {
			g.lg.Warn("fail summons of nodes that left", "err", err)
		}
	})
}

// sweepMembers runs sweep on its own goroutine with the cluster's live
// members (Tick must not block), in cluster mode, when summonSweepEvery
// has passed since the last (last), and one at a time (running). A node
// that has no view of the cluster (cut off: no members) decides nothing.
func (g *Gateway) sweepMembers(now time.Time, running *atomic.Bool, last *atomic.Int64, sweep func(ctx context.Context, alive map[string]bool)) {
	mp := g.members.Load()
	if mp == nil || g.cfg.NodeID == "" || now.UnixNano()-last.Load() < int64(summonSweepEvery) || !running.CompareAndSwap(false, true) {
		return
	}
	last.Store(now.UnixNano())
	go func() {
		defer running.Store(false)
		alive := map[string]bool{}
		for _, id := range (*mp)() {
			alive[id] = true
		}
		if len(alive) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), recoverTimeout)
		defer cancel()
		sweep(ctx, alive)
	}()
}

// failOrphaned fails the summons whose node has been out of alive for
// OrphanedSummonAfter, as of now.
func (r *registry) failOrphaned(alive map[string]bool, now time.Time, sw *summonSweep) {
	seen := map[uuid.UUID]bool{}
	for _, a := range r.part.agents.rows {
		if a.Status != AgentSummoning || a.SummonNode == "" || a.SummonNode == r.node || alive[a.SummonNode] {
			continue
		}
		seen[a.ID] = true
		if sw.gone == nil {
			sw.gone = map[uuid.UUID]time.Time{}
		}
		since, ok := sw.gone[a.ID]
		if !ok {
			sw.gone[a.ID] = now
			continue
		}
		if now.Sub(since) < OrphanedSummonAfter {
			continue
		}
		next := *a
		next.Status, next.SummonError, next.SummonNode, next.UpdatedAt = AgentSummonFailed, orphanedSummon(a.SummonNode), "", r.clock.Now().UTC()
		if err := commit(r.log, r.part, entitySaved{&next}); err != nil {
			r.lg.Warn("orphaned summon not failed", "agent", a.AgentKey, "err", err)
			continue
		}
		r.lg.Warn("failed a summon whose node left the cluster", "agent", a.AgentKey, "node", a.SummonNode, "missing_for", now.Sub(since))
	}
	for id := range sw.gone {
		if !seen[id] {
			delete(sw.gone, id)
		}
	}
}

func (r *registry) finishSummon(id uuid.UUID, prompt, failure string) (Agent, error) {
	a, ok := r.part.agents.rows[id]
	if !ok {
		return Agent{}, ErrNotFound
	}
	if a.Status != AgentSummoning {
		// Finished meanwhile (the owner activated it, or a restart failed it).
		return a.view(&r.part.providers), fmt.Errorf("agent %s is %s, not summoning: %w", a.AgentKey, a.Status, ErrInUse)
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
	return next.view(&r.part.providers), nil
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
	return next.view(&r.part.providers), nil
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
