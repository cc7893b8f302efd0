package wal_test

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/wal"
	"gatehouse/wal/waltest"
)

const benchRecordSize = 200

func BenchmarkAppend1(b *testing.B)            { benchAppend(b, 1) }
func BenchmarkAppendConcurrent64(b *testing.B) { benchAppend(b, 64) }
func BenchmarkAppendAsync(b *testing.B)        { benchAppendAsync(b) }
func BenchmarkAppendBatch64(b *testing.B)      { benchAppendBatch(b, 64) }

// benchAppendBatch measures Appends of batch records each from one goroutine,
// with fsync on: the ceiling group commit can reach at that batch size.
func benchAppendBatch(b *testing.B, batch int) {
	b.Helper()
	l := waltest.Open(b, waltest.WithSync())
	recs := make([]wal.Record, batch)
	for i := range recs {
		recs[i] = wal.Record{Type: 1, Data: bytes.Repeat([]byte{'x'}, benchRecordSize)}
	}
	b.ReportAllocs()
	b.SetBytes(benchRecordSize)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i += batch {
		if _, err := l.Append(recs[:min(batch, b.N-i)]...); err != nil {
			b.Fatalf("Append() = %v", err)
		}
	}
	reportRate(b, start, l)
}

// benchAppend measures single-record Appends of 200-byte records from
// writers goroutines sharing b.N, with fsync on.
func benchAppend(b *testing.B, writers int) {
	b.Helper()
	l := waltest.Open(b, waltest.WithSync())
	rec := wal.Record{Type: 1, Data: bytes.Repeat([]byte{'x'}, benchRecordSize)}
	b.ReportAllocs()
	b.SetBytes(benchRecordSize)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range writers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, err := l.Append(rec); err != nil {
					b.Errorf("Append() = %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	reportRate(b, start, l)
}

// benchAppendAsync measures AppendAsync of 200-byte records from one
// goroutine, with fsync on, until every callback has run.
func benchAppendAsync(b *testing.B) {
	b.Helper()
	l := waltest.Open(b, waltest.WithSync())
	recs := []wal.Record{{Type: 1, Data: bytes.Repeat([]byte{'x'}, benchRecordSize)}}
	b.ReportAllocs()
	b.SetBytes(benchRecordSize)
	var wg sync.WaitGroup
	wg.Add(b.N)
	done := func(_ uint64, err error) {
		if err != nil {
			b.Errorf("AppendAsync: done(_, %v)", err)
		}
		wg.Done()
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		l.AppendAsync(recs, done)
	}
	wg.Wait()
	reportRate(b, start, l)
}

func reportRate(b *testing.B, start time.Time, l *wal.Log) {
	b.Helper()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(b.N)/float64(max(l.Commits(), 1)), "records/commit")
}
