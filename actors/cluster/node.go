package cluster

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Node is this process's membership in the cluster and the shards it owns.
// Owns, Owner and Commit are safe for concurrent use.
type Node struct {
	cfg  Config
	cli  *clientv3.Client
	m    *metrics
	base time.Time // origin of the monotonic deadlines

	deadline atomic.Int64   // ns since base: the lease is valid before it; 0: none
	lost     atomic.Bool    // the keepalive loop saw the lease go
	mine     []atomic.Int64 // epoch of each owned shard; 0: not owned

	mu      sync.Mutex
	lease   clientv3.LeaseID
	members map[string]member // by node id, from the watch
	owners  []owner           // by shard, from the watch and our own txns

	kick    chan struct{}
	commits chan *commitReq
	// mute, in tests, stops keepalives as a partition from etcd would.
	mute    atomic.Bool
	closing atomic.Bool // Close has begun: reconcile changes nothing more
	recMu   sync.Mutex  // held by a reconcile round, and by Close
	cancel  context.CancelFunc
	stopped chan struct{} // closed when the loops are stopped
	wg      sync.WaitGroup
}

type member struct {
	addr string
	rev  int64
}

// owner is a shard's owner as etcd says: node "" is none. rev is the
// revision of the last event applied, so an older one is never applied
// over a newer one.
type owner struct {
	node  string
	epoch int64
	rev   int64
}

// Member is a live node as etcd lists it.
type Member struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
}

// ShardOwner is a shard's owner and epoch ("" and 0 when none).
type ShardOwner struct {
	Shard int    `json:"shard"`
	Owner string `json:"owner"`
	Epoch int64  `json:"epoch"`
}

var (
	// ErrNotOwner reports a fenced write refused: the shard is no longer
	// owned at the epoch given.
	ErrNotOwner = errors.New("cluster: not the shard's owner")
	// ErrStopped reports a Node that was closed.
	ErrStopped = errors.New("cluster: node stopped")
)

// Start registers the node and starts its loops; Close stops them. The
// node owns nothing until its first reconcile claims its shards.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg:     cfg,
		cli:     cfg.Client,
		m:       m,
		base:    time.Now(),
		mine:    make([]atomic.Int64, cfg.Shards),
		members: map[string]member{},
		owners:  make([]owner, cfg.Shards),
		kick:    make(chan struct{}, 1),
		commits: make(chan *commitReq, 1024),
		stopped: make(chan struct{}),
	}
	if err := n.register(ctx); err != nil {
		return nil, err
	}
	rev, err := n.load(ctx)
	if err != nil {
		return nil, err
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	n.wg.Add(4)
	go n.keepAliveLoop(loopCtx)
	go n.watchLoop(loopCtx, rev)
	go n.reconcileLoop(loopCtx)
	go n.commitLoop(loopCtx)
	n.poke()
	return n, nil
}

// Close stops the node's loops and revokes its lease, which releases its
// shards at once (a graceful leave: Handler.Released is called with
// graceful true for each, before the revoke).
func (n *Node) Close() error {
	if n.cancel == nil {
		return nil
	}
	// Hand the shards over while the commit loop still runs, so the
	// handler can commit its last records (fenced on the epoch, which
	// holds until the revoke below); no reconcile round runs meanwhile.
	n.closing.Store(true)
	n.recMu.Lock()
	for s := range n.mine {
		if e := n.mine[s].Load(); e != 0 {
			n.drop(s, e, true)
		}
	}
	n.recMu.Unlock()
	n.stop()
	n.deadline.Store(0)
	n.mu.Lock()
	lease := n.lease
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RequestTimeout)
	defer cancel()
	if _, err := n.cli.Revoke(ctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("cluster: revoke lease on close: %w", err)
	}
	return nil
}

// stop ends the loops and fails the commits still queued.
func (n *Node) stop() {
	n.cancel()
	n.wg.Wait()
	n.cancel = nil
	close(n.stopped)
	n.failPending()
}

// ID returns the node's id.
func (n *Node) ID() string { return n.cfg.NodeID }

// Shards returns the number of virtual shards.
func (n *Node) Shards() int { return n.cfg.Shards }

// ShardOf returns the shard of a key id.
func (n *Node) ShardOf(id string) int { return ShardOf(id, n.cfg.Shards) }

// ShardOf returns the shard of a key id among shards shards.
func ShardOf(id string, shards int) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % uint32(shards))
}

// Owns returns the epoch at which the node owns shard, if it does and its
// lease is certainly still valid.
func (n *Node) Owns(shard int) (epoch int64, ok bool) {
	e := n.mine[shard].Load()
	if e == 0 || !n.leaseValid() {
		return 0, false
	}
	return e, true
}

// Live reports whether the node holds a lease it knows to be valid.
func (n *Node) Live() bool { return n.leaseValid() }

