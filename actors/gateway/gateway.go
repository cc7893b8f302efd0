package gateway

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/actors"
	"gatehouse/actors/clock"
	"gatehouse/actors/gateway/blob"
	"gatehouse/actors/gateway/pricing"
	"gatehouse/wal"
)

// Config bounds the gateway's in-memory state.
type Config struct {
	// NodeID is this node's id in cluster mode ("" on a single node): the
	// node a summon it starts runs on.
	NodeID string
	// KeyShards is the number of API-key shard actors.
	KeyShards int
	// MaxTraces is how many run traces are kept (the oldest are dropped).
	MaxTraces int
	// MaxActivity is how many audit entries each owning actor keeps (the
	// registry, each key shard): the newest.
	MaxActivity int
	// TraceDays drops traces that started this many days before the
	// newest run (0: kept until MaxTraces pushes them out).
	TraceDays int
	// UsageDays is how many UTC days of usage rows are kept, counted back
	// from the newest day recorded.
	UsageDays int
	// RateLimitRPM enables the per-subject token buckets
	// (gateway.rate_limit_rpm): tokens refilled per minute; 0 disables them.
	RateLimitRPM int
	// RateLimitBurst is the bucket size (the seed's burst of 5).
	RateLimitBurst int
	// BucketShards is the number of bucket shard actors.
	BucketShards int
	// TenantShards is the number of tenant shard actors, which own
	// sessions (by key) and memory entries (by user).
	TenantShards int
	// Quotas cap what one user may hold.
	Quotas Quotas
	// DefaultAgent is the agent (id or agent_key) a run that names none
	// gets when it acts for no user (the gateway token without a user,
	// cmd: gateway.default_agent); "": such a run has no default agent.
	DefaultAgent string
	// BlobDir holds the blob store (file bytes that do not belong in the
	// WAL: skill ZIPs, media, workspace files); cmd sets <data>/blobs.
	// Empty: no blob store, Blobs returns nil.
	BlobDir string
	// WrapBlobs, when set, wraps the store under BlobDir in the one the
	// gateway uses: in cluster mode, package replica's, which keeps each
	// upload on two nodes and fetches what is missing here. nil: the
	// store under BlobDir as it is.
	WrapBlobs func(*blob.Store) (BlobStore, error)
	// ToolsExecEnabled allows custom tools, which run commands on the host
	// (cmd: tools.exec_enabled, default off). Off, creating or changing
	// one is ErrDisabled and agents run without them.
	ToolsExecEnabled bool
	// WorkspaceDir holds each agent's workspace (<dir>/<agent id>), where
	// its custom tools run; cmd sets <data>/workspaces.
	WorkspaceDir string
	// DefaultUserBudget is gateway.default_user_budget: the budget of
	// every user without one of their own (Period "": none).
	DefaultUserBudget DefaultBudget
	// Pricing prices LLM calls (cmd: the pricing section; nil: the
	// built-in table alone, unknown models allowed).
	Pricing *pricing.Resolver
	// Registerer takes the gateway's own metrics (buckets, blob store);
	// nil: the actor system's. cmd gives the gateway listener's registry,
	// so each listener's /metrics shows its own series.
	Registerer prometheus.Registerer
}

// DefaultConfig returns 8 key shards, 10,000 traces of at most 30 days,
// 400 days of usage,
// and the token buckets off (burst 5 once enabled, 16 bucket shards).
func DefaultConfig() Config {
	return Config{KeyShards: 8, MaxTraces: 10_000, TraceDays: 30, UsageDays: 400, MaxActivity: 10_000, RateLimitBurst: 5, BucketShards: 16, TenantShards: 16,
		Quotas: DefaultQuotas()}
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.KeyShards < 1 || c.KeyShards > 1024:
		return errors.New("gateway: KeyShards must be in 1..1024")
	case c.MaxTraces < 1:
		return errors.New("gateway: MaxTraces must be > 0")
	case c.MaxActivity < 1:
		return errors.New("gateway: MaxActivity must be > 0")
	case c.TraceDays < 0:
		return errors.New("gateway: TraceDays must be >= 0")
	case c.UsageDays < 1:
		return errors.New("gateway: UsageDays must be > 0")
	case c.RateLimitRPM < 0:
		return errors.New("gateway: rate_limit_rpm must be >= 0")
	case c.RateLimitRPM > 0 && c.RateLimitBurst < 1:
		return errors.New("gateway: RateLimitBurst must be >= 1")
	case c.BucketShards < 1 || c.BucketShards > 1024:
		return errors.New("gateway: BucketShards must be in 1..1024")
	case c.TenantShards < 1 || c.TenantShards > 1024:
		return errors.New("gateway: TenantShards must be in 1..1024")
	case c.Quotas.MemoryEntries < 1 || c.Quotas.MediaBytes < 1 || c.Quotas.Sessions < 1 || c.Quotas.Agents < 1 || c.Quotas.PendingMCPRequests < 1:
		return errors.New("gateway: every quota (gateway.quotas.*) must be >= 1")
	}
	return c.DefaultUserBudget.Validate()
}

