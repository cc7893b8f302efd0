package keys

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"gatehouse/actors/cluster"
)

// shardCluster is a local shard's part of cluster mode: which cluster
// shards this node owns and has loaded, the quota records loaded for its
// keys and not yet taken over, and the Allowances of its passive keys.
// Only the shard actor touches it.
type shardCluster struct {
	ready  map[int]int64                        // cluster shard → the epoch loaded
	loaded map[int]map[uuid.UUID]*cluster.Quota // records not yet taken over
	allow  map[uuid.UUID]*clusterAllow          // passive keys' Allowances
	parked map[int][]needAllow                  // asks that came before the load
}

func newShardCluster() *shardCluster {
	return &shardCluster{ready: map[int]int64{}, loaded: map[int]map[uuid.UUID]*cluster.Quota{},
		allow: map[uuid.UUID]*clusterAllow{}, parked: map[int][]needAllow{}}
}

// clusterReady: this node owns cluster shard cs at epoch and has read its
// records; quotas are those of this local shard's keys.
type clusterReady struct {
	cs     int
	epoch  int64
	quotas map[uuid.UUID]*cluster.Quota
}

// clusterReleased: this node no longer owns cs at epoch. When graceful,
// the shard settles its passive keys' Allowances and asks each live key
// actor to settle on out; it answers how many live actors will.
type clusterReleased struct {
	cs       int
	epoch    int64
	graceful bool
	out      chan<- cluster.Put
	reply    chan<- releasedReply
}

type releasedReply struct {
	puts []cluster.Put // settled passive keys
	live int           // live key actors asked to settle on out
}

func (s *shard) clusterReady(ctx actor.Context, m clusterReady) {
	c := s.cl
	if e, ok := c.ready[m.cs]; ok && e > m.epoch {
		return // a later acquisition already loaded
	}
	c.ready[m.cs] = m.epoch
	c.loaded[m.cs] = m.quotas
	parked := c.parked[m.cs]
	delete(c.parked, m.cs)
	for _, p := range parked {
		s.needAllow(ctx, p)
	}
}

func (s *shard) needAllow(ctx actor.Context, m needAllow) {
	c := s.cl
	e, ok := c.ready[m.cs]
	switch {
	case !ok || e < m.epoch:
		c.parked[m.cs] = append(c.parked[m.cs], m)
		return
	case e > m.epoch:
		ctx.Send(m.pid, takeOver{}) // stale: the actor asks again
		return
	}
	var q *cluster.Quota
	if l := c.loaded[m.cs]; l != nil {
		q = l[m.id]
		delete(l, m.id)
	}
	ca := &clusterAllow{cs: m.cs, epoch: m.epoch, a: cluster.TakeOver(q, s.deps.clock.Now().Unix())}
	ctx.Send(m.pid, takeOver{ca: ca})
}

func (s *shard) clusterReleased(ctx actor.Context, m clusterReleased) {
	c := s.cl
	if e, ok := c.ready[m.cs]; ok && e <= m.epoch {
		delete(c.ready, m.cs)
		delete(c.loaded, m.cs)
	}
	for _, p := range c.parked[m.cs] {
		if p.epoch <= m.epoch {
			ctx.Send(p.pid, takeOver{})
		}
	}
	delete(c.parked, m.cs)
	var r releasedReply
	now := s.deps.clock.Now().Unix()
	for id, ca := range c.allow {
		if ca.cs != m.cs || ca.epoch > m.epoch {
			continue
		}
		if m.graceful && ca.epoch == m.epoch {
			q := ca.a.Settle(now)
			r.puts = append(r.puts, cluster.Put{Name: id.String(), Value: q.Encode()})
		}
		delete(c.allow, id)
	}
	if m.graceful {
		for sl := range s.live {
			if sl.live.passivating {
				continue // its Allowance comes back with passivated; see clusterLate
			}
			r.live++
			ctx.Send(sl.live.pid, settleKey{cs: m.cs, epoch: m.epoch, out: m.out})
		}
	}
	m.reply <- r
}