func (n *Node) leaseValid() bool {
	d := n.deadline.Load()
	return d != 0 && n.now() < d
}

func (n *Node) now() int64 { return int64(time.Since(n.base)) }

// Owner returns shard's owner as this node last heard it, and its address.
func (n *Node) Owner(shard int) (node, addr string, epoch int64, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	o := n.owners[shard]
	if o.node == "" {
		return "", "", 0, false
	}
	return o.node, n.members[o.node].addr, o.epoch, true
}

// Members returns the live members, by id.
func (n *Node) Members() []Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	ms := make([]Member, 0, len(n.members))
	for id, m := range n.members {
		ms = append(ms, Member{ID: id, Addr: m.addr})
	}
	slices.SortFunc(ms, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return ms
}

// Owners returns every shard's owner.
func (n *Node) Owners() []ShardOwner {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]ShardOwner, len(n.owners))
	for s, o := range n.owners {
		out[s] = ShardOwner{Shard: s, Owner: o.node, Epoch: o.epoch}
	}
	return out
}

// Keys in etcd.
func (n *Node) memberKey(id string) string { return n.cfg.Prefix + "/members/" + id }
func (n *Node) membersPrefix() string      { return n.cfg.Prefix + "/members/" }
func (n *Node) shardKey(s int) string      { return n.cfg.Prefix + "/shards/" + fmt.Sprintf("%04d", s) }
func (n *Node) shardsPrefix() string       { return n.cfg.Prefix + "/shards/" }
func (n *Node) dataPrefix(s int) string {
	return n.cfg.Prefix + "/data/" + fmt.Sprintf("%04d", s) + "/"
}

func (n *Node) shardOfKey(k string) (int, bool) {
	s, err := strconv.Atoi(strings.TrimPrefix(k, n.shardsPrefix()))
	return s, err == nil && s >= 0 && s < n.cfg.Shards
}

// register grants a lease and writes the member key under it.
func (n *Node) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	sent := n.now()
	g, err := n.cli.Grant(ctx, int64(n.cfg.TTL/time.Second))
	if err != nil {
		return fmt.Errorf("cluster: grant lease: %w", err)
	}
	resp, err := n.cli.Put(ctx, n.memberKey(n.cfg.NodeID), n.cfg.Addr, clientv3.WithLease(g.ID))
	if err != nil {
		return fmt.Errorf("cluster: register member %q: %w", n.cfg.NodeID, err)
	}
	n.mu.Lock()
	n.lease = g.ID
	if m := n.members[n.cfg.NodeID]; m.rev < resp.Header.Revision {
		n.members[n.cfg.NodeID] = member{addr: n.cfg.Addr, rev: resp.Header.Revision}
	}
	n.mu.Unlock()
	n.deadline.Store(sent + g.TTL*int64(time.Second))
	n.lost.Store(false)
	n.cfg.Logger.Info("cluster: registered", "node", n.cfg.NodeID, "addr", n.cfg.Addr, "lease_ttl", g.TTL)
	return nil
}

// load reads the members and shard owners and returns the revision to
// watch after.
func (n *Node) load(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	ops := []clientv3.Op{clientv3.OpGet(n.membersPrefix(), clientv3.WithPrefix()), clientv3.OpGet(n.shardsPrefix(), clientv3.WithPrefix())}
	resp, err := n.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("cluster: load members and shards: %w", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	rev := resp.Header.Revision
	n.members = map[string]member{}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		n.members[strings.TrimPrefix(string(kv.Key), n.membersPrefix())] = member{addr: string(kv.Value), rev: kv.ModRevision}
	}
	fresh := make([]owner, n.cfg.Shards)
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		if s, ok := n.shardOfKey(string(kv.Key)); ok {
			fresh[s] = owner{node: string(kv.Value), epoch: kv.CreateRevision, rev: kv.ModRevision}
		}
	}
	for s := range fresh {
		if fresh[s].rev == 0 {
			fresh[s].rev = rev // none as of rev
		}
		if fresh[s].rev >= n.owners[s].rev {
			n.owners[s] = fresh[s]
		}
	}
	return rev, nil
}

func (n *Node) poke() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// keepAliveInterval is how often the lease is renewed: often enough that
// an etcd leader election (≈ 1–1.6 s measured) does not outlast the local
// deadline.
func (n *Node) keepAliveInterval() time.Duration { return min(n.cfg.TTL/6, 500*time.Millisecond) }

