package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/actors/clock"
	"gatehouse/snapshot"
	"gatehouse/wal"
)

// Deps are what System needs from the rest of the program.
type Deps struct {
	Log        *wal.Log
	Snapshots  *snapshot.Store
	Clock      clock.Clock // nil: the wall clock
	Sealer     *Sealer
	Logger     *slog.Logger // nil: discard
	Registerer prometheus.Registerer
	// Extensions are the durable domains besides the keys (actors/accounts,
	// actors/control, actors/gateway), restored, started and captured in
	// this order after the keys.
	Extensions []Extension
	// Cluster turns cluster mode on (nil: a single node); see ClusterDeps.
	Cluster *ClusterDeps
}

// System is the actor-based core: key shards and their key actors, and the
// extensions (accounts, control, the gateway), restored from the latest
// snapshot plus the WAL. All its
// methods are safe for concurrent use; none holds key state itself.
type System struct {
	cfg     Config
	lg      *slog.Logger
	clock   clock.Clock
	sealer  *Sealer
	log     *wal.Log
	snaps   *snapshot.Store
	m       *metrics
	kd      *keyDomain  // the keys as an Extension (keydomain.go), exts[0]
	exts    []Extension // every domain, the keys first
	disp    *poolDispatcher
	courier *courier
	as      *actor.ActorSystem
	root    *actor.RootContext
	shards  []*actor.PID
	// The shards and their mailboxes, for direct delivery of
	// authorizations (inlineMailbox.deliver).
	shardObjs []*shard
	shardMBs  []*inlineMailbox
	deps      *keyDeps // what the shards and key actors share
	slots     keySlots // the owners' key counts (keyslots.go)

	authPool *Pool[authorize]
	elog     EventLog     // the WAL, or the replicated log in cluster mode
	cm       *clusterMode // nil: a single node

	reg      prometheus.Registerer
	watchdog atomic.Pointer[chan struct{}] // current generation; see loop
	stop     chan struct{}
	loopDone chan struct{}
	closed   atomic.Bool

	snapping     atomic.Bool
	snapMu       sync.Mutex // serializes Snapshot calls; guards lastSnap*
	lastSnapIdx  atomic.Uint64
	lastSnapTime atomic.Int64
	lastSweep    int64 // only the ticker goroutine touches it
}

// New restores the durable state (newest valid snapshot, then the WAL after
// it), starts the actors that own it and the background ticker that drives
// usage flushes, passivation and snapshots.
func New(cfg Config, d Deps) (*System, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Sealer == nil || (d.Cluster == nil && (d.Log == nil || d.Snapshots == nil)) {
		return nil, errors.New("actors: Log, Snapshots (or Cluster) and Sealer are required")
	}
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(d.Registerer)
	if err != nil {
		return nil, fmt.Errorf("actors metrics: %w", err)
	}
	s := &System{
		cfg: cfg, lg: d.Logger.With("component", "actors"), clock: d.Clock, sealer: d.Sealer,
		log: d.Log, snaps: d.Snapshots, m: m, reg: d.Registerer,
		stop: make(chan struct{}), loopDone: make(chan struct{}),
	}
	s.kd = &keyDomain{s: s}
	s.exts = append([]Extension{s.kd}, d.Extensions...)
	s.slots.n = map[uuid.UUID]int{}
	s.authPool = NewPool(func() *authorize { return &authorize{reply: make(chan AuthResult, 1)} })
	wd := make(chan struct{})
	s.watchdog.Store(&wd)
	start := time.Now()
	var (
		idx      uint64
		replayed int
	)
	if d.Cluster != nil {
		if s.cm, err = newClusterMode(d.Cluster, s.lg); err != nil {
			return nil, err
		}
		s.cm.ctx = &clusterCtx{timeout: clusterTimeout, onReserve: func(err error) {
			if err != nil {
				m.reservations.WithLabelValues("failed").Inc()
			} else {
				m.reservations.WithLabelValues("committed").Inc()
			}
		}}
		s.elog = s.cm.rlog
		idx, replayed, err = s.restoreCluster()
	} else {
		s.elog = eventLog{d.Log}
		idx, replayed, err = s.restore()
	}
	if err != nil {
		if s.cm != nil {
			s.cm.rlog.Close()
		}
		return nil, err
	}
	took := time.Since(start)
	m.restoreSecs.Set(took.Seconds())
	m.keys.Set(float64(s.kd.im.nkeys))
	m.snapRecords.Set(float64(replayed))
	s.lg.Info("restored", "snapshot_index", idx, "replayed_records", replayed,
		"keys", s.kd.im.nkeys, "duration", took)
	s.lastSnapIdx.Store(idx)
	s.lastSnapTime.Store(d.Clock.Now().Unix())
	if err := s.spawn(); err != nil {
		s.as.Shutdown()
		s.courier.close()
		s.disp.close()
		return nil, err
	}
	if s.cm != nil {
		if err := s.startCluster(idx); err != nil {
			for _, x := range s.exts {
				x.Stop()
			}
			s.as.Shutdown()
			s.courier.close()
			s.disp.close()
			s.cm.rlog.Close()
			return nil, err
		}
	}
	go s.loop()
	return s, nil
}