// Gateway is the agent gateway's durable domain: an actors.Extension whose
// actors own API keys (sharded by hash), providers and agents (one registry
// actor) and run records (one runs actor). Its methods are safe for
// concurrent use once the System has started it; none holds state itself.
type Gateway struct {
	cfg    Config
	st     *state // restore and replay target; handed to the actors at Start
	root   *actor.RootContext
	log    actors.EventLog
	clock  clock.Clock
	sealer *actors.Sealer
	lg     *slog.Logger
	wd     func() <-chan struct{}
	bk     *buckets
	live   prometheus.Gauge
	// asks counts operations sent to the registry and the tenant shards.
	asks                *prometheus.CounterVec
	regAsks, tenantAsks prometheus.Counter
	// homes says which key shard holds a key id; after Start only
	// ApplyLive replaces it (placeLive).
	homes atomic.Pointer[keyHomes]

	// members, in cluster mode, lists the live nodes (see SetMembers);
	// summons tracks the sweep of summons whose node left.
	members atomic.Pointer[func() []string]
	summons summonSweep
	holds   holdSweep

	// blobs is nil without Config.BlobDir. cut and keep carry one snapshot's
	// collection from BeforeBarrier through Capture to AfterSnapshot (the
	// System runs them one snapshot at a time, on one goroutine).
	blobs BlobStore
	local *blob.Store // the store under BlobDir (blobs wraps it in cluster mode)
	cut   blob.Cut
	keep  map[blob.Ref]bool

	// newID draws entity ids and rand the raw API keys: uuid.New and
	// crypto/rand, replaced by seeded sources in tests.
	newID func(kind) uuid.UUID
	rand  io.Reader
	// wrapLog, set by tests, wraps the log the actors append to (cluster
	// tests share one log between nodes).
	wrapLog func(actors.EventLog) actors.EventLog

	shards   []*actor.PID
	registry *actor.PID
	tenants  []*actor.PID
	// view is the registry part as of its last commit, immutable: reads
	// (read) are answered from it in the caller's goroutine, so they
	// never wait behind a write's fsync or another caller's operation.
	view atomic.Pointer[registryPart]
	// traces are the run traces as the runs actor last published them.
	traces   atomic.Pointer[[]*runRec]
	runs     *actor.PID
	authPool *actors.Pool[authMsg]
	budgetMx *budgetMetrics
	// allow are this node's budget allowances by budget id (each
	// *allowance is made and settled by its ledger's tenant shard; calls
	// spend from it: budgetallow.go). budgetLock is the cluster's lock
	// on a budget's holds (nil on a single node).
	allow      sync.Map
	budgetLock BudgetLocker

	// unapplied counts the runs recorded and not yet applied (runs.go).
	unapplied atomic.Int64
}

var (
	_ actors.Extension        = (*Gateway)(nil)
	_ actors.Ticker           = (*Gateway)(nil)
	_ actors.SnapshotObserver = (*Gateway)(nil)
)

// New returns a Gateway to pass in actors.Deps.Extensions.
func New(cfg Config) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Gateway{cfg: cfg, newID: func(kind) uuid.UUID { return uuid.New() }, rand: rand.Reader}, nil
}

// Name is the snapshot section name.
func (g *Gateway) Name() string { return "gateway" }

// Owns claims record types 64..75 (records.go).
func (g *Gateway) Owns(t wal.Type) bool { return owns(t) }

// Restore replaces the state with a snapshot section (nil: empty).
func (g *Gateway) Restore(b []byte) error {
	g.st = newState(g.cfg)
	if b == nil {
		return nil
	}
	return restoreSection(b, g.st)
}

