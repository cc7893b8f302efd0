package gateway

import "runtime"

// heavyBody is the body size from which decoding a request is heavy
// work: a megabyte chat message takes milliseconds of CPU to decode.
const heavyBody = 256 << 10

// heavySlots bounds how many heavy bodies the process decodes at once:
// half its Ps (at least one), so that a burst of large requests leaves
// the other half to everything else the process serves, the key
// service's listener included (issue 35: its /health stalled behind the
// gateway's parsing). A request waiting for a slot is not runnable, so
// it does not lengthen the scheduler's run queue.
var heavySlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

// heavyWork takes a slot for decoding a body of n bytes when it is heavy
// and returns what gives it back (a no-op otherwise).
func heavyWork(n int) (release func()) {
	if n < heavyBody {
		return func() {}
	}
	heavySlots <- struct{}{}
	return func() { <-heavySlots }
}
