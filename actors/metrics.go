package actors

import "github.com/prometheus/client_golang/prometheus"

// metrics are the engine's Prometheus metrics (each domain registers its
// own through ExtensionEnv.Registerer or its constructor).
type metrics struct {
	restoreSecs prometheus.Gauge
	snapRecords prometheus.Gauge
	snapErrors  prometheus.Counter
	// cluster mode
	followErrors prometheus.Counter
	applied      prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		restoreSecs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gatehouse_actors_restore_duration_seconds",
			Help: "Time the last start took to load the snapshot and replay the WAL.",
		}),
		snapRecords: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gatehouse_actors_replayed_records",
			Help: "WAL records replayed at the last start.",
		}),
		snapErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatehouse_actors_snapshot_failures_total",
			Help: "Snapshots that failed to be taken.",
		}),
		followErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatehouse_cluster_follow_errors_total",
			Help: "Times following the replicated log failed and was resumed (cluster mode).",
		}),
		applied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatehouse_cluster_applied_records_total",
			Help: "Records other nodes wrote that this node applied (cluster mode).",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.restoreSecs, m.snapRecords, m.snapErrors, m.followErrors, m.applied} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