// Apply replays one record after the snapshot.
func (g *Gateway) Apply(seq uint64, r wal.Record) error {
	ev, err := decodeEvent(r)
	if err != nil {
		return fmt.Errorf("seq %d: %w", seq, err)
	}
	g.st.apply(seq, ev)
	return nil
}

// Start spawns the key shards, the registry and the runs actor, each with
// its part of the restored state.
func (g *Gateway) Start(env actors.ExtensionEnv) error {
	g.root, g.log, g.clock, g.sealer, g.wd = env.Root, env.Log, env.Clock, env.Sealer, env.Watchdog.C
	if g.wrapLog != nil {
		g.log = g.wrapLog(g.log)
	}
	g.asks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_gateway_actor_asks_total",
		Help: "Operations sent to the gateway's registry and tenant shard actors (reads answered from the registry's view are not).",
	}, []string{"actor"})
	g.regAsks, g.tenantAsks = g.asks.WithLabelValues("registry"), g.asks.WithLabelValues("tenant")
	g.live = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gatehouse_gateway_live_bucket_actors",
		Help: "Gateway token-bucket actors currently live.",
	})
	metricsReg := g.cfg.Registerer
	if metricsReg == nil {
		metricsReg = env.Registerer
	}
	if metricsReg != nil {
		for _, c := range []prometheus.Collector{g.live, g.asks} {
			if err := metricsReg.Register(c); err != nil {
				return fmt.Errorf("gateway metrics: %w", err)
			}
		}
	}
	if err := g.startBudgets(metricsReg); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	g.bk = startBuckets(g.cfg, env, func(d int) { g.live.Add(float64(d)) })
	g.lg = env.Logger
	if g.lg == nil {
		g.lg = slog.New(slog.DiscardHandler)
	}
	g.lg = g.lg.With("component", "gateway")
	if g.cfg.BlobDir != "" {
		bcfg := blob.DefaultConfig()
		bcfg.Dir = g.cfg.BlobDir
		bs, err := blob.New(bcfg, g.lg, metricsReg)
		if err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		g.local, g.blobs = bs, localBlobs{bs}
		if g.cfg.WrapBlobs != nil {
			if g.blobs, err = g.cfg.WrapBlobs(bs); err != nil {
				return fmt.Errorf("gateway: %w", err)
			}
		}
	}
	st := g.st
	g.st = nil
	g.homes.Store(&st.homes)
	st.runs.live = st.runs.seq // ApplyLive: every run up to seq is reflected
	g.shards = make([]*actor.PID, len(st.keys))
	for i, p := range st.keys {
		ks := &keyShard{idx: i, n: len(st.keys), log: g.log, clock: g.clock, part: p}
		g.shards[i] = g.root.Spawn(env.Props(func() actor.Actor { return ks }))
	}
	reg := &registry{regView: regView{part: st.reg, clock: g.clock, lg: g.lg}, log: g.log, pub: &g.view, quota: g.cfg.Quotas, node: g.cfg.NodeID}
	reg.publish()
	g.registry = g.root.Spawn(env.Props(func() actor.Actor { return reg }))
	g.startTenants(env, st.tenants)
	ra := &runsActor{log: g.log, lg: g.lg, part: st.runs, view: &g.traces, unapplied: &g.unapplied}
	ra.publish()
	g.runs = g.root.Spawn(env.Props(func() actor.Actor { return ra }))
	ra.self, ra.root = g.runs, g.root
	g.authPool = actors.NewPool(func() *authMsg { return &authMsg{reply: make(chan authReply, 1)} })
	g.recoverAtStart()
	return nil
}

// recoverTimeout bounds the start-up recovery.
const recoverTimeout = 30 * time.Second

// recoverAtStart finishes what a crash interrupted, before Start returns
// and anyone reads: agents still summoning fail (their summon run died
// with the process), and tenant shards drop the sessions and memory of
// agents deleted just before the crash. Failures are logged: the state
// stays as it was restored.
func (g *Gateway) recoverAtStart() {
	ctx, cancel := context.WithTimeout(context.Background(), recoverTimeout)
	defer cancel()
	if err := do(ctx, g, func(r *registry) error { r.failInterrupted(); return nil }); err != nil {
		g.lg.Warn("fail interrupted summons", "err", err)
	}
	_, err := eachTenant(ctx, g, nil, func(t *tenantShard) (struct{}, error) { return struct{}{}, t.purgeOrphans() })
	if err != nil {
		g.lg.Warn("purge sessions and memory of deleted agents", "err", err)
	}
	if err := g.settleInterruptedHolds(ctx); err != nil {
		g.lg.Warn("settle budget reservations of interrupted calls", "err", err)
	}
}

