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
	Authorize(b, sys, secrets)
}
