package wal

import "github.com/prometheus/client_golang/prometheus"

// metrics are the package's Prometheus collectors. They are registered on the
// Registerer given to Open and unregistered by Close.
type metrics struct {
	commitDuration prometheus.Histogram
	batchRecords   prometheus.Histogram
	appended       prometheus.Counter
	corrupt        prometheus.Gauge
	failed         prometheus.Gauge
}

func newMetrics() *metrics {
	return &metrics{
		commitDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gatehouse_wal_commit_duration_seconds",
			Help:    "Time to write and fsync one group-commit batch.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		batchRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gatehouse_wal_batch_records",
			Help:    "Records per committed batch.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 13),
		}),
		appended: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatehouse_wal_appended_records_total",
			Help: "Records committed to the log.",
		}),
		corrupt: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gatehouse_wal_corrupt_records",
			Help: "Bad entries (records, missing sequences, stray keys) found when the log was opened and not yet truncated away: replay past them fails until gatehouse repair.",
		}),
		failed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gatehouse_wal_failed",
			Help: "1 once a commit failed to reach the disk: the log refuses writes until restart.",
		}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.commitDuration, m.batchRecords, m.appended, m.corrupt, m.failed}
}

// register registers every collector on reg, or none of them. nil reg is a
// no-op.
func (m *metrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for i, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			for _, done := range m.collectors()[:i] {
				reg.Unregister(done)
			}
			return err
		}
	}
	return nil
}

func (m *metrics) unregister(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	for _, c := range m.collectors() {
		reg.Unregister(c)
	}
}