// commit appends ev (durable on return) and applies it to p, the part of
// the state the calling actor owns: the only way actors change durable
// state, so that live traffic and replay run the same apply.
func commit(log actors.EventLog, p part, ev event) error {
	return commitAll(log, p, ev)
}

// commitAs is commitAll with the audit entry of the change appended in
// the same write, when the change was made by an API caller (by != nil).
func commitAs(log actors.EventLog, p part, by *Actor, now time.Time, au audit, evs ...event) error {
	if e := au.entry(by, now); e != nil {
		evs = append(evs, entitySaved{e})
	}
	return commitAll(log, p, evs...)
}

// commitAll appends evs in one write (all durable, or none) and applies
// them in order: for a change that spans several entities.
func commitAll(log actors.EventLog, p part, evs ...event) error {
	recs := make([]wal.Record, len(evs))
	for i, ev := range evs {
		recs[i] = ev.record()
	}
	last, err := log.Append(recs...)
	if err != nil {
		return err
	}
	first := last - uint64(len(evs)) + 1
	m, _ := p.(marked)
	for i, ev := range evs {
		p.apply(first+uint64(i), ev)
		if m != nil {
			m.marks().own(first+uint64(i), ev)
		}
	}
	return nil
}

// captureMsg asks an actor for the entities of its part.
type captureMsg struct{ reply chan []entity }

// Capture returns the section: every actor's part, gathered by message
// (applied entities are immutable, so they are encoded here, outside the
// actors).
func (g *Gateway) Capture(ctx context.Context) ([]byte, error) {
	owners := slices.Concat(g.shards, []*actor.PID{g.registry}, g.tenants)
	replies := make(chan []entity, len(owners))
	for _, pid := range owners {
		g.root.Send(pid, captureMsg{reply: replies})
	}
	var ents []entity
	for range owners {
		es, err := await(ctx, replies)
		if err != nil {
			return nil, fmt.Errorf("gateway capture: %w", err)
		}
		ents = append(ents, es...)
	}
	g.keep = blobsNamed(ents)
	ru := make(chan runsImage, 1)
	g.root.Send(g.runs, captureRuns{reply: ru})
	ri, err := await(ctx, ru)
	if err != nil {
		return nil, fmt.Errorf("gateway capture: %w", err)
	}
	return encodeSection(ents, ri), nil
}

// Stop has nothing to release: the System stops the actors.
func (g *Gateway) Stop() {}

// Blobs is the gateway's local blob store, under Config.BlobDir (nil
// without it). A resource that keeps bytes Puts them through the
// gateway's BlobStore, appends the record naming the Ref, then Releases
// the Ref (see package blob).
func (g *Gateway) Blobs() *blob.Store { return g.local }

// BlobStore is what the gateway needs of its blob store: the local
// *blob.Store on one node (see package blob for the rules: Put, append
// the record naming the ref, Release; Cut before a snapshot's barrier,
// Collect after it), or in cluster mode the store Config.WrapBlobs makes,
// whose Put returns once the bytes are on two nodes and whose Open
// fetches a blob missing here. Put and Open may then fail with an error
// wrapping blob.ErrUnavailable (503).
type BlobStore interface {
	Put(ctx context.Context, r io.Reader, limit int64) (blob.Ref, int64, error)
	Release(ref blob.Ref)
	Open(ctx context.Context, ref blob.Ref) (*blob.Reader, error)
	Cut() blob.Cut
	Collect(c blob.Cut, keep func(blob.Ref) bool) (int, error)
}

// localBlobs is a *blob.Store as a BlobStore: its calls are local disk
// I/O, bounded by their input, so they take no context.
type localBlobs struct{ *blob.Store }

func (l localBlobs) Put(_ context.Context, r io.Reader, limit int64) (blob.Ref, int64, error) {
	return l.Store.Put(r, limit)
}

func (l localBlobs) Open(_ context.Context, ref blob.Ref) (*blob.Reader, error) {
	return l.Store.Open(ref)
}

