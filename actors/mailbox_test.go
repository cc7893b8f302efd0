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
