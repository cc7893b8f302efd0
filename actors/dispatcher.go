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