// restoreGCPercent is GOGC while restoring: the image is millions of small
// long-lived objects, and at the default every heap doubling rescans them
// all (half the restore time at 1M keys). Restored afterwards.
const restoreGCPercent = 400

// restore loads the newest valid snapshot and replays the WAL after it,
// each section and record into the domain that owns it.
func (s *System) restore() (idx uint64, replayed int, err error) {
	defer debug.SetGCPercent(debug.SetGCPercent(restoreGCPercent))
	loaded := time.Now()
	idx, err = s.snaps.Load(func(i uint64, payload []byte) error {
		s.lg.Debug("snapshot read", "index", i, "bytes", len(payload), "duration", time.Since(loaded))
		secs, err := decodeSections(payload)
		if err == nil {
			err = s.restoreSections(secs)
		}
		if err != nil {
			if errors.Is(err, ErrCorrupt) {
				return fmt.Errorf("%w: %w", snapshot.ErrCorrupt, err)
			}
			return err
		}
		return nil
	})
	switch {
	case errors.Is(err, snapshot.ErrNoSnapshot):
		idx = 0
		if err := s.restoreSections(nil); err != nil {
			return 0, 0, fmt.Errorf("restore: %w", err)
		}
	case err != nil:
		return 0, 0, fmt.Errorf("restore: %w", err)
	}
	first, err1 := s.log.FirstIndex()
	last, err2 := s.log.LastIndex()
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, fmt.Errorf("restore: %w", err)
	}
	if first > idx+1 {
		return 0, 0, fmt.Errorf("restore: wal starts at %d but the snapshot ends at %d: records are missing", first, idx)
	}
	if last < idx {
		// Every record left is already in the snapshot (an older wal.db
		// was restored, or gatehouse repair dropped sequences missing at
		// the WAL's end): drop them, number on.
		s.lg.Warn("wal ends before the snapshot, continuing numbering after it", "wal_last", last, "snapshot_index", idx)
		if err := s.log.TruncateBefore(last + 1); err != nil {
			return 0, 0, fmt.Errorf("restore: %w", err)
		}
		if err := s.log.SetNext(idx); err != nil {
			return 0, 0, fmt.Errorf("restore: %w", err)
		}
	}
	// Replay refuses (a *wal.CorruptError) if the WAL holds a bad record
	// after idx: bbolt commits are atomic, so it was acknowledged, and
	// skipping it would lose it silently (gatehouse repair, wal/doc.go). A
	// bad record at or below idx is covered by the snapshot and harmless;
	// the next snapshot's truncation deletes it.
	err = s.log.Replay(idx, func(seq uint64, r wal.Record) error {
		replayed++
		return s.applyRecord(seq, r)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("restore: replay: %w", err)
	}
	return idx, replayed, nil
}

