package keys

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// courier delivers messages on behalf of goroutines that must not run
// actors: the WAL writer's commit callbacks. Shards and key actors run
// inline on the goroutine that sends to them while they are idle (see
// inlineProps); a commit callback that sent to one directly would
// run shard code on the WAL writer, delaying every commit behind it, and
// deadlock if that code appended while the writer's queue was full.
//
// Messages are delivered in the order they were posted, from one
// goroutine. Snapshot relies on it: a commit notice posted before the
// barrier's Append returned reaches its actor before the capture request
// posted after it (see Snapshot).
type courier struct {
	root *actor.RootContext
	mu   sync.Mutex
	q    []delivery
	wake chan struct{} // capacity 1: a post since the last drain
	stop chan struct{}
	done chan struct{}
}

type delivery struct {
	to  *actor.PID
	msg any
}

func newCourier(root *actor.RootContext) *courier {
	c := &courier{root: root, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// post queues msg for pid; it never blocks.
func (c *courier) post(pid *actor.PID, msg any) {
	c.mu.Lock()
	c.q = append(c.q, delivery{to: pid, msg: msg})
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *courier) run() {
	defer close(c.done)
	var batch []delivery
	for {
		select {
		case <-c.wake:
		case <-c.stop:
			return
		}
		c.mu.Lock()
		batch, c.q = c.q, batch[:0]
		c.mu.Unlock()
		for i, d := range batch {
			c.root.Send(d.to, d.msg)
			batch[i] = delivery{}
		}
	}
}

// close stops delivering; what is still queued is dropped (the actors it
// was for are stopping too).
func (c *courier) close() {
	close(c.stop)
	<-c.done
}