// keepAliveLoop renews the lease every keepAliveInterval and moves the local deadline
// to the send time of the last acknowledged renewal plus the TTL.
func (n *Node) keepAliveLoop(ctx context.Context) {
	defer n.wg.Done()
	t := time.NewTicker(n.keepAliveInterval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n.lost.Load() {
			continue // the reconcile loop registers again
		}
		if n.mute.Load() {
			if !n.leaseValid() {
				n.loseLease("no keepalive acknowledged within the TTL")
			}
			continue
		}
		n.mu.Lock()
		lease := n.lease
		n.mu.Unlock()
		sent := n.now()
		kctx, cancel := context.WithTimeout(ctx, n.cfg.TTL/3)
		resp, err := n.cli.KeepAliveOnce(kctx, lease)
		cancel()
		n.m.etcd("keepalive", time.Duration(n.now()-sent))
		switch {
		case err == nil && resp.TTL > 0:
			n.deadline.Store(sent + resp.TTL*int64(time.Second))
		case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0):
			n.loseLease("lease expired")
		case ctx.Err() != nil:
			return
		}
		if !n.leaseValid() && !n.lost.Load() {
			n.loseLease("no keepalive acknowledged within the TTL")
		}
	}
}

func (n *Node) loseLease(why string) {
	n.deadline.Store(0)
	if !n.lost.Swap(true) {
		n.cfg.Logger.Warn("cluster: lease lost; demoting", "node", n.cfg.NodeID, "why", why)
		n.poke()
	}
}

// watchLoop applies member and shard events, re-reading everything when
// the watch breaks (compaction, lost connection).
func (n *Node) watchLoop(ctx context.Context, rev int64) {
	defer n.wg.Done()
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := n.cli.Watch(wctx, n.cfg.Prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		for resp := range wch {
			if resp.Err() != nil {
				break
			}
			n.apply(resp.Events)
			rev = max(rev, resp.Header.Revision)
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		for ctx.Err() == nil {
			r, err := n.load(ctx)
			if err == nil {
				rev = r
				n.poke()
				break
			}
			sleep(ctx, n.cfg.TTL/4)
		}
	}
}

func (n *Node) apply(evs []*clientv3.Event) {
	changed := false
	n.mu.Lock()
	for _, ev := range evs {
		k := string(ev.Kv.Key)
		switch {
		case strings.HasPrefix(k, n.membersPrefix()):
			id := strings.TrimPrefix(k, n.membersPrefix())
			if ev.Kv.ModRevision < n.members[id].rev {
				continue
			}
			if ev.Type == mvccpb.DELETE {
				delete(n.members, id)
			} else {
				n.members[id] = member{addr: string(ev.Kv.Value), rev: ev.Kv.ModRevision}
			}
			changed = true
		case strings.HasPrefix(k, n.shardsPrefix()):
			s, ok := n.shardOfKey(k)
			if !ok || ev.Kv.ModRevision < n.owners[s].rev {
				continue
			}
			if ev.Type == mvccpb.DELETE {
				n.owners[s] = owner{rev: ev.Kv.ModRevision}
			} else {
				n.owners[s] = owner{node: string(ev.Kv.Value), epoch: ev.Kv.CreateRevision, rev: ev.Kv.ModRevision}
			}
			changed = true
		}
	}
	n.mu.Unlock()
	if changed {
		n.poke()
	}
}

// reconcileLoop moves shards toward their desired owners: on every change
// it hears of and every TTL/4.
func (n *Node) reconcileLoop(ctx context.Context) {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.TTL / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
		case <-t.C:
		}
		n.reconcile(ctx)
	}
}

func (n *Node) reconcile(ctx context.Context) {
	n.recMu.Lock()
	defer n.recMu.Unlock()
	if n.closing.Load() {
		return
	}
	if n.lost.Load() {
		n.demote()
		if n.mute.Load() {
			return // partitioned, in tests: cannot register either
		}
		// A lease given up on the local deadline may still live on the
		// server (renewals timed out under load): revoke it, best effort,
		// so its shard keys go now rather than at its expiry.
		n.mu.Lock()
		old := n.lease
		n.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
		n.cli.Revoke(rctx, old)
		cancel()
		if err := n.register(ctx); err != nil {
			n.cfg.Logger.Warn("cluster: register again", "node", n.cfg.NodeID, "err", err)
			return
		}
	}
	if !n.leaseValid() {
		return
	}
	n.mu.Lock()
	alive := make([]string, 0, len(n.members))
	for id := range n.members {
		alive = append(alive, id)
	}
	owners := slices.Clone(n.owners)
	n.mu.Unlock()
	me := n.cfg.NodeID
	var claims []int
	for s := range owners {
		if ctx.Err() != nil {
			return
		}
		own, cur := n.mine[s].Load(), owners[s]
		if own != 0 && cur.epoch != own {
			n.drop(s, own, false) // deleted or taken under us: our lease went
			own = 0
		}
		want := desired(alive, s)
		switch {
		case own == 0 && cur.node == "" && want == me:
			claims = append(claims, s)
		case own != 0 && want != me:
			n.release(ctx, s, own)
		case own == 0 && cur.node == me && cur.epoch != 0:
			// etcd says this node owns s, but it let s go: a release
			// whose delete failed, a drop after a lost lease whose key
			// outlived it. Nobody else may claim s while the key stands,
			// so delete it (fenced on its epoch); the desired owner
			// claims it next.
			n.forget(ctx, s, cur.epoch)
		}
	}
	// Claims are independent transactions: run them side by side (a node
	// taking over a dead member's shards should not wait 256 round trips).
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	epochs := make([]int64, len(claims))
	for i, s := range claims {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			epochs[i] = n.claim(ctx, s)
		}()
	}
	wg.Wait()
	// The handler hears of each shard before Owns answers for it.
	for i, s := range claims {
		if e := epochs[i]; e != 0 && n.leaseValid() {
			if n.cfg.Handler != nil {
				n.cfg.Handler.Acquired(s, e)
			}
			n.mine[s].Store(e)
			n.m.changes.WithLabelValues("acquired").Inc()
		}
	}
}