// spawn starts the actor system and every domain (the keys' shards first).
func (s *System) spawn() error {
	plog := slog.New(minLevel{h: s.lg.Handler(), min: slog.LevelWarn}).With("component", "protoactor")
	s.as = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return plog }))
	s.root = s.as.Root
	s.disp = newPoolDispatcher(dispatchWorkers, 300)
	s.courier = newCourier(s.root)
	var cl *clusterCtx
	if s.cm != nil {
		cl = s.cm.ctx
	}
	s.deps = &keyDeps{log: s.elog, cl: cl, clock: s.clock, root: s.root, lg: s.lg, grace: int64(s.cfg.GracePeriod / time.Second),
		disp: s.disp, courier: s.courier}
	for _, x := range s.exts {
		if err := x.Start(s.extensionEnv(s.deps)); err != nil {
			return fmt.Errorf("start extension %s: %w", x.Name(), err)
		}
	}
	return nil
}

// spawnShards hands each shard its part of the image and spawns it.
func (s *System) spawnShards(im *image) {
	deps := s.deps
	now := s.clock.Now().Unix()
	s.shards = make([]*actor.PID, s.cfg.Shards)
	s.shardObjs, s.shardMBs = make([]*shard, s.cfg.Shards), make([]*inlineMailbox, s.cfg.Shards)
	for i := range s.shards {
		sh := &shard{
			idx: i, n: s.cfg.Shards, deps: deps, idleAfter: int64(s.cfg.IdleAfter / time.Second),
			keys: im.keys[i], dir: im.dirs[i], now: now, live: map[*slot]struct{}{},
			onLive: func(d int) { s.m.liveKeys.Add(float64(d)) },
		}
		im.keys[i], im.dirs[i] = nil, nil
		s.shardObjs[i] = sh
		s.shards[i] = s.root.Spawn(deps.inlineProps(func() actor.Actor { return sh }, &s.shardMBs[i]))
	}
	for _, pid := range s.shards {
		s.root.Send(pid, shardPeers{peers: s.shards})
	}
}

// loop drives flushes, passivation sweeps and snapshots until Close.
func (s *System) loop() {
	defer close(s.loopDone)
	t := time.NewTicker(s.cfg.FlushInterval)
	defer t.Stop()
	wd := time.NewTicker(s.cfg.AuthTimeout)
	defer wd.Stop()
	prev := make(chan struct{}) // stands for the generation before the first
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Tick()
		case <-wd.C:
			// A waiter took the current channel; it closes one tick after
			// the next, so every wait lasts one to two AuthTimeouts.
			next := make(chan struct{})
			close(prev)
			prev = *s.watchdog.Swap(&next)
		}
	}
}

// Tick flushes pending usage, passivates idle key actors when a sweep is
// due, ticks the extensions (Ticker: the accounts expire sessions) and
// starts a snapshot when one is due. The ticker
// calls it every FlushInterval; tests call it directly.
func (s *System) Tick() {
	now := s.clock.Now().Unix()
	sweep := now-s.lastSweep >= int64(s.cfg.SweepInterval/time.Second)
	if sweep {
		s.lastSweep = now
	}
	for _, pid := range s.shards {
		s.root.Send(pid, tick{now: now, sweep: sweep})
	}
	for _, x := range s.exts {
		if t, ok := x.(Ticker); ok {
			t.Tick(time.Unix(now, 0))
		}
	}
	if s.snapshotDue(now) && s.snapping.CompareAndSwap(false, true) {
		go func() {
			defer s.snapping.Store(false)
			take := s.Snapshot
			if s.cm != nil {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				go func() { // Close stops a snapshot under way
					select {
					case <-s.stop:
						cancel()
					case <-ctx.Done():
					}
				}()
				take = func() (uint64, error) { return s.snapshotCluster(ctx, false) }
			}
			if _, err := take(); err != nil {
				s.m.snapErrors.Inc()
				s.lg.Error("snapshot failed", "err", err)
			}
		}()
	}
}

