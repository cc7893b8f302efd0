package keys

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/cluster"
	"gatehouse/actors/cluster/transport"
)

// The keys' side of cluster mode (docs/cluster.md): the shards of the
// key space this node owns (clusterHandler: Acquired, Released), the
// admissions other nodes forward to it (AdmitOwned) and the ones it
// forwards to an owner (forward), and other nodes' key records applied in
// the key's shard or live key actor (foreignKey). The key actors' quota
// is in keyactorcluster.go, the shards' in shardcluster.go.

// enableCluster turns a shard's cluster mode on (sent before the node
// starts, so it precedes every ownership message).
type enableCluster struct{}

// Timings of the keys' cluster mode.
const (
	clusterTimeout = 3 * time.Second        // one etcd request or forward
	ownerWait      = 4 * time.Second        // how long an admission waits for a shard to get an owner
	ownerPoll      = 25 * time.Millisecond  // how often it looks
	staleRetry     = 250 * time.Millisecond // when an owner that said "not the owner" is asked again
	loadBackoff    = 200 * time.Millisecond // the first pause after loading a shard failed
	maxLoadPause   = 2 * time.Second
	settleTimeout  = 2 * time.Second // a graceful release's settling
	commitChunk    = 128             // values a fenced commit carries at most
)

// clusterKeys is the keys' part of cluster mode (nil: a single node).
type clusterKeys struct {
	env   actors.ClusterEnv
	reqID atomic.Uint64
	// lastGiveUp is the Unix second a forward last gave up (logs are
	// throttled to one a second).
	lastGiveUp atomic.Int64
}

// JoinCluster turns the shards' cluster mode on (actors.ClusterMember);
// the engine calls it before the node starts, so it precedes every
// ownership message.
func (s *Service) JoinCluster(env actors.ClusterEnv) {
	cm := &clusterKeys{env: env}
	// Request ids start anywhere: an owner remembers answers by (address,
	// id) for a while, and a node restarted on the same cluster address
	// must not repeat its previous process's ids.
	cm.reqID.Store(rand.Uint64() >> 1)
	s.cm = cm
	s.deps.cl = &clusterCtx{timeout: clusterTimeout, onReserve: func(err error) {
		if err != nil {
			s.m.reservations.WithLabelValues("failed").Inc()
		} else {
			s.m.reservations.WithLabelValues("committed").Inc()
		}
	}}
	for _, pid := range s.shards {
		s.root.Send(pid, enableCluster{})
	}
}

// NodeStarted gives the key actors the node (actors.ClusterMember).
func (s *Service) NodeStarted(node actors.ClusterNode) { s.deps.cl.node = node }

// Acquired loads the quota records of a cluster shard this node won
// (cluster.Handler).
func (s *Service) Acquired(cs int, epoch int64) { go s.loadShard(cs, epoch) }

// Released drops a cluster shard (cluster.Handler).
func (s *Service) Released(cs int, epoch int64, graceful bool) {
	s.releaseShard(cs, epoch, graceful)
}

// loadShard reads the quota records of a cluster shard this node just won
// and hands each local shard those of its keys. Until then admissions for
// the shard's keys wait (parked in their shard).
func (s *Service) loadShard(cs int, epoch int64) {
	node := s.cm.env.WaitNode(-1) // once StartNode returned, whichever way
	if node == nil {
		return
	}
	pause := loadBackoff
	var data map[string][]byte
	for {
		if e, ok := node.Owns(cs); !ok || e != epoch || s.cm.env.Closed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
		var err error
		data, err = node.Load(ctx, cs)
		cancel()
		if err == nil {
			break
		}
		s.lg.Warn("cluster: load shard", "shard", cs, "err", err)
		time.Sleep(pause)
		pause = min(2*pause, maxLoadPause)
	}
	per := make([]map[uuid.UUID]*cluster.Quota, len(s.shards))
	for i := range per {
		per[i] = map[uuid.UUID]*cluster.Quota{}
	}
	for name, b := range data {
		id, err := uuid.Parse(name)
		if err != nil {
			continue // not a key's record
		}
		q, err := cluster.DecodeQuota(b)
		if err != nil {
			// Whatever it counted is unknown: refuse the key for the
			// hour rather than risk admitting beyond its limit.
			s.lg.Error("cluster: unreadable quota record, the key is refused for an hour", "shard", cs, "key_id", id, "err", err)
			q = cluster.Quota{Outstanding: 1 << 31, At: s.clock.Now().Unix()}
		}
		per[shardOfID(id, len(s.shards))][id] = &q
	}
	for i, pid := range s.shards {
		s.root.Send(pid, clusterReady{cs: cs, epoch: epoch, quotas: per[i]})
	}
}

