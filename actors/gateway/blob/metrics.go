package blob

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Put outcomes, the values of the result label of gatehouse_blob_puts_total.
const (
	putStored   = "stored"    // new bytes, installed
	putExisting = "existing"  // an intact copy was there; nothing written
	putTooLarge = "too_large" // refused: longer than the limit
	putCorrupt  = "corrupt"   // PutRef refused: the bytes hash to another ref
	putError    = "error"     // failed: read, write, sync or rename
)

// metrics are the Store's Prometheus collectors.
type metrics struct {
	puts         *prometheus.CounterVec
	writtenBytes prometheus.Counter
	putDuration  prometheus.Histogram
	collected    prometheus.Counter
	corrupt      prometheus.Counter
	blobs        prometheus.Gauge
	bytes        prometheus.Gauge
}

// newMetrics builds the collectors and registers them on reg; a nil reg
// leaves them unregistered (they still work). On error nothing stays
// registered.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		puts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_blob_puts_total",
			Help: "Calls to Put and PutRef, by result: stored, existing (deduplicated), too_large, corrupt (PutRef's bytes hash to another ref), error.",
		}, []string{"result"}),
		writtenBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatehouse_blob_written_bytes_total",
			Help: "Bytes of new blobs installed by Put (deduplicated puts write none).",
		}),
		putDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gatehouse_blob_put_duration_seconds",
			Help:    "Time taken by successful Puts, from the first byte read to the directory sync.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		collected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatehouse_blob_collected_total",
			Help: "Blobs removed by Collect because no record named them.",
		}),
		corrupt: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatehouse_blob_corrupt_total",
			Help: "Reads and checks that found a blob whose bytes do not match its ref.",
		}),
		blobs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gatehouse_blob_blobs",
			Help: "Blobs stored after the last Collect.",
		}),
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gatehouse_blob_stored_bytes",
			Help: "Bytes of the blobs stored after the last Collect.",
		}),
	}
	for _, r := range []string{putStored, putExisting, putTooLarge, putCorrupt, putError} {
		m.puts.WithLabelValues(r) // export zeros
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.puts, m.writtenBytes, m.putDuration, m.collected, m.corrupt, m.blobs, m.bytes}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}
