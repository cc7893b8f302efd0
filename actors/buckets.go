package actors

import (
	"context"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"gatehouse/actors/ratelimit"
)

// Gateway token buckets: one actor per subject (a gateway user id, an API
// key id or a client IP), under a fixed set of bucket shards, exactly like
// keys. Buckets are not durable: a restart refills them (documented), which
// is what a client would see after a bucket was swept anyway.

// BucketSweepEvery and BucketIdleAfter are the seed's cleanup rule: every 5
// minutes, buckets idle for more than 10 minutes are removed.
const (
	BucketSweepEvery = 5 * time.Minute
	BucketIdleAfter  = 10 * time.Minute
	bucketShards     = 16
)

// allowMsg asks a subject's bucket for one token. Pooled.
type allowMsg struct {
	subject string
	reply   chan bool
}

// bucketSlot is a shard's handle on one bucket actor.
type bucketSlot struct {
	pid      *actor.PID
	lastSeen int64
}

// bucketShard owns the buckets whose subject hashes to it.
type bucketShard struct {
	deps      *keyDeps
	rate      float64 // tokens per second
	burst     float64
	buckets   map[string]*bucketSlot
	now       int64
	lastSweep int64
	onLive    func(delta int)
}

// Receive is the shard's mailbox entry point.
func (s *bucketShard) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *allowMsg:
		sl := s.buckets[m.subject]
		if sl == nil {
			ba := &bucketActor{deps: s.deps, rate: s.rate, burst: s.burst}
			sl = &bucketSlot{pid: ctx.Spawn(s.deps.props(func() actor.Actor { return ba }))}
			s.buckets[m.subject] = sl
			s.onLive(1)
		}
		sl.lastSeen = s.now
		ctx.Send(sl.pid, m)
	case tick:
		s.now = m.now
		if s.now-s.lastSweep < int64(BucketSweepEvery/time.Second) {
			return
		}
		s.lastSweep = s.now
		for subj, sl := range s.buckets {
			if s.now-sl.lastSeen > int64(BucketIdleAfter/time.Second) {
				ctx.Poison(sl.pid) // after any request already queued to it
				delete(s.buckets, subj)
				s.onLive(-1)
			}
		}
	case countBuckets:
		m.reply <- len(s.buckets)
	}
}

type countBuckets struct{ reply chan int }

// bucketActor owns one token bucket.
type bucketActor struct {
	deps  *keyDeps
	rate  float64
	burst float64
	b     ratelimit.Bucket
}

// Receive answers allowMsg.
func (a *bucketActor) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*allowMsg); ok {
		m.reply <- a.b.Allow(a.deps.clock.Now(), a.rate, a.burst)
	}
}

// spawnBuckets starts the bucket shards when the gateway limit is enabled.
func (s *System) spawnBuckets(deps *keyDeps) {
	if s.cfg.GatewayRPM <= 0 {
		return
	}
	s.bucketSeed = maphash.MakeSeed()
	s.bucketShards = make([]*actor.PID, bucketShards)
	now := s.clock.Now().Unix()
	for i := range s.bucketShards {
		sh := &bucketShard{
			deps: deps, rate: float64(s.cfg.GatewayRPM) / 60, burst: float64(s.cfg.GatewayBurst),
			buckets: map[string]*bucketSlot{}, now: now, lastSweep: now,
			onLive: func(d int) { s.m.liveBuckets.Add(float64(d)) },
		}
		s.bucketShards[i] = s.root.Spawn(deps.props(func() actor.Actor { return sh }))
	}
	s.allowPool = NewPool(func() *allowMsg { return &allowMsg{reply: make(chan bool, 1)} })
}

// Allow takes one token from subject's bucket (refilled at GatewayRPM/60 per
// second, holding at most GatewayBurst). It always allows when the gateway
// limit is disabled (GatewayRPM 0). Subjects are opaque: the caller decides
// (user id, else API key, else client IP without port).
func (s *System) Allow(ctx context.Context, subject string) (bool, error) {
	if len(s.bucketShards) == 0 {
		return true, nil
	}
	m := s.allowPool.Get()
	m.subject = subject
	shard := maphash.String(s.bucketSeed, subject) % uint64(len(s.bucketShards))
	allowed, ok, err := Ask(ctx, s.root, s.bucketShards[shard], m, m.reply, s.Watchdog())
	if !ok {
		return false, fmt.Errorf("rate limit: %w", err)
	}
	m.subject = ""
	s.allowPool.Put(m)
	return allowed, nil
}

// liveBucketCount reports the buckets held (tests).
func (s *System) liveBucketCount(ctx context.Context) (int, error) {
	total := 0
	for _, pid := range s.bucketShards {
		reply := make(chan int, 1)
		s.root.Send(pid, countBuckets{reply: reply})
		n, err := await(ctx, reply)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}