// releaseShard drops a cluster shard. On a graceful release, while the
// epoch still holds, it commits each key's settle record so the successor
// counts nothing as outstanding.
func (s *Service) releaseShard(cs int, epoch int64, graceful bool) {
	start := time.Now()
	defer func() {
		if d := time.Since(start); d > 300*time.Millisecond {
			s.lg.Warn("cluster: a shard's release took long", "shard", cs, "graceful", graceful, "duration", d)
		}
	}()
	out := make(chan cluster.Put, 1024)
	replies := make(chan releasedReply, len(s.shards))
	for _, pid := range s.shards {
		s.root.Send(pid, clusterReleased{cs: cs, epoch: epoch, graceful: graceful, out: out, reply: replies})
	}
	if !graceful {
		return
	}
	var puts []cluster.Put
	shardsLeft, live, got := len(s.shards), 0, 0
	deadline := time.NewTimer(settleTimeout)
	defer deadline.Stop()
wait:
	for shardsLeft > 0 || got < live {
		select {
		case r := <-replies:
			shardsLeft--
			live += r.live
			puts = append(puts, r.puts...)
		case p := <-out:
			got++
			if p.Name != "" {
				puts = append(puts, p)
			}
		case <-deadline.C:
			s.lg.Warn("cluster: settling a released shard timed out", "shard", cs)
			go func(n int) { // the late answers must not block their actors
				for range n {
					<-out
				}
			}(live - got)
			break wait
		}
	}
	node := s.cm.env.WaitNode(settleTimeout)
	if node == nil && len(puts) > 0 {
		s.lg.Warn("cluster: a shard released before the node started is not settled", "shard", cs)
		return
	}
	for len(puts) > 0 {
		n := min(len(puts), commitChunk)
		ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
		err := node.Commit(ctx, cs, epoch, puts[:n]...)
		cancel()
		if err != nil {
			// The successor counts the outstanding tokens as spent: it
			// under-admits by at most a chunk per key, never over.
			s.lg.Warn("cluster: settle a released shard", "shard", cs, "err", err)
			return
		}
		puts = puts[n:]
	}
}

// AdmitOwned admits one request forwarded by another node for a key whose
// shard this node owns (transport.Admitter).
func (s *Service) AdmitOwned(ctx context.Context, keyID string) transport.Verdict {
	id, err := uuid.Parse(keyID)
	if err != nil || s.cm == nil {
		return transport.Verdict{Code: transport.KeyInvalid}
	}
	m := s.authPool.Get()
	m.id, m.routed, m.consume, m.forwarded = id, true, true, true
	r, ok, _ := actors.Ask(ctx, s.root, s.shards[shardOfID(id, len(s.shards))], m, m.reply, s.dog.C())
	if !ok {
		return transport.Verdict{Code: transport.Unavailable} // m may still be answered: not reused
	}
	m.forwarded = false // authorize sets the other fields, not this one
	s.authPool.Put(m)
	return verdictOf(r)
}

func verdictOf(r AuthResult) transport.Verdict {
	v := transport.Verdict{Limit: r.Limit.Limit, Remaining: r.Limit.Remaining, Reset: r.Limit.Reset, RetryAfter: r.Limit.RetryAfter}
	switch {
	case r.Err == nil:
		v.Code = transport.Admitted
	case errors.Is(r.Err, ErrRateLimited):
		v.Code = transport.Limited
	case errors.Is(r.Err, errNotOwner):
		v.Code = transport.NotOwner
	case errors.Is(r.Err, ErrKeyRevoked):
		v.Code = transport.KeyRevoked
	case errors.Is(r.Err, ErrKeyExpired):
		v.Code = transport.KeyExpired
	case errors.Is(r.Err, ErrKeyInvalid), errors.Is(r.Err, ErrKeyNotFound):
		v.Code = transport.KeyInvalid
	default:
		v.Code = transport.Unavailable
	}
	return v
}

// forwardCounted is forward, counted by outcome.
func (s *Service) forwardCounted(ctx context.Context, r AuthResult) AuthResult {
	r = s.forward(ctx, r)
	res := "admitted"
	switch {
	case errors.Is(r.Err, ErrRateLimited):
		res = "limited"
	case errors.Is(r.Err, actors.ErrUnavailable):
		res = "unavailable"
	case r.Err != nil:
		res = "refused"
	}
	s.m.forwarded.WithLabelValues(res).Inc()
	return r
}

