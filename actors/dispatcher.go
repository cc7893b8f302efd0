package actors

import (
	"github.com/asynkron/protoactor-go/actor"
)

// poolDispatcher runs mailboxes on a pool of long-lived goroutines, falling
// back to a new goroutine when none is idle. protoactor's default starts a
// goroutine per mailbox run; its stack then grows on every run of a shard or
// key actor (profiled: 28% of CPU in runtime.copystack at 64 callers).
// Reused workers keep their grown stacks.
// dispatchWorkers is the pool size: enough for every shard to run at once
// with room for key actors; blocked actors (fsync) only push work to
// fresh goroutines.
const dispatchWorkers = 128

type poolDispatcher struct {
	work       chan func()
	stop       chan struct{}
	throughput int
}

var _ actor.Dispatcher = (*poolDispatcher)(nil)

func newPoolDispatcher(workers, throughput int) *poolDispatcher {
	d := &poolDispatcher{work: make(chan func()), stop: make(chan struct{}), throughput: throughput}
	for range workers {
		go d.worker()
	}
	return d
}

func (d *poolDispatcher) worker() {
	for {
		select {
		case fn := <-d.work:
			fn()
		case <-d.stop:
			return
		}
	}
}

// Schedule hands fn to an idle worker, or to a new goroutine.
func (d *poolDispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
	default:
		go fn()
	}
}

// Throughput is how many messages a mailbox processes per run.
func (d *poolDispatcher) Throughput() int { return d.throughput }

// close stops the workers; later schedules use new goroutines.
func (d *poolDispatcher) close() { close(d.stop) }

// inlineDispatcher runs a mailbox on the goroutine that made it runnable:
// the sender of a message to an idle actor processes the actor's queue
// itself, then goes on; a message to a running actor is only queued for
// the goroutine already running it. Shards and key actors use it, so an
// authorization costs no goroutine hand-off when uncontended: the HTTP
// handler runs the shard, the shard runs the key actor, and the answer is
// in the reply channel when Send returns. Each actor still processes one
// message at a time from its own mailbox.
//
// The rule that makes it safe: actors dispatched inline never block (the
// WAL is only appended to asynchronously from them), and goroutines that
// must not run actor code (the WAL writer) post through the courier.
type inlineDispatcher int

var _ actor.Dispatcher = inlineDispatcher(0)

// Schedule runs fn now, on the caller's goroutine.
func (inlineDispatcher) Schedule(fn func()) { fn() }

// Throughput is how many messages a run processes before yielding the
// processor (runtime.Gosched) and going on.
func (d inlineDispatcher) Throughput() int { return int(d) }