// blobNamer is an entity whose state names blobs; Capture keeps them.
type blobNamer interface {
	blobRefs() []blob.Ref
}

// blobsNamed returns the blobs the entities name.
func blobsNamed(ents []entity) map[blob.Ref]bool {
	keep := map[blob.Ref]bool{}
	for _, e := range ents {
		if bn, ok := e.(blobNamer); ok {
			for _, r := range bn.blobRefs() {
				keep[r] = true
			}
		}
	}
	return keep
}

// BeforeBarrier cuts the blob store's generation before the snapshot's
// barrier: a blob released after it survives this snapshot's collection.
func (g *Gateway) BeforeBarrier() {
	if g.blobs != nil {
		g.cut = g.blobs.Cut()
	}
}

// AfterSnapshot removes the blobs that no entity of the snapshot names and
// that no Put since the cut holds.
func (g *Gateway) AfterSnapshot(index uint64) error {
	if g.blobs == nil || g.keep == nil {
		return nil
	}
	keep := g.keep
	g.keep = nil
	if _, err := g.blobs.Collect(g.cut, func(r blob.Ref) bool { return keep[r] }); err != nil {
		return fmt.Errorf("collect blobs after snapshot %d: %w", index, err)
	}
	return nil
}

// Allow takes one token from subject's bucket (refilled at RateLimitRPM/60
// per second, holding at most RateLimitBurst). It always allows when the
// limit is off (RateLimitRPM 0). Subjects are opaque: the caller decides
// (the credential and the user it acts for, or the client IP without port).
// The wait is bounded by ctx and the System's watchdog.
func (g *Gateway) Allow(ctx context.Context, subject string) (bool, error) {
	return g.bk.allow(ctx, subject)
}

// Tick drives the bucket sweep and, in cluster mode, the sweep of summons
// whose node left; the System calls it every flush interval.
func (g *Gateway) Tick(now time.Time) {
	g.bk.tick(now)
	g.sweepOrphanedSummons(now)
	g.tickBudgets(now)
	g.sweepOrphanedHolds(now)
}

// await waits for a reply or the caller's deadline.
func await[T any](ctx context.Context, ch <-chan T) (T, error) {
	v, _, err := actors.Await(ctx, ch, nil)
	return v, err
}

// command is the registry's one generic message: run applies an
// operation to the registry (its one writer) and answers on a channel the
// caller waits on. It replaces a message type, a reply type and a switch
// case per operation.
type command struct{ run func(r *registry) }

// call runs fn on the registry actor on behalf of ctx's caller (audited
// as theirs, see send) and waits for its result: the wait's error, or
// else fn's own.
func call[R any](ctx context.Context, g *Gateway, fn func(r *registry) (R, error)) (R, error) {
	g.regAsks.Inc()
	wrap := func(run func(*registry)) any { return command{run: run} }
	return askOp(ctx, g, g.registry, wrap, func(r *registry) (R, error) {
		v, err := fn(r)
		r.publish() // before the answer: the caller reads its own write
		return v, err
	})
}

// askOp sends pid the message wrap makes of an operation on the actor's
// state A, on behalf of ctx's caller, and waits for the operation's
// result: the wait's error, or else fn's own (call, callTenant).
func askOp[A, R any](ctx context.Context, g *Gateway, pid *actor.PID, wrap func(func(A)) any, fn func(A) (R, error)) (R, error) {
	type result struct {
		v   R
		err error
	}
	reply := make(chan result, 1)
	g.send(ctx, pid, wrap(func(a A) {
		v, err := fn(a)
		reply <- result{v, err}
	}))
	res, err := await(ctx, reply)
	if err != nil {
		var zero R
		return zero, err
	}
	return res.v, res.err
}

// read runs fn on the latest published view, in the caller's goroutine:
// the path of every get, list and search. fn gets a regView, which has no
// commit, so it cannot write. It sees every change whose call has
// returned.
func read[R any](ctx context.Context, g *Gateway, fn func(r regView) (R, error)) (R, error) {
	if err := ctx.Err(); err != nil {
		var zero R
		return zero, err
	}
	return fn(g.reader())
}

// reader is the current published view, for read-only methods.
func (g *Gateway) reader() regView {
	return regView{part: g.view.Load(), clock: g.clock, lg: g.lg}
}

// Logger is the gateway's logger (after Start).
func (g *Gateway) Logger() *slog.Logger { return g.lg }
