package keys

import (
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// TestInlineMailboxOrderAndConcurrency: messages posted from many
// goroutines to an inline actor are each processed exactly once, one at
// a time, in each poster's order.
func TestInlineMailboxOrderAndConcurrency(t *testing.T) {
	const posters, each = 8, 2000
	a, _, pid, sys := spawnOrderActor(t, posters, each)
	post(posters, each, func(p, i int) { sys.Root.Send(pid, [2]int{p, i}) })
	a.wg.Wait()
	a.check(t, each)
}

func TestFIFO(t *testing.T) {
	var q fifo
	next, want := 0, 0
	for round := range 50 {
		for range round % 7 * 10 {
			q.push(next)
			next++
		}
		for range round % 5 * 9 {
			v, ok := q.pop()
			if !ok {
				break
			}
			if v.(int) != want {
				t.Fatalf("pop = %v, want %d", v, want)
			}
			want++
		}
		if len(q.buf)-q.head != next-want {
			t.Fatalf("round %d: %d queued, want %d", round, len(q.buf)-q.head, next-want)
		}
	}
	for {
		v, ok := q.pop()
		if !ok {
			break
		}
		if v.(int) != want {
			t.Fatalf("pop = %v, want %d", v, want)
		}
		want++
	}
	if want != next || q.head != 0 || len(q.buf) != 0 {
		t.Errorf("drained: want %d of %d, head %d, len %d", want, next, q.head, len(q.buf))
	}
}

// orderActor checks that its messages ([2]int: poster, sequence) come one
// at a time and in each poster's order, whether through the mailbox
// (Receive) or delivered directly (receiveDirect).
type orderActor struct {
	mu      sync.Mutex
	running bool
	last    []int
	bad     int
	direct  int
	wg      *sync.WaitGroup
}

func (a *orderActor) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().([2]int); ok {
		a.take(m)
	}
}

func (a *orderActor) receiveDirect(msg any) bool {
	m, ok := msg.([2]int)
	if !ok {
		return false
	}
	if m[1] < 0 {
		panic("bad message")
	}
	a.direct++ // under the turn: no lock needed, as for the actor's own state
	a.take(m)
	return true
}

// spawnOrderActor starts an inline orderActor expecting posters×each
// messages, with its mailbox kept for direct delivery.
func spawnOrderActor(t *testing.T, posters, each int) (*orderActor, *inlineMailbox, *actor.PID, *actor.ActorSystem) {
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	a := &orderActor{last: make([]int, posters), wg: &sync.WaitGroup{}}
	a.wg.Add(posters * each)
	var mb *inlineMailbox
	props := actor.PropsFromProducer(func() actor.Actor { return a },
		actor.WithDispatcher(actor.NewSynchronizedDispatcher(inlineThroughput)),
		actor.WithMailbox(func() actor.Mailbox {
			m := newInlineMailbox()
			mb = m.(*inlineMailbox)
			return m
		}))
	return a, mb, sys.Root.Spawn(props), sys
}

// post runs posters goroutines, released together, each calling send for
// its messages 1..each in turn, and returns when all have.
func post(posters, each int, send func(p, i int)) {
	var start, done sync.WaitGroup
	start.Add(1)
	for p := range posters {
		done.Go(func() {
			start.Wait()
			for i := 1; i <= each; i++ {
				send(p, i)
			}
		})
	}
	start.Done()
	done.Wait()
}

// check reports messages taken out of order or concurrently, and posters
// whose messages did not all arrive. Call it once they were all taken.
func (a *orderActor) check(t *testing.T, each int) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.bad != 0 {
		t.Errorf("%d messages out of order or processed concurrently", a.bad)
	}
	for p, n := range a.last {
		if n != each {
			t.Errorf("poster %d: last message processed %d, want %d", p, n, each)
		}
	}
}

func (a *orderActor) take(m [2]int) {
	a.mu.Lock()
	if a.running {
		a.bad++
	}
	a.running = true
	if m[1] != a.last[m[0]]+1 {
		a.bad++
	}
	a.last[m[0]] = m[1]
	a.running = false
	a.mu.Unlock()
	a.wg.Done()
}

// TestInlineMailboxDeliver: posters that deliver directly when they can and
// send otherwise never run the actor concurrently and never overtake their
// own earlier messages; a panic in a direct delivery goes to the
// supervisor, which restarts the actor, and later messages are handled.
func TestInlineMailboxDeliver(t *testing.T) {
	const posters, each = 8, 3000
	a, mb, pid, sys := spawnOrderActor(t, posters, each)
	post(posters, each, func(p, i int) {
		if !mb.deliver([2]int{p, i}, a) {
			sys.Root.Send(pid, [2]int{p, i})
		}
	})
	a.wg.Wait()
	a.check(t, each)
	if a.direct == 0 || a.direct == posters*each {
		t.Errorf("%d of %d messages delivered directly: want some of each kind", a.direct, posters*each)
	}

	// A panic: escalated (the default supervisor restarts the actor), and
	// the actor goes on.
	if !mb.deliver([2]int{0, -1}, a) {
		t.Fatal("deliver to an idle actor declined")
	}
	a.wg.Add(1)
	sys.Root.Send(pid, [2]int{0, each + 1})
	a.wg.Wait()
	if mb.status.Load() != mailboxIdle || a.last[0] != each+1 {
		t.Errorf("after a panic: status %d, last %d; want idle, %d", mb.status.Load(), a.last[0], each+1)
	}
	if mb.deliver("not mine", a) {
		t.Error("deliver of a message the receiver declines = true")
	}
}
