package clusterit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"gatehouse/actors"
	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/clock"
	"gatehouse/actors/cluster"
	"gatehouse/actors/cluster/etcdtest"
	"gatehouse/actors/cluster/transport"
	"gatehouse/actors/control"
	"gatehouse/actors/gateway"
	"gatehouse/actors/keys"
	"gatehouse/wal/etcdlog"
	"gatehouse/wal/waltest"
)

const (
	flushInterval = 100 * time.Millisecond
	prefix        = "/gh"
	ttl           = 2 * time.Second
)

// fleet is a cluster of Systems in this process; nodes reach each other
// through addrs (node id → System), the transport's stand-in.
type fleet struct {
	t     testing.TB
	etcd  *etcdtest.Cluster
	addrs sync.Map
	key   []byte
	reg   *prometheus.Registry // for the next start
	tune  func(*actors.Config) // when set, changes every node's config
	// tuneAccounts, when set, changes every node's accounts config.
	tuneAccounts func(*accounts.Config)
	// exts, when set, runs the gateway and the control extension on
	// every node started from then on (snapshot_test.go).
	exts bool
	// endpoints, when set, are the only etcd members the next nodes reach.
	endpoints []string
	// joinDelay holds StartNode back after the node started, its loops
	// (and so the handler's calls) already running.
	joinDelay time.Duration
}

type member struct {
	id    string
	locks *cluster.Locks
	sys   actorstest.System // the node's System and accounts
	node  *cluster.Node
	cli   *clientv3.Client
	gw    *gateway.Gateway // with fleet.exts
	ctl   *control.Control
	took  time.Duration // actors.New's restore and start
	fatal chan error    // ClusterDeps.Fatal's
}

func newFleet(t testing.TB) *fleet { return newFleetOf(t, 3) }

// newFleetOf is newFleet on members etcd members.
func newFleetOf(t testing.TB, members int) *fleet {
	return &fleet{t: t, etcd: etcdtest.Start(t, members), key: make([]byte, 32)}
}

func (f *fleet) forward(ctx context.Context, addr, keyID string, _ uint64) (transport.Verdict, error) {
	v, ok := f.addrs.Load(addr)
	if !ok {
		return transport.Verdict{}, fmt.Errorf("%w: no node at %s", transport.ErrForward, addr)
	}
	return v.(*keys.Service).AdmitOwned(ctx, keyID), nil
}