// desired is the rendezvous-hashing owner of shard among alive: the
// member with the highest score, so a member's arrival or departure moves
// only the shards it wins or held.
func desired(alive []string, shard int) string {
	var best string
	var bestScore uint64
	for _, id := range alive {
		h := fnv.New64a()
		h.Write([]byte(id))
		// FNV alone scores ids that differ in one byte alike: mix.
		sc := mix64(h.Sum64() ^ (uint64(shard)+1)*0x9e3779b97f4a7c15)
		if best == "" || sc > bestScore || (sc == bestScore && id < best) {
			best, bestScore = id, sc
		}
	}
	return best
}

// mix64 is splitmix64's finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// claim tries to take shard s and returns its epoch, or 0.
func (n *Node) claim(ctx context.Context, s int) int64 {
	n.mu.Lock()
	lease := n.lease
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	k := n.shardKey(s)
	start := n.now()
	resp, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, n.cfg.NodeID, clientv3.WithLease(lease))).
		Else(clientv3.OpGet(k)).
		Commit()
	n.m.etcd("claim", time.Duration(n.now()-start))
	if err != nil {
		n.cfg.Logger.Debug("cluster: claim", "shard", s, "err", err)
		return 0
	}
	n.mu.Lock()
	rev := resp.Header.Revision
	if resp.Succeeded {
		if n.owners[s].rev <= rev {
			n.owners[s] = owner{node: n.cfg.NodeID, epoch: rev, rev: rev}
		}
	} else if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 && n.owners[s].rev <= kvs[0].ModRevision {
		n.owners[s] = owner{node: string(kvs[0].Value), epoch: kvs[0].CreateRevision, rev: kvs[0].ModRevision}
	}
	n.mu.Unlock()
	if !resp.Succeeded {
		return 0
	}
	return rev
}

// release hands shard s over: the handler settles while the epoch still
// holds, then the shard key is deleted, fenced on the epoch.
func (n *Node) release(ctx context.Context, s int, epoch int64) {
	n.drop(s, epoch, true)
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	k := n.shardKey(s)
	resp, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", epoch)).
		Then(clientv3.OpDelete(k)).
		Commit()
	if err != nil {
		n.cfg.Logger.Warn("cluster: release shard", "shard", s, "err", err)
		return // the key goes with our lease, at worst
	}
	n.mu.Lock()
	if resp.Succeeded && n.owners[s].rev <= resp.Header.Revision {
		n.owners[s] = owner{rev: resp.Header.Revision}
	}
	n.mu.Unlock()
}

// forget deletes shard s's key at epoch, which this node no longer
// serves.
func (n *Node) forget(ctx context.Context, s int, epoch int64) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	k := n.shardKey(s)
	if _, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", epoch)).
		Then(clientv3.OpDelete(k)).
		Commit(); err != nil {
		n.cfg.Logger.Warn("cluster: delete a shard key left behind", "shard", s, "err", err)
		return
	}
	n.cfg.Logger.Info("cluster: deleted a shard key left behind", "shard", s, "epoch", epoch)
}

// drop stops owning s locally and tells the handler.
func (n *Node) drop(s int, epoch int64, graceful bool) {
	if !n.mine[s].CompareAndSwap(epoch, 0) {
		return
	}
	kind := "lost"
	if graceful {
		kind = "released"
	}
	n.m.changes.WithLabelValues(kind).Inc()
	if n.cfg.Handler != nil {
		n.cfg.Handler.Released(s, epoch, graceful)
	}
}

// demote drops every shard at once after the lease was lost.
func (n *Node) demote() {
	for s := range n.mine {
		if e := n.mine[s].Load(); e != 0 {
			n.drop(s, e, false)
		}
	}
	n.m.demotions.Inc()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
