package wal_test

import (
	"testing"
	"time"

	"gatehouse/wal"
	"gatehouse/wal/waltest"
)

// BenchmarkTruncate200k: deleting 200k records below a snapshot, as
// System.Snapshot does after a busy interval.
func BenchmarkTruncate200k(b *testing.B) {
	for range b.N {
		b.StopTimer()
		l := waltest.Open(b)
		recs := make([]wal.Record, 1000)
		for i := range recs {
			recs[i] = wal.Record{Type: 15, Data: make([]byte, 40)}
		}
		for range 200 {
			if _, err := l.Append(recs...); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		start := time.Now()
		if err := l.TruncateBefore(200_001); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "truncate-s")
		if first, _ := l.FirstIndex(); first != 0 {
			b.Fatalf("FirstIndex after truncating all = %d", first)
		}
	}
}
