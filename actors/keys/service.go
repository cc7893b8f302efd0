package keys

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/clock"
	"gatehouse/wal"
)

// Service is the keys: an actors.Extension (records 10..16, section
// "keys") that cmd lists first, so the keys restore, start, tick, flush
// and are captured before the other domains; and the key-management API
// (Authorize, Validate, CreateKey ... KeyUsage) on top of it. It serves one
// System: build a new one for every actors.New. Its methods are safe for
// concurrent use once the System runs; none holds key state itself.
type Service struct {
	cfg Config
	m   *metrics
	lg  *slog.Logger

	// Set at Start (ExtensionEnv).
	clock   clock.Clock
	sealer  *actors.Sealer
	root    *actor.RootContext
	elog    actors.EventLog // the WAL, or the replicated log in cluster mode
	dog     *actors.Watchdog
	lock    func(ctx context.Context, name string) (func(), error)
	locking func() bool
	courier *courier // WAL commit notices to shards and key actors, in order

	shards []*actor.PID
	// The shards and their mailboxes, for direct delivery of
	// authorizations (inlineMailbox.deliver).
	shardObjs []*shard
	shardMBs  []*inlineMailbox
	deps      *keyDeps // what the shards and key actors share
	slots     keySlots // the owners' key counts (keyslots.go)
	authPool  *actors.Pool[authorize]
	cm        *clusterKeys // nil: a single node (keycluster.go)

	im        *image       // restored, handed to the shards at Start (nil after)
	captured  atomic.Int64 // keys in the last capture, for the log
	lastSweep int64        // only the ticker touches it
}

var (
	_ actors.Extension       = (*Service)(nil)
	_ actors.StreamedSection = (*Service)(nil)
	_ actors.OfflineImager   = (*Service)(nil)
	_ actors.LiveApplier     = (*Service)(nil)
	_ actors.Ticker          = (*Service)(nil)
	_ actors.Flusher         = (*Service)(nil)
	_ actors.ClusterMember   = (*Service)(nil)
)

// New returns the keys, not yet restored or started (actors.New does both).
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, lg: slog.New(slog.DiscardHandler)}
	s.slots.n = map[uuid.UUID]int{}
	s.authPool = actors.NewPool(func() *authorize { return &authorize{reply: make(chan AuthResult, 1)} })
	return s, nil
}

func (s *Service) Name() string         { return sectionKeys }
func (s *Service) Owns(t wal.Type) bool { return isKeyType(t) }

// Restore decodes the keys' section (nil: none) on every core.
func (s *Service) Restore(section []byte) error {
	if section == nil {
		s.im = newImage(s.cfg.Shards, 0)
		return nil
	}
	im, err := decodeKeys(section, s.cfg.Shards)
	if err != nil {
		return err
	}
	s.im = im
	return nil
}

// Apply replays one key record (see keyState.skip for the watermarks).
func (s *Service) Apply(seq uint64, rec wal.Record) error { return s.im.apply(seq, rec) }

// Start hands each shard its part of the image and spawns it.
func (s *Service) Start(env actors.ExtensionEnv) error {
	m, err := newMetrics(env.Registerer)
	if err != nil {
		return fmt.Errorf("keys metrics: %w", err)
	}
	s.m, s.lg = m, env.Logger.With("component", "keys")
	s.clock, s.sealer, s.root, s.elog = env.Clock, env.Sealer, env.Root, env.Log
	s.dog, s.lock, s.locking = env.Watchdog, env.Lock, env.Locking
	s.courier = newCourier(env.Root)
	s.deps = &keyDeps{log: env.Log, clock: env.Clock, root: env.Root, lg: s.lg,
		grace: int64(s.cfg.GracePeriod / time.Second), courier: s.courier}
	s.m.keys.Set(float64(s.im.nkeys))
	s.lg.Info("keys restored", "keys", s.im.nkeys)
	s.spawnShards(s.im)
	s.im = nil
	return nil
}

// Capture is CaptureParts joined (Snapshot calls CaptureParts).
func (s *Service) Capture(ctx context.Context) ([]byte, error) {
	parts, err := s.CaptureParts(ctx)
	return bytes.Join(parts, nil), err
}

// CaptureParts gathers every shard's keys, framed as the keys' section.
func (s *Service) CaptureParts(ctx context.Context) ([][]byte, error) {
	blocks, total, err := s.capture(ctx)
	if err != nil {
		return nil, err
	}
	s.captured.Store(int64(total))
	return keysSection(blocks, total).Parts, nil
}

// Stop stops the courier; the shards stop with the actor system.
func (s *Service) Stop() {
	if s.courier != nil {
		s.courier.close()
	}
}

// ApplyLive applies key records another node of a cluster wrote, in the
// key's shard or its live key actor (keycluster.go).
func (s *Service) ApplyLive(ctx context.Context, seq uint64, r wal.Record) error {
	var evs []keyEvent
	if r.Type == recKeysUsed {
		batch, err := decodeKeysUsed(r.Data)
		if err != nil {
			s.lg.Error("cluster: skipped an undecodable record", "seq", seq, "type", r.Type, "err", err)
			return nil
		}
		for _, ev := range batch {
			evs = append(evs, ev)
		}
	} else {
		ev, ok, err := decodeKeyEvent(r)
		if err != nil || !ok {
			s.lg.Error("cluster: skipped an unknown or undecodable record", "seq", seq, "type", r.Type, "err", err)
			return nil
		}
		evs = append(evs, ev)
	}
	for _, ev := range evs {
		if err := s.applyForeignKey(ctx, seq, ev); err != nil {
			return err
		}
	}
	return nil
}

// OfflineImage returns an empty image of the keys, off the actors.
func (s *Service) OfflineImage() actors.OfflineImage {
	return &keysOffline{im: newImage(s.cfg.Shards, 0)}
}

type keysOffline struct{ im *image }

func (o *keysOffline) Restore(section []byte) error {
	if section == nil {
		o.im = newImage(len(o.im.keys), 0)
		return nil
	}
	im, err := decodeKeys(section, len(o.im.keys))
	if err == nil {
		o.im = im
	}
	return err
}

func (o *keysOffline) Apply(seq uint64, rec wal.Record) error { return o.im.apply(seq, rec) }

func (o *keysOffline) Section() ([]byte, error) {
	blocks, total := o.im.blocks()
	return bytes.Join(keysSection(blocks, total).Parts, nil), nil
}

// spawnShards hands each shard its part of the image and spawns it.
func (s *Service) spawnShards(im *image) {
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

// Tick flushes pending usage and passivates idle key actors when a sweep
// is due (actors.Ticker: every Config.FlushInterval of the engine).
func (s *Service) Tick(at time.Time) {
	now := at.Unix()
	sweep := now-s.lastSweep >= int64(s.cfg.SweepInterval/time.Second)
	if sweep {
		s.lastSweep = now
	}
	for _, pid := range s.shards {
		s.root.Send(pid, tick{now: now, sweep: sweep})
	}
}

// Flush is FlushUsage (actors.Flusher: the engine calls it at Close,
// before the final snapshot).
func (s *Service) Flush(ctx context.Context) error { return s.FlushUsage(ctx) }

// FlushUsage makes every counted request durable now.
func (s *Service) FlushUsage(ctx context.Context) error {
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
		return fmt.Errorf("flush usage: %w: %w", actors.ErrUnavailable, ctx.Err())
	}
}

// await waits for a reply or the caller's deadline.
func await[T any](ctx context.Context, ch <-chan T) (T, error) {
	v, _, err := actors.Await(ctx, ch, nil)
	return v, err
}
