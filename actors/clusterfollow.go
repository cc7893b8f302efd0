package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"gatehouse/wal"
	"gatehouse/wal/etcdlog"
)

// Every node follows the replicated log and applies what the other nodes
// wrote, through the same transitions replay uses, each in the actor that
// owns that part of the state: key events in the key's shard (or its live
// key actor), an extension's records (the accounts' among them) through
// its LiveApplier. A node's own records were applied by its actors
// when their append was acknowledged, and are skipped (except those an
// OwnApplier applies in log order).
//
// Records reach a node once each and in log order, so the follower applies
// them without the replay watermarks (which guard a snapshot's overlap with
// the log; cluster mode's snapshots are exact at their position, and a
// node follows from there): a record another node
// wrote before one of this node's own that was applied already still
// counts (a key's usage flushed by its previous owner, say).

// foreignKey applies one key event another node logged.
type foreignKey struct {
	seq   uint64
	ev    keyEvent
	reply chan foreignReply
}

type foreignReply struct {
	fx           dirEffects
	created      bool
	deletedOwner uuid.UUID // the owner of a key this event deleted
}

// applyForeignKey is applyKey without the replay watermarks (see above),
// which it leaves at least where they were.
func applyForeignKey(st *keyState, seq uint64, ev keyEvent) (*keyState, dirEffects, error) {
	if st == nil {
		return applyKey(nil, seq, ev)
	}
	applied, used := st.applied, st.usageSeq
	st.applied, st.usageSeq = 0, 0
	next, fx, err := applyKey(st, seq, ev)
	st.applied, st.usageSeq = max(applied, st.applied), max(used, st.usageSeq)
	return next, fx, err
}

func (s *shard) foreignKey(ctx actor.Context, m *foreignKey) {
	id := m.ev.keyID()
	sl := s.keys.get(id)
	if sl == nil {
		next, fx, _ := applyKey(nil, m.seq, m.ev)
		if next != nil {
			s.keys.put(&slot{st: *next})
		}
		m.reply <- foreignReply{fx: fx, created: next != nil}
		return
	}
	if l := sl.live; l != nil {
		if l.passivating {
			l.held.msgs = append(l.held.msgs, m)
			return
		}
		ctx.Send(l.pid, m)
		return
	}
	owner := sl.st.rec.owner
	next, fx, _ := applyForeignKey(&sl.st, m.seq, m.ev)
	r := foreignReply{fx: fx}
	if next == nil {
		s.keys.del(id)
		if s.cl != nil {
			delete(s.cl.allow, id)
		}
		r.deletedOwner = owner
	}
	m.reply <- r
}

// foreign applies another node's event to the live key.
func (a *keyActor) foreign(ctx actor.Context, m *foreignKey) {
	if a.gone {
		m.reply <- foreignReply{}
		return
	}
	owner := a.state.rec.owner
	next, fx, _ := applyForeignKey(a.state, m.seq, m.ev)
	r := foreignReply{fx: fx}
	if next == nil {
		a.gone = true
		a.pending, a.inflight = nil, nil
		a.release()
		if a.kc != nil {
			a.failWaiting(ErrKeyInvalid)
		}
		ctx.Send(ctx.Parent(), keyGone{id: fx.id})
		r.deletedOwner = owner
	}
	m.reply <- r
}

// follow applies the replicated log from after until ctx ends, resuming
// after a failure (etcd out of reach, a leader change) where it stopped.
func (s *System) follow(ctx context.Context, after uint64) {
	cm := s.cm
	defer close(cm.done)
	self := cm.node.ID()
	pause := followBackoff
	for ctx.Err() == nil {
		err := cm.deps.Log.Follow(ctx, after, func(seq uint64, writer string, r wal.Record) error {
			if writer != self || s.appliesOwn(r.Type) {
				if err := s.applyForeign(ctx, seq, r); err != nil {
					return err
				}
				s.m.applied.Inc()
			}
			after = seq
			cm.applied.Store(seq)
			cm.sinceSnap.Add(1)
			pause = followBackoff
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		s.m.followErrors.Inc()
		if errors.Is(err, etcdlog.ErrCompacted) {
			// The records after this node's position are gone: truncated
			// below a snapshot it is more than one snapshot behind.
			s.failCluster(fmt.Errorf("following the replicated log after %d: %w", after, err))
			return
		}
		s.lg.Warn("cluster: following the replicated log", "after", after, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, maxFollowPause)
	}
}

// appliesOwn reports whether this node's own records of type t are
// applied by the follower, in log order (OwnApplier).
func (s *System) appliesOwn(t wal.Type) bool {
	oa, ok := s.extensionFor(t).(OwnApplier)
	return ok && oa.AppliesOwn(t)
}

// applyForeign applies one record another node wrote (or one of this
// node's that its extension applies in log order: OwnApplier), through
// the LiveApplier of the domain that owns it (the keys' included).
func (s *System) applyForeign(ctx context.Context, seq uint64, r wal.Record) error {
	if r.Type == recBarrier {
		return nil
	}
	if la, ok := s.extensionFor(r.Type).(LiveApplier); ok {
		return la.ApplyLive(ctx, seq, r)
	}
	return nil
}

func (s *System) applyForeignKey(ctx context.Context, seq uint64, ev keyEvent) error {
	m := &foreignKey{seq: seq, ev: ev, reply: make(chan foreignReply, 1)}
	r, _, err := Ask(ctx, s.root, s.shards[shardOfID(ev.keyID(), len(s.shards))], m, m.reply, nil)
	if err != nil {
		return fmt.Errorf("apply seq %d: %w", seq, err)
	}
	if c, ok := ev.(keyCreated); ok && r.created {
		s.slots.add(c.rec.owner, 1)
	}
	if r.deletedOwner != uuid.Nil {
		s.slots.add(r.deletedOwner, -1)
	}
	if err := s.publish(ctx, r.fx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("apply seq %d: %w", seq, err)
	}
	return nil
}
