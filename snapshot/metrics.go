package snapshot

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Store's Prometheus collectors.
type metrics struct {
	saveDuration prometheus.Histogram
	loadDuration prometheus.Histogram
	size         prometheus.Gauge
	broken       prometheus.Counter
}

// newMetrics builds the collectors and registers them on reg; a nil reg
// leaves them unregistered (they still work). On error nothing stays
// registered.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		saveDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gatehouse_snapshot_save_duration_seconds",
			Help:    "Time taken by successful snapshot saves, from temp file to directory sync.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		loadDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gatehouse_snapshot_load_duration_seconds",
			Help:    "Time taken by successful snapshot loads, including the caller's decode.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		size: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gatehouse_snapshot_size_bytes",
			Help: "Size of the snapshot file last saved or loaded, header and trailer included.",
		}),
		broken: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatehouse_snapshot_broken_total",
			Help: "Snapshot files that failed validation and were renamed to *.broken.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.saveDuration, m.loadDuration, m.size, m.broken}
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