// start starts node id; it leaves the cluster when the test ends.
func (f *fleet) start(id string) *member {
	t := f.t
	t.Helper()
	cli := f.etcd.Client(t, f.endpoints...)
	elog, err := etcdlog.Open(context.Background(), cli, prefix+"/wal/", id, 2*time.Second,
		etcdlog.Auth{MasterKey: f.key, Logger: waltest.Logger(t).With("node", id), Registerer: registerer(f.reg)})
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := actors.NewSealer(f.key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := actors.DefaultConfig()
	cfg.FlushInterval = flushInterval
	if f.tune != nil {
		f.tune(&cfg)
	}
	m := &member{id: id, cli: cli, fatal: make(chan error, 1)}
	acfg := accounts.DefaultConfig()
	if f.tuneAccounts != nil {
		f.tuneAccounts(&acfg)
	}
	kcfg := keys.DefaultConfig()
	kcfg.Shards = 8
	ks, err := keys.New(kcfg)
	if err != nil {
		t.Fatal(err)
	}
	acc, err := accounts.New(acfg)
	if err != nil {
		t.Fatal(err)
	}
	exts := []actors.Extension{ks, acc}
	if f.exts {
		gcfg := gateway.DefaultConfig()
		gcfg.NodeID = id
		if m.gw, err = gateway.New(gcfg); err != nil {
			t.Fatal(err)
		}
		m.ctl = control.New()
		exts = append(exts, m.gw, m.ctl)
	}
	started := time.Now()
	sys, err := actors.New(cfg, actors.Deps{
		Clock: clock.Real{}, Sealer: sealer, Logger: waltest.Logger(t).With("node", id), Registerer: registerer(f.reg),
		Cluster: &actors.ClusterDeps{
			Log: elog,
			StartNode: func(h cluster.Handler) (actors.ClusterNode, error) {
				n, err := cluster.Start(context.Background(), cluster.Config{
					Client: cli, Prefix: prefix, NodeID: id, Addr: id, TTL: ttl, Handler: h,
					RequestTimeout: time.Second, Logger: waltest.Logger(t).With("node", id),
				})
				m.node = n
				time.Sleep(f.joinDelay)
				return n, err
			},
			Forward:   f.forward,
			Snapshots: elog.Snapshots(ttl),
			Fatal:     func(err error) { m.fatal <- err },
		},
	}, exts...)
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	m.took = time.Since(started)
	m.sys = actorstest.System{System: sys, Service: acc, Keys: ks}
	m.locks = cluster.NewLocks(cli, prefix, id, ttl, sys.ClusterApplied, sys.ClusterWritten)
	sys.SetClusterLocks(m.locks)
	f.addrs.Store(id, ks)
	t.Cleanup(func() { m.stop() })
	return m
}

// startWith is start with a metrics registry.
func (f *fleet) startWith(id string, reg *prometheus.Registry) *member {
	f.reg = reg
	defer func() { f.reg = nil }()
	return f.start(id)
}

func registerer(r *prometheus.Registry) prometheus.Registerer {
	if r == nil {
		return nil
	}
	return r
}

// stop leaves the cluster gracefully.
func (m *member) stop() {
	if m.sys.System == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.sys.Close(ctx)
	m.locks.Close()
	m.sys = actorstest.System{}
}

// crash cuts the node off etcd and off the other nodes: its lease expires
// after the TTL, as after a kill -9. Its actors stop when the test ends.
func (m *member) crash(f *fleet) {
	f.addrs.Delete(m.id)
	_ = m.cli.Close()
	sys := m.sys
	m.sys = actorstest.System{}
	f.t.Cleanup(sys.Abort)
}

// waitOwners waits until every shard has an owner and the owners have not
// changed for a second, as every member sees them.
func waitOwners(t testing.TB, ms ...*member) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var last string
	stableSince := time.Now()
	for time.Now().Before(deadline) {
		view := ""
		for _, m := range ms {
			for _, o := range m.node.Owners() {
				if o.Owner == "" {
					view = "incomplete"
					break
				}
				view += fmt.Sprintf("%s@%d,", o.Owner, o.Epoch)
			}
		}
		if view != last {
			last, stableSince = view, time.Now()
		} else if view != "incomplete" && time.Since(stableSince) >= time.Second {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("shard owners not settled after 15s")
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v", what, within)
	return 0
}

func newKey(t testing.TB, m *member, limit int64) (keys.KeyInfo, string) {
	t.Helper()
	u, err := m.sys.CreateUser(ctx(t), accounts.NewUser{Email: fmt.Sprintf("u%d@example.com", time.Now().UnixNano()), Password: "correct horse", Plan: accounts.PlanStandard, LicenseActive: true})
	if err != nil {
		t.Fatal(err)
	}
	k, secret, err := m.sys.CreateKey(ctx(t), keys.NewKey{Owner: m.sys.KeyOwner(u), Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.sys.UpdateKey(ctx(t), k.ID, keys.KeyPatch{RateLimit: &limit}); err != nil {
		t.Fatal(err)
	}
	return k, secret
}

// hammer sends n requests through each member at once and returns how many
// were admitted, and the errors other than 429.
func hammer(t *testing.T, secret string, n int, ms ...*member) (admitted int64, failed []error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var adm atomic.Int64
	for _, m := range ms {
		wg.Go(func() {
			for range n {
				r := m.sys.Authorize(context.Background(), []byte(secret))
				switch {
				case r.Err == nil:
					adm.Add(1)
				case errors.Is(r.Err, keys.ErrRateLimited):
				default:
					mu.Lock()
					failed = append(failed, r.Err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return adm.Load(), failed
}

// TestKeysAndLimitsShared: a key created on one node validates on the
// others within a second; three nodes admitting for it at once admit no
// more than its limit together; every node's usage counts every node's
// admissions; a revocation on one node is refused by all within a second.
func TestKeysAndLimitsShared(t *testing.T) {
	f := newFleet(t)
	a, b, c := f.start("a"), f.start("b"), f.start("c")
	waitOwners(t, a, b, c)

	k, secret := newKey(t, a, 200)
	for _, m := range []*member{b, c} {
		took := eventually(t, time.Second, "the key validates on "+m.id, func() bool {
			return m.sys.Validate(context.Background(), []byte(secret)).Err == nil
		})
		t.Logf("key visible on %s after %v", m.id, took)
	}

	admitted, failed := hammer(t, secret, 150, a, b, c)
	if len(failed) > 0 {
		t.Errorf("%d admissions failed, first: %v", len(failed), failed[0])
	}
	chunk := int64(cluster.Chunk(200))
	t.Logf("admitted %d of 450 (limit 200)", admitted)
	if admitted > 200 || admitted < 200-chunk {
		t.Errorf("admitted %d of 450 for a limit of 200 (want 200-%d..200)", admitted, chunk)
	}
	for _, m := range []*member{a, b, c} {
		if err := m.sys.FlushUsage(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []*member{a, b, c} {
		eventually(t, 2*time.Second, "usage on "+m.id+" counts every node", func() bool {
			u, err := m.sys.KeyUsage(context.Background(), k.ID, 1)
			return err == nil && len(u.Daily) == 1 && u.Daily[0].Count == admitted
		})
	}

	if err := b.sys.RevokeKey(ctx(t), k.ID); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*member{a, c} {
		took := eventually(t, time.Second, "revocation seen on "+m.id, func() bool {
			return errors.Is(m.sys.Authorize(context.Background(), []byte(secret)).Err, keys.ErrKeyRevoked)
		})
		t.Logf("revocation on %s after %v", m.id, took)
	}
}

// TestShardsWonBeforeStartReturns: the node's loops claim shards, and call
// the handler, before StartNode has returned the node; the shards still
// load, and the node admits for their keys.
func TestShardsWonBeforeStartReturns(t *testing.T) {
	f := newFleetOf(t, 1)
	f.joinDelay = 500 * time.Millisecond
	a := f.start("a")
	waitOwners(t, a)
	_, secret := newKey(t, a, 10)
	if r := a.sys.Authorize(ctx(t), []byte(secret)); r.Err != nil {
		t.Fatalf("authorize on a node whose shards were won before it started: %v", r.Err)
	}
}

// ownerOf returns the member owning k's shard.
func ownerOf(t testing.TB, k keys.KeyInfo, ms ...*member) *member {
	t.Helper()
	owner, _, _, ok := ms[0].node.Owner(ms[0].node.ShardOf(k.ID.String()))
	for _, m := range ms {
		if ok && m.id == owner {
			return m
		}
	}
	t.Fatalf("no owner for key %s", k.ID)
	return nil
}

// TestOwnerCrashNeverOverAdmits: while two nodes send requests for a key,
// its owner is cut off and stopped without a word; the survivors take the
// key over after its lease expires and together with what the dead owner
// admitted never exceed the limit; the key is unavailable no longer than
// the TTL plus a second or two.
func TestOwnerCrashNeverOverAdmits(t *testing.T) {
	f := newFleet(t)
	ms := []*member{f.start("a"), f.start("b"), f.start("c")}
	waitOwners(t, ms...)
	const limit = 300
	k, secret := newKey(t, ms[0], limit)
	owner := ownerOf(t, k, ms...)
	var others []*member
	for _, m := range ms {
		if m != owner {
			others = append(others, m)
			eventually(t, time.Second, "the key validates on "+m.id, func() bool {
				return m.sys.Validate(context.Background(), []byte(secret)).Err == nil
			})
		}
	}
	// Phase 1: 100 through the owner itself and each survivor.
	before, failed := hammer(t, secret, 50, owner, others[0], others[1])
	if len(failed) > 0 {
		t.Fatalf("%d failed before the crash: %v", len(failed), failed[0])
	}
	cs := others[0].node.ShardOf(k.ID.String())
	for _, m := range ms {
		o, _, e, _ := m.node.Owner(cs)
		ep, mine := m.node.Owns(cs)
		t.Logf("before the crash of %s: %s sees %q@%d; owns: %v@%d", owner.id, m.id, o, e, mine, ep)
	}
	owner.crash(f)
	crashed := time.Now()
	go func() {
		last := ""
		for time.Since(crashed) < 4*time.Second {
			o, _, e, ok := others[0].node.Owner(cs)
			if cur := fmt.Sprintf("%q@%d(%v)", o, e, ok); cur != last {
				t.Logf("+%v: %s sees shard %d owned by %s", time.Since(crashed).Round(time.Millisecond), others[0].id, cs, cur)
				last = cur
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	// Phase 2: the survivors keep going until the key is served again and
	// its limit is reached.
	var after, unavailable atomic.Int64
	var longest time.Duration
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range others {
		wg.Go(func() {
			var lastOK = time.Now()
			for i := 0; i < 2000; i++ {
				r := m.sys.Authorize(context.Background(), []byte(secret))
				switch {
				case r.Err == nil:
					after.Add(1)
					fallthrough
				case errors.Is(r.Err, keys.ErrRateLimited):
					mu.Lock()
					longest = max(longest, time.Since(lastOK))
					mu.Unlock()
					lastOK = time.Now()
					if r.Err != nil {
						return // the limit is reached
					}
				default:
					if unavailable.Add(1) <= 3 {
						t.Logf("+%v: %s: %v", time.Since(crashed).Round(time.Millisecond), m.id, r.Err)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	total := before + after.Load()
	chunk := int64(cluster.Chunk(limit))
	t.Logf("admitted %d before the crash, %d after: %d of limit %d; longest gap %v (%d refused as unavailable)",
		before, after.Load(), total, limit, longest, unavailable.Load())
	if total > limit {
		t.Errorf("over-admitted: %d > %d", total, limit)
	}
	if total < limit-2*chunk {
		t.Errorf("under-admitted beyond its bound: %d < %d", total, limit-2*chunk)
	}
	if longest > ttl+3*time.Second {
		t.Errorf("the key was unavailable for %v (bound %v)", longest, ttl+3*time.Second)
	}
}

// TestRestartAllKeepsEverything: every node stops; new nodes with nothing
// but etcd restore the users, the keys and the limits (a key that used
// its hour stays used).
func TestRestartAllKeepsEverything(t *testing.T) {
	f := newFleet(t)
	a, b := f.start("a"), f.start("b")
	waitOwners(t, a, b)
	k, secret := newKey(t, a, 40)
	eventually(t, time.Second, "the key validates on b", func() bool {
		return b.sys.Validate(context.Background(), []byte(secret)).Err == nil
	})
	admitted, failed := hammer(t, secret, 30, a, b)
	if len(failed) > 0 || admitted != 40 {
		t.Fatalf("admitted %d of 60 for a limit of 40, failures %v", admitted, failed)
	}
	a.stop()
	b.stop()

	c, d := f.start("c"), f.start("d")
	waitOwners(t, c, d)
	for _, m := range []*member{c, d} {
		if r := m.sys.Validate(context.Background(), []byte(secret)); r.Err != nil {
			t.Fatalf("validate on %s after the restart: %v", m.id, r.Err)
		}
	}
	again, failed := hammer(t, secret, 5, c, d)
	if again != 0 || len(failed) > 0 {
		t.Errorf("after the restart %d admitted (want 0: the hour is used), failures %v", again, failed)
	}
	u, err := c.sys.KeyUsage(ctx(t), k.ID, 1)
	if err != nil || len(u.Daily) != 1 || u.Daily[0].Count != 40 {
		t.Errorf("usage after the restart = %+v, %v; want 40 today", u.Daily, err)
	}
}

// TestEtcdLeaderKilled: the etcd leader dies while three nodes admit for a
// key and take changes; no admission fails, none beyond the limit, and
// every acknowledged change is on every node afterwards.
func TestEtcdLeaderKilled(t *testing.T) {
	f := newFleet(t)
	ms := []*member{f.start("a"), f.start("b"), f.start("c")}
	waitOwners(t, ms...)
	const limit = 20000
	k, secret := newKey(t, ms[0], limit)
	for _, m := range ms {
		eventually(t, time.Second, "the key validates on "+m.id, func() bool {
			return m.sys.Validate(context.Background(), []byte(secret)).Err == nil
		})
	}
	var admitted atomic.Int64
	var failedMu sync.Mutex
	var failed []error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := m.sys.Authorize(context.Background(), []byte(secret))
				switch {
				case r.Err == nil:
					admitted.Add(1)
				case errors.Is(r.Err, keys.ErrRateLimited):
				default:
					failedMu.Lock()
					failed = append(failed, r.Err)
					failedMu.Unlock()
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	// Changes acknowledged across the kill: a user per node every 50 ms.
	var acked sync.Map // email → node
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			m := ms[i%len(ms)]
			email := fmt.Sprintf("leader-kill-%d@example.com", i)
			c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if _, err := m.sys.CreateUser(c, accounts.NewUser{Email: email, Password: "correct horse", Plan: accounts.PlanStandard, LicenseActive: true}); err == nil {
				acked.Store(email, m.id)
			}
			cancel()
			time.Sleep(50 * time.Millisecond)
		}
	})
	time.Sleep(500 * time.Millisecond)
	leader := f.etcd.Leader()
	f.etcd.Kill(leader)
	t.Logf("killed etcd member %d, the leader", leader)
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	if admitted.Load() > limit {
		t.Errorf("over-admitted: %d > %d", admitted.Load(), limit)
	}
	if len(failed) > 0 {
		t.Errorf("%d admissions failed across the leader's death, first: %v", len(failed), failed[0])
	}
	n := 0
	acked.Range(func(email, _ any) bool {
		n++
		for _, m := range ms {
			eventually(t, 2*time.Second, fmt.Sprintf("user %s on %s", email, m.id), func() bool {
				_, err := m.sys.UserByEmail(context.Background(), email.(string))
				return err == nil
			})
		}
		return true
	})
	t.Logf("admitted %d (limit %d); %d users acknowledged across the kill, all on every node", admitted.Load(), limit, n)
	_ = k
}

// TestQuorumLost: with two of three etcd members down, changes are refused
// within the request timeout (never left hanging, never acknowledged),
// admissions fail closed once the reserved tokens or the lease run out,
// and once quorum is back both work again without a restart.
func TestQuorumLost(t *testing.T) {
	f := newFleet(t)
	ms := []*member{f.start("a"), f.start("b"), f.start("c")}
	waitOwners(t, ms...)
	k, secret := newKey(t, ms[0], 100000)
	for _, m := range ms {
		eventually(t, time.Second, "the key validates on "+m.id, func() bool {
			return m.sys.Authorize(context.Background(), []byte(secret)).Err == nil
		})
	}
	leader := f.etcd.Leader()
	var down []int
	for i := range 3 {
		if i != leader && len(down) < 2 {
			down = append(down, i)
		}
	}
	down[1] = leader // the leader and one follower: no quorum left
	for _, i := range down {
		f.etcd.Kill(i)
	}
	t.Logf("killed etcd members %v", down)

	for _, m := range ms {
		start := time.Now()
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := m.sys.CreateUser(c, accounts.NewUser{Email: "lost-" + m.id + "@example.com", Password: "correct horse", Plan: accounts.PlanStandard, LicenseActive: true})
		cancel()
		took := time.Since(start)
		if !errors.Is(err, actors.ErrUnavailable) || took > 5*time.Second {
			t.Errorf("a change on %s without quorum = %v after %v (want ErrUnavailable within 5s)", m.id, err, took)
		}
	}
	// Admissions: whatever is reserved, then 503; never another error.
	deadline := time.Now().Add(6 * time.Second)
	var closed bool
	for time.Now().Before(deadline) && !closed {
		closed = true
		for _, m := range ms {
			r := m.sys.Authorize(context.Background(), []byte(secret))
			switch {
			case errors.Is(r.Err, actors.ErrUnavailable):
			case r.Err == nil:
				closed = false
			default:
				t.Fatalf("admission on %s without quorum: %v", m.id, r.Err)
			}
		}
	}
	if !closed {
		t.Error("nodes still admitted 6s after quorum was lost")
	}

	for _, i := range down {
		f.etcd.Restart(t, i)
	}
	start := time.Now()
	for _, m := range ms {
		eventually(t, 20*time.Second, "changes on "+m.id+" after quorum is back", func() bool {
			_, err := m.sys.CreateUser(context.Background(), accounts.NewUser{Email: fmt.Sprintf("back-%s-%d@example.com", m.id, time.Now().UnixNano()), Password: "correct horse", Plan: accounts.PlanStandard, LicenseActive: true})
			return err == nil
		})
		eventually(t, 20*time.Second, "admissions on "+m.id+" after quorum is back", func() bool {
			return m.sys.Authorize(context.Background(), []byte(secret)).Err == nil
		})
	}
	t.Logf("changes and admissions on every node %v after quorum came back", time.Since(start).Round(time.Millisecond))
	_ = k
}

// TestReservationBudget: a key that uses its whole hour costs etcd about
// 2 × limit/chunk = 200 reservation commits (a reservation tops the balance
// up to one chunk once it is down to half of one, so each brings about
// half a chunk: what keeps the tokens outstanding, and so the
// under-admission after a crash, within one chunk), and one node's usage
// is logged in one group-committed append per flush, whatever the number
// of keys.
func TestReservationBudget(t *testing.T) {
	f := newFleet(t)
	reg := prometheus.NewRegistry()
	a := f.startWith("a", reg)
	waitOwners(t, a)
	const limit = 10000
	_, secret := newKey(t, a, limit)
	rev0 := etcdRevision(t, a)
	admitted, failed := hammer(t, secret, limit/2, a, a)
	if admitted != limit || len(failed) > 0 {
		t.Fatalf("admitted %d of %d, %d failed", admitted, limit, len(failed))
	}
	if err := a.sys.FlushUsage(ctx(t)); err != nil {
		t.Fatal(err)
	}
	var res float64
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "gatehouse_cluster_reservations_total" {
			for _, m := range mf.GetMetric() {
				res += m.GetCounter().GetValue()
			}
		}
	}
	revs := etcdRevision(t, a) - rev0
	t.Logf("%d admissions: %.0f reservation commits, %d etcd revisions in all (reservations and usage appends)", admitted, res, revs)
	want := 2 * float64(limit) / float64(cluster.Chunk(limit))
	if res < want/2 || res > 1.05*want+1 {
		t.Errorf("%.0f reservations for a whole hour of a key limited to %d (want about %.0f)", res, limit, want)
	}
}

func etcdRevision(t *testing.T, m *member) int64 {
	t.Helper()
	r, err := m.cli.Get(ctx(t), "/none")
	if err != nil {
		t.Fatal(err)
	}
	return r.Header.Revision
}

// TestRacingKeyChangesConverge: three nodes change the same keys at the
// same moment (rotate on one, revoke on another, rename on the third);
// every node ends with the same state of every key, and a node started
// afterwards, which replays the log in order, with that state too.
func TestRacingKeyChangesConverge(t *testing.T) {
	f := newFleet(t)
	ms := []*member{f.start("a"), f.start("b"), f.start("c")}
	waitOwners(t, ms...)
	var infos []keys.KeyInfo
	for range 12 {
		k, secret := newKey(t, ms[0], 1000)
		infos = append(infos, k)
		for _, m := range ms {
			eventually(t, time.Second, "the key on "+m.id, func() bool {
				return m.sys.Validate(context.Background(), []byte(secret)).Err == nil
			})
		}
	}
	var wg sync.WaitGroup
	for i, k := range infos {
		for j, m := range ms {
			wg.Go(func() {
				c := ctx(t)
				switch (i + j) % 3 {
				case 0:
					_, _, _ = m.sys.RotateKey(c, k.ID)
				case 1:
					_ = m.sys.RevokeKey(c, k.ID)
				case 2:
					name := "renamed-by-" + m.id
					_, _ = m.sys.UpdateKey(c, k.ID, keys.KeyPatch{Name: &name})
				}
			})
		}
	}
	wg.Wait()
	state := func(m *member, k keys.KeyInfo) string {
		ki, err := m.sys.GetKey(context.Background(), k.ID)
		return fmt.Sprintf("%v %s %s %v", err, ki.Name, ki.Preview, ki.IsActive)
	}
	for _, k := range infos {
		eventually(t, 2*time.Second, "the key "+k.ID.String()+" the same everywhere", func() bool {
			s := state(ms[0], k)
			return s == state(ms[1], k) && s == state(ms[2], k)
		})
	}
	fresh := f.start("d")
	for _, k := range infos {
		eventually(t, 2*time.Second, "the replayed key "+k.ID.String()+" as the others have it", func() bool {
			return state(fresh, k) == state(ms[0], k)
		})
	}
}

// TestRacingAccountChanges: account changes made on several nodes at once
// are decided one at a time, each on a state that holds the others: an
// email is taken once, patches of different fields of one user all stay,
// and an owner's keys never exceed the plan's count, wherever they were
// created.
func TestRacingAccountChanges(t *testing.T) {
	const maxKeys = 4
	f := newFleet(t)
	f.tuneAccounts = func(c *accounts.Config) {
		c.MaxKeys = map[accounts.Plan]int{accounts.PlanStandard: maxKeys, accounts.PlanPremium: 10 * maxKeys}
	}
	ms := []*member{f.start("a"), f.start("b"), f.start("c")}
	waitOwners(t, ms...)

	// One email, asked for on every node at once.
	for round := range 4 {
		email := fmt.Sprintf("race%d@example.com", round)
		var created, taken atomic.Int32
		var wg sync.WaitGroup
		for _, m := range ms {
			wg.Go(func() {
				_, err := m.sys.CreateUser(ctx(t), accounts.NewUser{Email: email, Password: "correct horse", LicenseActive: true})
				switch {
				case err == nil:
					created.Add(1)
				case errors.Is(err, accounts.ErrEmailTaken):
					taken.Add(1)
				default:
					t.Errorf("create %s on %s: %v", email, m.id, err)
				}
			})
		}
		wg.Wait()
		if created.Load() != 1 || taken.Load() != 2 {
			t.Fatalf("%s: %d created, %d refused as taken; want 1 and 2", email, created.Load(), taken.Load())
		}
		for _, m := range ms {
			eventually(t, time.Second, email+" on "+m.id, func() bool {
				users, err := m.sys.ListUsers(context.Background())
				n := 0
				for _, u := range users {
					if u.Email == email {
						n++
					}
				}
				return err == nil && n == 1
			})
		}
	}

	// Three fields of one user, each patched on another node at once.
	u, err := ms[0].sys.CreateUser(ctx(t), accounts.NewUser{Email: "patched@example.com", Password: "correct horse"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		eventually(t, time.Second, "the user on "+m.id, func() bool {
			_, err := m.sys.GetUser(context.Background(), u.ID)
			return err == nil
		})
	}
	premium, licensed, limit := accounts.PlanPremium, true, int64(77)
	patches := []accounts.UserPatch{{Plan: &premium}, {LicenseActive: &licensed}, {KeyRateLimit: &limit}}
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			if _, err := m.sys.UpdateUser(ctx(t), u.ID, patches[i]); err != nil {
				t.Errorf("patch on %s: %v", m.id, err)
			}
		})
	}
	wg.Wait()
	for _, m := range ms {
		eventually(t, time.Second, "every patch on "+m.id, func() bool {
			got, err := m.sys.GetUser(context.Background(), u.ID)
			return err == nil && got.Plan == premium && got.LicenseActive && got.KeyRateLimit == limit
		})
	}

	// One owner's keys, created on every node at once.
	owner, err := ms[0].sys.CreateUser(ctx(t), accounts.NewUser{Email: "owner@example.com", Password: "correct horse", LicenseActive: true})
	if err != nil {
		t.Fatal(err)
	}
	var made, refused atomic.Int32
	for _, m := range ms {
		wg.Go(func() {
			for range maxKeys {
				_, _, err := m.sys.CreateKey(ctx(t), keys.NewKey{Owner: m.sys.KeyOwner(owner), Name: "k-" + m.id})
				switch {
				case err == nil:
					made.Add(1)
				case errors.Is(err, keys.ErrKeyLimit):
					refused.Add(1)
				default:
					t.Errorf("create a key on %s: %v", m.id, err)
				}
			}
		})
	}
	wg.Wait()
	if made.Load() != maxKeys || refused.Load() != 2*maxKeys {
		t.Fatalf("%d keys created and %d refused; want %d and %d", made.Load(), refused.Load(), maxKeys, 2*maxKeys)
	}
	for _, m := range ms {
		eventually(t, time.Second, "the owner's keys on "+m.id, func() bool {
			list, err := m.sys.ListKeys(context.Background(), owner.ID)
			return err == nil && len(list) == maxKeys
		})
	}
}