// forward asks the owner of the key's cluster shard to admit the request
// r was authorized for here (the secret checked, the key active). Until
// ownerWait has passed it asks again, the owner as then known: after a
// timeout or a transport error (the same owner may answer the retry; its
// request id makes a repeat count once), after "not the owner" (a shard
// changing hands answers so until its successor claims it) and after
// "unavailable" (an owner still loading the shard or reserving).
func (s *Service) forward(ctx context.Context, r AuthResult) AuthResult {
	cm := s.cm
	cs := int(r.fwd - 1)
	r.fwd = 0
	reqID := cm.reqID.Add(1)
	deadline := time.Now().Add(ownerWait)
	var last error
	var stale int64          // the epoch of an owner that said it is not the owner
	var staleUntil time.Time // until when that epoch is not asked again
	for {
		addr, epoch, err := s.ownerOf(ctx, cs, stale, staleUntil, deadline)
		if err != nil {
			last = err
			break
		}
		v, err := cm.env.Forward(ctx, addr, r.KeyID.String(), reqID)
		switch {
		case err != nil:
			last = err
		case v.Code == transport.NotOwner:
			// Usually the shard is changing hands: wait for the next
			// epoch. But an owner whose lease check failed for a moment
			// answers so too and keeps its epoch: ask it again soon.
			last, stale, staleUntil = errNotOwner, epoch, time.Now().Add(staleRetry)
		case v.Code == transport.Unavailable:
			last = errors.New("the owner cannot admit now")
		default:
			return resultOf(r, v)
		}
		if !time.Now().Before(deadline) || sleepCtx(ctx, ownerPoll) != nil {
			break
		}
	}
	if now := time.Now().Unix(); cm.lastGiveUp.Swap(now) != now { // at most one line a second
		s.lg.Warn("cluster: no owner admitted a forwarded request in time", "shard", cs, "waited", ownerWait, "err", last)
	}
	return AuthResult{Err: fmt.Errorf("authorize: forward to the key's owner: %w: %w", actors.ErrUnavailable, last)}
}

// resultOf is the AuthResult of the owner's verdict v on r.
func resultOf(r AuthResult, v transport.Verdict) AuthResult {
	r.Limit.Allowed = v.Code == transport.Admitted
	r.Limit.Limit, r.Limit.Remaining, r.Limit.Reset, r.Limit.RetryAfter = v.Limit, v.Remaining, v.Reset, v.RetryAfter
	r.Limit.Used = max(0, v.Limit-v.Remaining)
	switch v.Code {
	case transport.Admitted:
		return r
	case transport.Limited:
		r.Err = ErrRateLimited
		return r
	case transport.KeyRevoked:
		return AuthResult{KeyID: r.KeyID, UserID: r.UserID, Err: ErrKeyRevoked}
	case transport.KeyExpired:
		return AuthResult{KeyID: r.KeyID, UserID: r.UserID, IsActive: r.IsActive, Err: ErrKeyExpired}
	case transport.KeyInvalid:
		return AuthResult{Err: ErrKeyInvalid}
	}
	return AuthResult{Err: fmt.Errorf("authorize: the key's owner answered %d: %w", v.Code, actors.ErrUnavailable)}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ownerOf returns the address and epoch of the owner of cluster shard cs
// (the one at epoch stale only from staleUntil on), waiting until
// deadline for one when the shard is between owners.
func (s *Service) ownerOf(ctx context.Context, cs int, stale int64, staleUntil, deadline time.Time) (string, int64, error) {
	self := s.deps.cl.node
	for {
		node, addr, epoch, ok := self.Owner(cs)
		if ok && (epoch != stale || !time.Now().Before(staleUntil)) {
			if node != self.ID() {
				return addr, epoch, nil
			}
			// This node, which did not own it a moment ago: a claim
			// or a release is under way.
			if e, mine := self.Owns(cs); mine && e == epoch {
				return addr, epoch, nil
			}
		}
		if !time.Now().Before(deadline) {
			return "", 0, fmt.Errorf("no owner for cluster shard %d", cs)
		}
		select {
		case <-ctx.Done():
			return "", 0, ctx.Err()
		case <-time.After(ownerPoll):
		}
	}
}

// lockKey takes the cluster-wide lock of key id for a change (nothing on
// a single node, or before SetClusterLocks).
func (s *Service) lockKey(ctx context.Context, id uuid.UUID) (func(), error) {
	return s.lock(ctx, "key/"+id.String())
}

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

func (s *Service) applyForeignKey(ctx context.Context, seq uint64, ev keyEvent) error {
	m := &foreignKey{seq: seq, ev: ev, reply: make(chan foreignReply, 1)}
	r, _, err := actors.Ask(ctx, s.root, s.shards[shardOfID(ev.keyID(), len(s.shards))], m, m.reply, nil)
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
