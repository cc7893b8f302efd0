package bench

import "testing"

// BenchmarkAuthorizeHotKey: the real actor system's Authorize (check,
// limit, usage) on one key from GOMAXPROCS goroutines, as the proxy calls
// it. The allocations are protoactor's mailbox queue nodes, one per hop.
func BenchmarkAuthorizeHotKey(b *testing.B) { benchAuthorize(b, 1) }

// BenchmarkAuthorize10kKeys is the same over 10,000 keys taken in turn.
func BenchmarkAuthorize10kKeys(b *testing.B) { benchAuthorize(b, 10_000) }

func benchAuthorize(b *testing.B, keys int) {
	b.Helper()
	sys, secrets := NewSystem(b, keys)
	Authorize(b, sys.Keys, secrets)
}

// BenchmarkAuthorize5kKeysFlushed is BenchmarkAuthorize10kKeys on 5,000
// keys with a flush round every 15,000 authorizations, three requests per
// key per round, as the proxy suite's 5,000-key case at ~15k req/s with
// the default one-second flush: each op carries its share of the rounds
// (every key dirty in each).
func BenchmarkAuthorize5kKeysFlushed(b *testing.B) {
	sys, secrets := NewSystem(b, 5000)
	AuthorizeTicked(b, sys.Keys, secrets, 15000, sys.Tick)
}
