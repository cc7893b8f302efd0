package gateway

import (
	"context"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"gatehouse/actors"
	"gatehouse/actors/clock"
	"gatehouse/actors/ratelimit"
)

// Token buckets (seed: "token bucket per user or IP"): one actor per
// subject (a credential and the user it acts for, or a client IP), under a
// fixed set of bucket shards, as keys are. Buckets are not durable: a
// restart refills them (documented), which is what a client would see after
// a bucket was swept anyway.

// BucketSweepEvery and BucketIdleAfter are the seed's cleanup rule: every 5
// minutes, buckets idle for more than 10 minutes are removed.
const (
	BucketSweepEvery = 5 * time.Minute
	BucketIdleAfter  = 10 * time.Minute
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

// bucketTick drives the sweep; sent by Gateway.Tick.
type bucketTick struct{ now int64 }

// countBuckets asks a shard how many buckets it holds (tests, metrics).
type countBuckets struct{ reply chan int }

// bucketShard owns the buckets whose subject hashes to it.
type bucketShard struct {
	clock     clock.Clock
	props     func(actor.Producer) *actor.Props
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
			ba := &bucketActor{clock: s.clock, rate: s.rate, burst: s.burst}
			sl = &bucketSlot{pid: ctx.Spawn(s.props(func() actor.Actor { return ba }))}
			s.buckets[m.subject] = sl
			s.onLive(1)
		}
		sl.lastSeen = s.now
		ctx.Send(sl.pid, m)
	case bucketTick:
		s.sweep(ctx, m.now)
	case countBuckets:
		m.reply <- len(s.buckets)
	}
}

func (s *bucketShard) sweep(ctx actor.Context, now int64) {
	s.now = now
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
}

// bucketActor owns one token bucket.
type bucketActor struct {
	clock clock.Clock
	rate  float64
	burst float64
	b     ratelimit.Bucket
}

// Receive answers allowMsg.
func (a *bucketActor) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*allowMsg); ok {
		m.reply <- a.b.Allow(a.clock.Now(), a.rate, a.burst)
	}
}

// buckets is the gateway's rate limiter: nil shards when it is off.
type buckets struct {
	root   *actor.RootContext
	wd     func() <-chan struct{}
	seed   maphash.Seed
	shards []*actor.PID
	pool   *actors.Pool[allowMsg]
}

// startBuckets spawns the bucket shards when cfg enables the limit.
func startBuckets(cfg Config, env actors.ExtensionEnv, onLive func(int)) *buckets {
	b := &buckets{root: env.Root, wd: env.Watchdog.C}
	if cfg.RateLimitRPM <= 0 {
		return b
	}
	b.seed = maphash.MakeSeed()
	b.shards = make([]*actor.PID, cfg.BucketShards)
	b.pool = actors.NewPool(func() *allowMsg { return &allowMsg{reply: make(chan bool, 1)} })
	now := env.Clock.Now().Unix()
	for i := range b.shards {
		sh := &bucketShard{
			clock: env.Clock, props: env.Props, rate: float64(cfg.RateLimitRPM) / 60, burst: float64(cfg.RateLimitBurst),
			buckets: map[string]*bucketSlot{}, now: now, lastSweep: now, onLive: onLive,
		}
		b.shards[i] = env.Root.Spawn(env.Props(func() actor.Actor { return sh }))
	}
	return b
}

func (b *buckets) allow(ctx context.Context, subject string) (bool, error) {
	if len(b.shards) == 0 {
		return true, nil
	}
	m := b.pool.Get()
	m.subject = subject
	shard := maphash.String(b.seed, subject) % uint64(len(b.shards))
	allowed, ok, err := actors.Ask(ctx, b.root, b.shards[shard], m, m.reply, b.wd())
	if !ok {
		return false, fmt.Errorf("rate limit: %w", err)
	}
	m.subject = ""
	b.pool.Put(m)
	return allowed, nil
}

func (b *buckets) tick(now time.Time) {
	for _, pid := range b.shards {
		b.root.Send(pid, bucketTick{now: now.Unix()})
	}
}

// count reports the buckets held.
func (b *buckets) count(ctx context.Context) (int, error) {
	total := 0
	for _, pid := range b.shards {
		reply := make(chan int, 1)
		n, _, err := actors.Ask(ctx, b.root, pid, countBuckets{reply: reply}, reply, nil)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}
