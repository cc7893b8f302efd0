package actors

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// synthKey builds an idle key like a real one: sealed secret, a week of
// per-day usage, an empty window (idle for over an hour).
func synthKey(i int, now int64) *keyState {
	id := uuid.New()
	var h hash
	copy(h[:], id[:])
	h[16], h[17], h[18] = byte(i), byte(i>>8), byte(i>>16)
	st := &keyState{rec: keyRecord{
		id: id, owner: id, name: fmt.Sprintf("service key %d", i), preview: previewChars{'A', 'b', 'C', 'd', 'w', 'X', 'y', 'Z'},
		hash: h, rateLimit: 1000, createdAt: now - 30*86400,
	}, applied: uint64(i + 1)}
	for d := range 7 {
		st.use.add(now-int64(d)*86400-7200, int64(10+d))
	}
	return st
}

// writeSynthSnapshot writes a snapshot of n synthetic keys through the
// store, in the exact format System.Snapshot writes.
func writeSynthSnapshot(tb testing.TB, e *env, n int) {
	tb.Helper()
	now := t0.Unix()
	const perBlock = 16384
	_, err := e.snaps.Save(uint64(n), func(w io.Writer) error {
		iw := &imageWriter{w: w}
		iw.write(imageMagic)
		iw.blob([]byte("[]"))
		iw.blob([]byte("[]"))
		iw.uvarint(uint64(n))
		var blk enc
		count := 0
		for i := range n {
			encodeKeyState(&blk, synthKey(i, now))
			if count++; count == perBlock || i == n-1 {
				iw.block(count, blk.b)
				blk.b, count = blk.b[:0], 0
			}
		}
		iw.uvarint(0)
		iw.uvarint(0) // no extension sections
		return iw.err
	})
	if err != nil {
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

func benchRestore(b *testing.B, n int) {
	b.ReportAllocs()
	e := newEnv(b)
	e.cfg.Shards = 64
	e.start()
	e.crash()
	writeSynthSnapshot(b, e, n)
	b.ResetTimer()
	var restore, snap time.Duration
	var perKey float64
	for range b.N {
		before := heapInUse()
		start := time.Now()
		s := e.start()
		restore += time.Since(start)
		perKey = float64(heapInUse()-before) / float64(n)
		start = time.Now()
		if _, err := s.Snapshot(); err != nil {
			b.Fatal(err)
		}
		snap += time.Since(start)
		e.crash()
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
func authorizeFixture(b *testing.B) (*System, [][]byte) {
	e := newEnv(b)
	e.cfg.Shards = 64
	e.cfg.FlushInterval = time.Second // usage flushes run, as in production
	s := e.start()
	u := mustUser(b, s, "bench@example.com", PlanPremium, true)
	secrets := make([][]byte, 10_000)
	for i := range secrets {
		k, sec := mustKey(b, s, u, "bench")
		n := int64(1e9)
		if _, err := s.UpdateKey(ctx(b), k.ID, KeyPatch{RateLimit: &n}); err != nil {
			b.Fatal(err)
		}
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