func (s *System) snapshotDue(now int64) bool {
	if s.cm != nil {
		return s.clusterSnapshotDue(now)
	}
	last, err := s.log.LastIndex()
	if err != nil || last <= s.lastSnapIdx.Load() {
		return false
	}
	if s.cfg.SnapshotEvery > 0 && last-s.lastSnapIdx.Load() >= s.cfg.SnapshotEvery {
		return true
	}
	iv := int64(s.cfg.SnapshotInterval / time.Second)
	return iv > 0 && now-s.lastSnapTime.Load() >= iv
}

// FlushUsage makes every counted request durable now (used at shutdown).
func (s *System) FlushUsage(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(len(s.shards))
	for _, pid := range s.shards {
		s.root.Send(pid, flushAll{wg: &wg})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("flush usage: %w: %w", ErrUnavailable, ctx.Err())
	}
}

// Close stops the ticker, flushes usage (and each Flusher extension),
// takes a final snapshot (so the next
// start replays little) and stops the actors. It does not close the WAL.
func (s *System) Close(ctx context.Context) error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(s.stop)
	<-s.loopDone
	err := s.FlushUsage(ctx)
	for _, x := range s.exts {
		if f, ok := x.(Flusher); ok {
			err = errors.Join(err, f.Flush(ctx))
		}
	}
	if s.cm != nil {
		for s.snapping.Load() { // a ticker snapshot, cancelled by stop
			time.Sleep(10 * time.Millisecond)
		}
		err = errors.Join(err, s.stopCluster())
	} else if err == nil {
		for s.snapping.Load() { // a ticker snapshot may still run
			time.Sleep(10 * time.Millisecond)
		}
		_, err = s.Snapshot()
	}
	for _, x := range s.exts {
		x.Stop()
	}
	s.as.Shutdown()
	s.courier.close()
	s.disp.close()
	return err
}

// Abort stops the ticker and the actors at once: no usage flush, no final
// snapshot, nothing more appended. It leaves the data dir exactly as a
// kill -9 at this moment would (crash tests restart on it). It does not
// close the WAL. Abort after Close, or twice, does nothing.
func (s *System) Abort() {
	if !s.closed.CompareAndSwap(false, true) {
		return
	}
	close(s.stop)
	<-s.loopDone
	if s.cm != nil {
		s.abortCluster()
	}
	for _, x := range s.exts {
		x.Stop()
	}
	s.as.Shutdown()
	s.courier.close()
	s.disp.close()
}

// minLevel drops records below min (protoactor logs every spawn at Info).
type minLevel struct {
	h   slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.h.Enabled(ctx, l)
}
func (m minLevel) Handle(ctx context.Context, r slog.Record) error { return m.h.Handle(ctx, r) }
func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{h: m.h.WithAttrs(a), min: m.min}
}
func (m minLevel) WithGroup(g string) slog.Handler { return minLevel{h: m.h.WithGroup(g), min: m.min} }

// await waits for a reply or the caller's deadline.
func await[T any](ctx context.Context, ch <-chan T) (T, error) {
	v, _, err := Await(ctx, ch, nil)
	return v, err
}

// Watchdog returns a channel closed one to two Config.AuthTimeout periods
// from now: hot paths bound their wait with it instead of a timer per call.
func (s *System) Watchdog() <-chan struct{} { return *s.watchdog.Load() }

// Health is nil while the system accepts changes, and ErrUnavailable
// wrapping the cause once it cannot: the WAL failed (fail-stop after a
// disk error) and only a restart recovers. Authorization keeps working
// meanwhile, its usage held in memory.
func (s *System) Health() error {
	if s.cm != nil {
		// cluster mode: the node's standing is the cluster's (/health),
		// unless it stopped following the log
		if err := s.cm.fatal.Load(); err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, *err)
		}
		return nil
	}
	return unavailable(s.log.Err())
}
