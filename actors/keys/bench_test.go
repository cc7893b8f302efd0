package keys_test

import (
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/keys"
	"gatehouse/snapshot"
)

// writeSynthSnapshot writes into node's data dir a snapshot of keys
// synthetic idle keys, in the exact format System.Snapshot writes.
func writeSynthSnapshot(tb testing.TB, node *actorstest.Node, nkeys int) {
	tb.Helper()
	st, err := snapshot.New(snapshot.Config{Dir: filepath.Join(node.Dir, "snap"), Retain: 2}, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := keys.WriteSynthSnapshot(st, nkeys, t0.Unix()); err != nil {
		tb.Fatal(err)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkRestore1M: restore time of 1M keys from a snapshot, resident
// bytes per idle key, and the time to take a snapshot of them again.
func BenchmarkRestore1M(b *testing.B) { benchRestore(b, 1_000_000) }

// BenchmarkRestore100k is the same at a tenth of the size.
func BenchmarkRestore100k(b *testing.B) { benchRestore(b, 100_000) }

func benchRestore(b *testing.B, nkeys int) {
	b.ReportAllocs()
	n := actorstest.New(b)
	n.KeysConfig.Shards = 64
	n.Start()
	n.Crash()
	writeSynthSnapshot(b, n, nkeys)
	b.ResetTimer()
	var restore, snap time.Duration
	var perKey float64
	for range b.N {
		before := heapInUse()
		start := time.Now()
		s := n.Start()
		restore += time.Since(start)
		perKey = float64(heapInUse()-before) / float64(nkeys)
		start = time.Now()
		if _, err := s.Snapshot(); err != nil {
			b.Fatal(err)
		}
		snap += time.Since(start)
		n.Crash()
	}
	b.ReportMetric(restore.Seconds()/float64(b.N), "restore-s")
	b.ReportMetric(snap.Seconds()/float64(b.N), "snapshot-s")
	b.ReportMetric(perKey, "bytes/idle-key")
}

// BenchmarkAuthorize measures Authorize round trips (handler → shard → key
// actor → handler) over 10k keys, with 1 and 64 concurrent callers.
func BenchmarkAuthorize1(b *testing.B)  { benchAuthorize(b, 1) }
func BenchmarkAuthorize8(b *testing.B)  { benchAuthorize(b, 8) }
func BenchmarkAuthorize64(b *testing.B) { benchAuthorize(b, 64) }

// authorizeFixture starts a System with 10k keys whose limit never binds.
func authorizeFixture(b *testing.B) (actorstest.System, [][]byte) {
	n := actorstest.New(b)
	n.KeysConfig.Shards = 64
	n.Config.FlushInterval = time.Second // usage flushes run, as in production
	n.AccountsConfig.MaxKeys = map[accounts.Plan]int{accounts.PlanStandard: 100, accounts.PlanPremium: 10_000}
	s := n.Start()
	u := mustUser(b, s, "bench@example.com", accounts.PlanPremium, true)
	secrets := make([][]byte, 10_000)
	for i := range secrets {
		k, sec := mustKey(b, s, u, "bench")
		setLimit(b, s, k, 1e9)
		secrets[i] = []byte(sec)
	}
	return s, secrets
}

func benchAuthorize(b *testing.B, callers int) {
	s, secrets := authorizeFixture(b)
	b.ReportAllocs()
	c := context.Background()
	var mu sync.Mutex
	var lat []time.Duration
	b.ResetTimer()
	start := time.Now()
	run := func(n int, seed int) {
		local := make([]time.Duration, 0, min(n, 1<<16))
		for i := range n {
			t := time.Now()
			if r := s.Authorize(c, secrets[(seed+i)%len(secrets)]); r.Err != nil {
				b.Error(r.Err)
				return
			}
			if len(local) < cap(local) {
				local = append(local, time.Since(t))
			}
		}
		mu.Lock()
		lat = append(lat, local...)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for w := range callers {
		wg.Add(1)
		go func() { defer wg.Done(); run(b.N/callers+1, w*7919) }()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(float64((b.N/callers+1)*callers)/elapsed.Seconds(), "authorize/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(pct(0.999), "p999-µs")
}
