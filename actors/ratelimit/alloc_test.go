package ratelimit

import (
	"testing"
	"time"
	"unsafe"
)

func TestSizes(t *testing.T) {
	if got := unsafe.Sizeof(Window{}); got > 48 {
		t.Errorf("unsafe.Sizeof(Window{}) = %d, want ≤ 48", got)
	}
	if got := unsafe.Sizeof(Bucket{}); got != 16 {
		t.Errorf("unsafe.Sizeof(Bucket{}) = %d, want 16", got)
	}
}

func TestWindowAllowDoesNotAllocate(t *testing.T) {
	tests := []struct {
		name      string
		perSecond int
		limit     int64
	}{
		{"hot, rejecting", 100, 1000},
		{"hot, admitting", 100, MaxLimit},
		{"spread", 1, 10_000},
		{"spread, rejecting", 1, 1800},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDriver(tt.perSecond, tt.limit)
			for range (WindowSeconds + 60) * tt.perSecond { // reach steady state
				d.allow()
			}
			if avg := testing.AllocsPerRun(5000, func() { d.allow() }); avg != 0 {
				t.Errorf("Allow allocates %v times per call in steady state, want 0", avg)
			}
		})
	}
}

func TestBucketAllowDoesNotAllocate(t *testing.T) {
	var b Bucket
	now := time.Unix(1_764_000_000, 0)
	if avg := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Millisecond)
		b.Allow(now, 100, 10)
	}); avg != 0 {
		t.Errorf("Bucket.Allow allocates %v times per call, want 0", avg)
	}
}

// driver sends perSecond requests a second to one Window.
type driver struct {
	w         Window
	t         int64
	i         int
	perSecond int
	limit     int64
	admitted  int
}

func newDriver(perSecond int, limit int64) *driver {
	return &driver{t: 1_764_000_000, perSecond: perSecond, limit: limit}
}

func (d *driver) allow() {
	if d.i++; d.i == d.perSecond {
		d.i = 0
		d.t++
	}
	if d.w.Allow(d.t, d.limit).Allowed {
		d.admitted++
	}
}

func BenchmarkWindowAllowHot(b *testing.B)      { benchWindow(b, 1000, 10_000) }
func BenchmarkWindowAllowHotAdmit(b *testing.B) { benchWindow(b, 1000, MaxLimit) }
func BenchmarkWindowAllowSpread(b *testing.B)   { benchWindow(b, 1, 10_000) }
func BenchmarkWindowRejectWorst(b *testing.B)   { benchReject(b, WindowSeconds/2) }
func BenchmarkBucketAllow(b *testing.B)         { benchBucket(b, 100, 10) }

// benchWindow measures Allow on one key receiving perSecond requests a
// second under limit, after an hour of warm-up.
func benchWindow(b *testing.B, perSecond int, limit int64) {
	d := newDriver(perSecond, limit)
	for range WindowSeconds * perSecond {
		d.allow()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		d.allow()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// benchReject measures the slowest reject path: a full window of
// WindowSeconds single-request entries under a limit lowered to limit, so
// that RetryAfter has to add up about half the entries from either end.
func benchReject(b *testing.B, limit int64) {
	var w Window
	const t0 = 1_764_000_000
	for i := range int64(WindowSeconds) {
		w.Allow(t0+i, WindowSeconds)
	}
	now := int64(t0 + WindowSeconds - 1)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if w.Allow(now, limit).Allowed {
			b.Fatal("Allow admitted a request over the limit")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

func benchBucket(b *testing.B, rate, burst float64) {
	var bk Bucket
	now := time.Unix(1_764_000_000, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		now = now.Add(time.Millisecond)
		bk.Allow(now, rate, burst)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}
