package actors

import (
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// TestInlineMailboxOrderAndConcurrency: messages posted from many
// goroutines to an inline actor are each processed exactly once, one at
// a time, in each poster's order.
func TestInlineMailboxOrderAndConcurrency(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	const posters, each = 8, 2000
	var (
		mu      sync.Mutex
		running bool
		last    [posters]int
		bad     int
		wg      sync.WaitGroup
	)
	wg.Add(posters * each)
	props := actor.PropsFromFunc(func(ctx actor.Context) {
		m, ok := ctx.Message().([2]int)
		if !ok {
			return
		}
		mu.Lock()
		if running {
			bad++
		}
		running = true
		if m[1] != last[m[0]]+1 {
			bad++
		}
		last[m[0]] = m[1]
		running = false
		mu.Unlock()
		wg.Done()
	}, actor.WithDispatcher(actor.NewSynchronizedDispatcher(inlineThroughput)), actor.WithMailbox(newInlineMailbox))
	pid := sys.Root.Spawn(props)
	var start sync.WaitGroup
	start.Add(1)
	for p := range posters {
		go func() {
			start.Wait()
			for i := 1; i <= each; i++ {
				sys.Root.Send(pid, [2]int{p, i})
			}
		}()
	}
	start.Done()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if bad != 0 {
		t.Errorf("%d messages out of order or processed concurrently", bad)
	}
	for p, n := range last {
		if n != each {
			t.Errorf("poster %d: last message processed %d, want %d", p, n, each)
		}
	}
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
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	const posters, each = 8, 3000
	var wg sync.WaitGroup
	wg.Add(posters * each)
	a := &orderActor{last: make([]int, posters), wg: &wg}
	var mb *inlineMailbox
	props := actor.PropsFromProducer(func() actor.Actor { return a },
		actor.WithDispatcher(actor.NewSynchronizedDispatcher(inlineThroughput)),
		actor.WithMailbox(func() actor.Mailbox {
			m := newInlineMailbox()
			mb = m.(*inlineMailbox)
			return m
		}))
	pid := sys.Root.Spawn(props)
	var start sync.WaitGroup
	start.Add(1)
	for p := range posters {
		go func() {
			start.Wait()
			for i := 1; i <= each; i++ {
				if !mb.deliver([2]int{p, i}, a) {
					sys.Root.Send(pid, [2]int{p, i})
				}
			}
		}()
	}
	start.Done()
	wg.Wait()
	if a.bad != 0 {
		t.Errorf("%d messages out of order or processed concurrently", a.bad)
	}
	if a.direct == 0 || a.direct == posters*each {
		t.Errorf("%d of %d messages delivered directly: want some of each kind", a.direct, posters*each)
	}

	// A panic: escalated (the default supervisor restarts the actor), and
	// the actor goes on.
	if !mb.deliver([2]int{0, -1}, a) {
		t.Fatal("deliver to an idle actor declined")
	}
	wg.Add(1)
	sys.Root.Send(pid, [2]int{0, each + 1})
	wg.Wait()
	if mb.status.Load() != mailboxIdle || a.last[0] != each+1 {
		t.Errorf("after a panic: status %d, last %d; want idle, %d", mb.status.Load(), a.last[0], each+1)
	}
	if mb.deliver("not mine", a) {
		t.Error("deliver of a message the receiver declines = true")
	}
}
