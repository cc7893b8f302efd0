package keys

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/cluster"
)

// Cluster mode, seen from one key: only the owner of the key's cluster
// shard admits, from an Allowance (the exact window plus the tokens it has
// reserved in etcd); every other node forwards the admission to the owner.
// The key actor holds its Allowance while live and hands it to its shard
// when it passivates, as it does its state; a new epoch (the shard was
// lost and won again, or moved here) starts from the record the shard
// loaded from etcd, never from what this node remembers.

// clusterAllow is one key's Allowance on its owner, for one epoch.
type clusterAllow struct {
	cs    int   // the key's cluster shard
	epoch int64 // the ownership it was built for
	a     cluster.Allowance
}

// keyCluster is a live key actor's cluster-mode state.
type keyCluster struct {
	cs        int // -1 until computed
	ca        *clusterAllow
	asked     int64        // the epoch a takeover was asked for
	waiting   []*authorize // admissions waiting for a takeover or a reservation
	reserving uint32       // tokens of the reservation in flight
}

// errNotOwner answers a forwarded admission at a node that does not own
// the key's shard.
var errNotOwner = errors.New("actors: not the owner of the key's shard")

// needAllow asks the shard for the key's Allowance at epoch.
type needAllow struct {
	id    uuid.UUID
	cs    int
	epoch int64
	pid   *actor.PID
}

// takeOver hands a key actor its Allowance (nil: ask again, the epoch it
// asked for is gone).
type takeOver struct{ ca *clusterAllow }

// reserved is the outcome of a reservation commit.
type reserved struct {
	ca  *clusterAllow
	n   uint32
	err error
}

// settleKey asks a live key actor for its settle record if it holds an
// Allowance for (cs, epoch); it always answers on out (a zero Put: none).
type settleKey struct {
	cs    int
	epoch int64
	out   chan<- cluster.Put
}

// clusterAuthorize is authorize's consuming path in cluster mode. ok is
// false when the request waits (for a takeover or a reservation) and is
// answered later.
func (a *keyActor) clusterAuthorize(ctx actor.Context, m *authorize, res AuthResult, now int64) (AuthResult, bool) {
	kc := a.kc
	node := a.deps.cl.node
	if kc.cs < 0 {
		kc.cs = node.ShardOf(a.state.rec.id.String())
	}
	epoch, owned := node.Owns(kc.cs)
	if !owned {
		if m.forwarded {
			return AuthResult{Err: errNotOwner}, true
		}
		res.fwd = int32(kc.cs) + 1
		return res, true
	}
	if kc.ca == nil || kc.ca.epoch != epoch {
		kc.waiting = append(kc.waiting, m)
		if kc.asked != epoch {
			kc.asked = epoch
			ctx.Send(ctx.Parent(), needAllow{id: a.state.rec.id, cs: kc.cs, epoch: epoch, pid: ctx.Self()})
		}
		return AuthResult{}, false
	}
	limit := a.state.rec.rateLimit
	d, starved := kc.ca.a.Admit(now, limit)
	if starved {
		kc.waiting = append(kc.waiting, m)
		a.reserve(ctx, now)
		return AuthResult{}, false
	}
	res.Limit = d
	if !d.Allowed {
		res.Err = ErrRateLimited
		return res, true
	}
	a.count(now)
	a.reserve(ctx, now) // prefetch: before the balance runs out
	return res, true
}

// reserve commits the next reservation when one is due (none in flight,
// the balance below half a chunk): fenced on the epoch, off the actor.
func (a *keyActor) reserve(ctx actor.Context, now int64) {
	kc := a.kc
	n, rec := kc.ca.a.Reserve(now, a.state.rec.rateLimit)
	if n == 0 {
		return
	}
	kc.reserving = n
	ca, self, c, cl := kc.ca, ctx.Self(), a.deps.courier, a.deps.cl
	put := cluster.Put{Name: a.state.rec.id.String(), Value: rec.Encode()}
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), cl.timeout)
		err := cl.node.Commit(cctx, ca.cs, ca.epoch, put)
		cancel()
		c.post(self, reserved{ca: ca, n: n, err: err})
	}()
}

// reservedDone credits (or forgets) a reservation and runs the admissions
// that waited for it; when it failed they fail closed.
func (a *keyActor) reservedDone(ctx actor.Context, m reserved) {
	kc := a.kc
	if kc.ca == m.ca {
		kc.reserving = 0
	}
	if m.err != nil {
		m.ca.a.Failed(m.n)
		a.deps.cl.reservationDone(m.err)
		if kc.ca == m.ca {
			a.failWaiting(actors.ErrUnavailable)
		}
		return
	}
	m.ca.a.Reserved(m.n)
	a.deps.cl.reservationDone(nil)
	if kc.ca == m.ca {
		a.rerunWaiting(ctx)
	}
}

// takenOver installs the Allowance the shard built (or drops a stale ask)
// and runs the admissions that waited for it.
func (a *keyActor) takenOver(ctx actor.Context, m takeOver) {
	kc := a.kc
	kc.asked = 0
	if m.ca != nil {
		kc.ca, kc.reserving = m.ca, 0
	}
	a.rerunWaiting(ctx)
}

func (a *keyActor) rerunWaiting(ctx actor.Context) {
	w := a.kc.waiting
	a.kc.waiting = nil
	for _, m := range w {
		if r, ok := a.authorize(ctx, m); ok {
			m.reply <- r
		}
	}
}

func (a *keyActor) failWaiting(err error) {
	for _, m := range a.kc.waiting {
		m.reply <- AuthResult{Err: err}
	}
	a.kc.waiting = nil
}

// settle answers a graceful release of the key's shard: the record that
// hands the key over with nothing outstanding. The waiting admissions run
// again and are forwarded to the next owner.
func (a *keyActor) settle(ctx actor.Context, m settleKey) {
	kc := a.kc
	if kc == nil || kc.ca == nil || kc.ca.cs != m.cs || kc.ca.epoch != m.epoch {
		m.out <- cluster.Put{}
		return
	}
	q := kc.ca.a.Settle(a.deps.clock.Now().Unix())
	kc.ca = nil
	m.out <- cluster.Put{Name: a.state.rec.id.String(), Value: q.Encode()}
	a.rerunWaiting(ctx)
}

// clusterCtx is what key actors and shards need of cluster mode.
type clusterCtx struct {
	node      actors.ClusterNode // set once the node started (NodeStarted)
	timeout   time.Duration
	onReserve func(err error) // metrics
}

func (c *clusterCtx) reservationDone(err error) {
	if c.onReserve != nil {
		c.onReserve(err)
	}
}
