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
	// Cluster turns cluster mode on (nil: a single node); see ClusterDeps.
	Cluster *ClusterDeps
}

// System is the engine: it restores its extensions (the domains) from the
// latest snapshot plus the WAL, starts their actors on one actor system,
// drives their ticks, snapshots and shutdown and, in cluster mode, follows
// the replicated log. All its methods are safe for concurrent use; it
// holds no domain state itself.
type System struct {
	cfg    Config
	lg     *slog.Logger
	clock  clock.Clock
	sealer *Sealer
	log    *wal.Log
	snaps  *snapshot.Store
	m      *metrics
	exts   []Extension // every domain, in Deps.Extensions' order
	disp   *poolDispatcher
	as     *actor.ActorSystem
	root   *actor.RootContext

	elog EventLog     // the WAL, or the replicated log in cluster mode
	cm   *clusterMode // nil: a single node

	reg      prometheus.Registerer
	watchdog Watchdog // current generation; see loop
	stop     chan struct{}
	loopDone chan struct{}
	closed   atomic.Bool

	snapping     atomic.Bool
	snapMu       sync.Mutex // serializes Snapshot calls; guards lastSnap*
	lastSnapIdx  atomic.Uint64
	lastSnapTime atomic.Int64
}

// New restores the durable state (newest valid snapshot, then the WAL after
// it), starts the actors that own it and the background ticker that drives
// usage flushes, passivation and snapshots.
//
// exts are the durable domains (actors/keys, actors/accounts,
// actors/control, actors/gateway), restored, started, ticked, flushed,
// captured and stopped in this order; their names and record types must
// be unique. Each serves one System.
func New(cfg Config, d Deps, exts ...Extension) (*System, error) {
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
	s.exts = exts
	if err := checkExtensions(s.exts); err != nil {
		return nil, err
	}
	wd := make(chan struct{})
	s.watchdog.cur.Store(&wd)
	start := time.Now()
	var (
		idx      uint64
		replayed int
	)
	if d.Cluster != nil {
		if s.cm, err = newClusterMode(d.Cluster, s.lg); err != nil {
			return nil, err
		}
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
	m.snapRecords.Set(float64(replayed))
	s.lg.Info("restored", "snapshot_index", idx, "replayed_records", replayed, "duration", took)
	s.lastSnapIdx.Store(idx)
	s.lastSnapTime.Store(d.Clock.Now().Unix())
	if err := s.spawn(); err != nil {
		s.as.Shutdown()
		s.disp.close()
		return nil, err
	}
	if s.cm != nil {
		if err := s.startCluster(idx); err != nil {
			for _, x := range s.exts {
				x.Stop()
			}
			s.as.Shutdown()
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
		secs, err := DecodeSnapshot(payload)
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

// spawn starts the actor system and every domain, in order.
func (s *System) spawn() error {
	plog := slog.New(minLevel{h: s.lg.Handler(), min: slog.LevelWarn}).With("component", "protoactor")
	s.as = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return plog }))
	s.root = s.as.Root
	s.disp = newPoolDispatcher(dispatchWorkers, 300)
	for _, x := range s.exts {
		if err := x.Start(s.extensionEnv()); err != nil {
			return fmt.Errorf("start extension %s: %w", x.Name(), err)
		}
	}
	return nil
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
			prev = *s.watchdog.cur.Swap(&next)
		}
	}
}

// Tick ticks the extensions (Ticker: the keys flush usage and passivate
// idle key actors, the accounts expire sessions) and starts a snapshot
// when one is due. The ticker calls it every FlushInterval; tests call it
// directly.
func (s *System) Tick() {
	now := s.clock.Now().Unix()
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

// Close stops the ticker, flushes each Flusher extension (the keys'
// usage first), takes a final snapshot (so the next start replays
// little) and stops the actors. It does not close the WAL.
func (s *System) Close(ctx context.Context) error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(s.stop)
	<-s.loopDone
	var err error
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

// Watchdog returns a channel closed one to two Config.AuthTimeout periods
// from now: hot paths bound their wait with it instead of a timer per call
// (ExtensionEnv.Watchdog).
func (s *System) Watchdog() <-chan struct{} { return s.watchdog.C() }

// Watchdog hands out the current generation of the system's watchdog: a
// channel closed one to two Config.AuthTimeout periods from now, so a hot
// path bounds its wait with it instead of a timer per call. C is a load,
// inlined where it is called (ExtensionEnv.Watchdog).
type Watchdog struct{ cur atomic.Pointer[chan struct{}] }

// C returns the current generation's channel.
func (w *Watchdog) C() <-chan struct{} { return *w.cur.Load() }

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
