package gateway

import (
	"context"
	"fmt"
	"maps"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/wal"
)

// Cluster mode: every node follows one replicated log and applies the
// records the other nodes wrote (actors.LiveApplier). A record goes by the
// routing rule of replay (route) to the actor owning that part of the
// state, which applies it with its part's apply, the function replay and
// its own commits use; nothing else happens there: no append (the writer
// logged it), no outbound call. What is derived outside the state follows
// lazily, as after a restart: the registry's and the runs actor's
// published views are republished before ApplyLive returns; an MCP
// server's connection (mcppool) reopens on its next use when the server's
// UpdatedAt moved.

var _ actors.LiveApplier = (*Gateway)(nil)

// liveApply asks an actor to apply ev, logged by another node at seq, to
// its part, and to send on done once it has (and republished its view).
// A toHolder event is applied only by the tenant shard that holds its
// entity (the others send on done too).
type liveApply struct {
	seq  uint64
	ev   event
	d    dest
	done chan struct{}
}

// ApplyLive applies a record another node wrote (cluster mode; see
// actors.LiveApplier): called from one goroutine, in log order, after
// Start. It returns once the owning actor has applied it, or with ctx's
// error (the actor still applies it). A record for an entity this node
// does not hold (not yet, or no more) applies as on replay: a delete or a
// turn of what is gone changes nothing; a save creates it.
func (g *Gateway) ApplyLive(ctx context.Context, seq uint64, r wal.Record) error {
	if g.registry == nil {
		return fmt.Errorf("gateway: ApplyLive before Start: %w", actors.ErrUnavailable)
	}
	ev, err := decodeEvent(r)
	if err != nil {
		return fmt.Errorf("seq %d: %w", seq, err)
	}
	d := route(ev, *g.homes.Load(), len(g.tenants))
	g.placeLive(ev)
	var pids []*actor.PID
	switch d.to {
	case toKeys:
		pids = []*actor.PID{g.shards[d.i]}
	case toRegistry:
		pids = []*actor.PID{g.registry}
	case toTenant:
		pids = []*actor.PID{g.tenants[d.i]}
	case toHolder:
		pids = g.tenants
	case toRuns:
		pids = []*actor.PID{g.runs}
	}
	done := make(chan struct{}, len(pids))
	for _, pid := range pids {
		g.root.Send(pid, liveApply{seq: seq, ev: ev, d: d, done: done})
	}
	for range pids {
		if _, err := await(ctx, done); err != nil {
			return fmt.Errorf("apply seq %d: %w", seq, err)
		}
	}
	return nil
}

// placeLive keeps the key homes right for a key another node saved or
// deleted: a key whose id maps to another shard than its hash (one drawn
// by a node with another KeyShards) is found through moved, which is
// replaced, never changed, since RevokeAPIKey reads it in its caller's
// goroutine.
func (g *Gateway) placeLive(ev event) {
	h := g.homes.Load()
	var id uuid.UUID
	home, moved := 0, false
	switch e := ev.(type) {
	case entitySaved:
		k, ok := e.ent.(*apiKeyRec)
		if !ok {
			return
		}
		id, home = k.ID, shardOf(k.Hash, h.n)
		moved = shardOfID(k.ID, h.n) != home
	case entityDeleted:
		if e.kind != kindAPIKey {
			return
		}
		id = e.id
	default:
		return
	}
	if cur, ok := h.moved[id]; ok == moved && (!moved || cur == home) {
		return
	}
	next := keyHomes{n: h.n, moved: maps.Clone(h.moved)}
	if moved {
		next.moved[id] = home
	} else {
		delete(next.moved, id)
	}
	g.homes.Store(&next)
}

// applyLive is the tenant shard's side of ApplyLive.
func (p *tenantPart) applyLive(m liveApply) {
	if m.d.to != toHolder || p.holds(m.d.k, m.d.id) {
		applyForeign(p, m.seq, m.ev)
	}
}

func (p *keyPart) marks() *liveMarks      { return &p.live }
func (p *tenantPart) marks() *liveMarks   { return &p.live }
func (r *registryPart) marks() *liveMarks { return &r.live }

// liveMarks are a part's actors.LiveMarks, by entity: records that add to
// a state (turns, runs) and audit entries (written once) take none.
type liveMarks struct{ actors.LiveMarks[liveRef] }

type liveRef struct {
	k  kind
	id uuid.UUID
}

// marked is a part that keeps live marks (the key, tenant and registry
// parts; commitAll marks their actors' records).
type marked interface{ marks() *liveMarks }

// liveRefOf is the entity whose full state ev sets, if it takes a mark.
func liveRefOf(ev event) (liveRef, bool) {
	switch e := ev.(type) {
	case entitySaved:
		k, id := e.ent.ref()
		return liveRef{k, id}, k != kindActivity
	case entityDeleted:
		return liveRef{e.kind, e.id}, true
	}
	return liveRef{}, false
}

// own marks ev, this node's record at seq.
func (m *liveMarks) own(seq uint64, ev event) {
	if r, ok := liveRefOf(ev); ok {
		m.Own(seq, r)
	}
}

// stale reports whether ev, another node's record at seq, is older than
// this node's last record of the same entity.
func (m *liveMarks) stale(seq uint64, ev event) bool {
	m.Passed(seq)
	r, ok := liveRefOf(ev)
	return ok && m.Older(seq, r)
}

// applyForeign applies another node's record to p unless p's actor wrote
// the entity later (liveMarks).
func applyForeign(p interface {
	part
	marked
}, seq uint64, ev event) {
	if !p.marks().stale(seq, ev) {
		p.apply(seq, ev)
	}
}
