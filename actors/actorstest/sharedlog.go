package actorstest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"gatehouse/actors"
	"gatehouse/wal"
)

// SharedLog stands for cluster mode's replicated log in one process, for
// tests of an extension's cluster sharing without etcd (actors/cluster/
// etcdtest runs the real one): one order of every node's appends, seq =
// position, which each node's Follower reads. A node appends to it
// through NodeLog, which an extension's test hook wraps around the log its
// actors append to:
//
//	log := actorstest.NewSharedLog()
//	... ext.wrapLog = func(l actors.EventLog) actors.EventLog { return log.Node("A", l) }
//	f := log.Follow(t, "A", ext) // applies B's records to A's ext live
//	...
//	log.Settle(t, f, g)          // every follower at the end of the log
type SharedLog struct {
	mu   sync.Mutex
	recs []SharedRecord
	more chan struct{} // closed at the next append
}

// SharedRecord is one record of a SharedLog and the node that wrote it.
type SharedRecord struct {
	Writer string
	Rec    wal.Record
}

// NewSharedLog returns an empty log.
func NewSharedLog() *SharedLog { return &SharedLog{more: make(chan struct{})} }

// Append adds recs (copied) as writer's batch and returns the last one's
// seq.
func (l *SharedLog) Append(writer string, recs []wal.Record) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range recs {
		l.recs = append(l.recs, SharedRecord{writer, wal.Record{Type: r.Type, Data: slices.Clone(r.Data)}})
	}
	close(l.more)
	l.more = make(chan struct{})
	return uint64(len(l.recs))
}

// From returns the records after position pos, and a channel closed at
// the next append.
func (l *SharedLog) From(pos int) ([]SharedRecord, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recs[pos:], l.more
}

// Len is the number of records in the log.
func (l *SharedLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recs)
}

// Node returns writer's EventLog: inner (its own WAL, durable locally),
// then the shared log, whose seq the actors get.
func (l *SharedLog) Node(writer string, inner actors.EventLog) *NodeLog {
	return &NodeLog{inner: inner, shared: l, writer: writer}
}

// NodeLog is one node's EventLog in a SharedLog cluster.
type NodeLog struct {
	inner  actors.EventLog
	shared *SharedLog
	writer string
	// SyncOnly makes AppendAsync panic, for a domain whose actors must
	// append synchronously.
	SyncOnly bool
}

// Append appends to the node's WAL, then to the shared log.
func (n *NodeLog) Append(recs ...wal.Record) (uint64, error) {
	if _, err := n.inner.Append(recs...); err != nil {
		return 0, err
	}
	return n.shared.Append(n.writer, recs), nil
}

// AppendAsync appends to the node's WAL and, once durable there, to the
// shared log, whose seq done gets.
func (n *NodeLog) AppendAsync(recs []wal.Record, done func(uint64, error)) {
	if n.SyncOnly {
		panic("actorstest: AppendAsync on a SyncOnly NodeLog")
	}
	n.inner.AppendAsync(recs, func(_ uint64, err error) {
		if err != nil {
			done(0, err)
			return
		}
		done(n.shared.Append(n.writer, recs), nil)
	})
}

// Follower applies a SharedLog's records to one node's extension live,
// as cluster mode's follower does: the other nodes' records, and the
// node's own of the types its extension applies in log order
// (actors.OwnApplier).
type Follower struct {
	name string
	ext  actors.LiveApplier
	mu   sync.Mutex
	pos  int // log position applied up to
}

// NewFollower returns a follower of name's ext at the start of the log;
// it applies nothing until Run or CatchUp.
func NewFollower(name string, ext actors.LiveApplier) *Follower {
	return &Follower{name: name, ext: ext}
}

// Follow starts a follower of name's ext that runs until the test ends.
func (l *SharedLog) Follow(tb testing.TB, name string, ext actors.LiveApplier) *Follower {
	f := NewFollower(name, ext)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f.Run(ctx, tb, l) })
	tb.Cleanup(func() { cancel(); wg.Wait() })
	return f
}

// applies reports whether the follower applies r.
func (f *Follower) applies(r SharedRecord) bool {
	if r.Writer != f.name {
		return true
	}
	own, ok := f.ext.(actors.OwnApplier)
	return ok && own.AppliesOwn(r.Rec.Type)
}

// Run applies l's records in order until ctx ends; an error of ApplyLive
// (while ctx lasts) fails tb and ends it.
func (f *Follower) Run(ctx context.Context, tb testing.TB, l *SharedLog) {
	for {
		f.mu.Lock()
		pos := f.pos
		f.mu.Unlock()
		recs, more := l.From(pos)
		for _, r := range recs {
			pos++
			if f.applies(r) {
				if err := f.ext.ApplyLive(ctx, uint64(pos), r.Rec); err != nil {
					if ctx.Err() == nil {
						tb.Errorf("%s: ApplyLive(%d): %v", f.name, pos, err)
					}
					return
				}
			}
			f.mu.Lock()
			f.pos = pos
			f.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-more:
		}
	}
}

// CatchUp applies, in the calling goroutine, the records of l the
// follower has not applied yet; it fails tb on an error. It is for a
// follower that does not Run.
func (f *Follower) CatchUp(ctx context.Context, tb testing.TB, l *SharedLog) {
	tb.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	recs, _ := l.From(f.pos)
	for _, r := range recs {
		f.pos++
		if f.applies(r) {
			if err := f.ext.ApplyLive(ctx, uint64(f.pos), r.Rec); err != nil {
				tb.Fatalf("%s: ApplyLive(%d): %v", f.name, f.pos, err)
			}
		}
	}
}

// Applied is the log position the follower applied up to.
func (f *Follower) Applied() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pos
}

// Settle waits (up to 10 s) until every follower has reached the end of
// the log.
func (l *SharedLog) Settle(tb testing.TB, fs ...*Follower) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, f := range fs {
		for f.Applied() != l.Len() {
			if time.Now().After(deadline) {
				tb.Fatalf("%s's follower did not reach the end of the log", f.name)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// Replay feeds every record of l, seq 1..n, to apply (an extension's
// Apply or an OfflineImage's), as a node restoring from the log alone
// would; it fails tb on an error.
func (l *SharedLog) Replay(tb testing.TB, apply func(seq uint64, r wal.Record) error) {
	tb.Helper()
	all, _ := l.From(0)
	for i, r := range all {
		if err := apply(uint64(i+1), r.Rec); err != nil {
			tb.Fatalf("replay of the shared log at %d: %v", i+1, err)
		}
	}
}
