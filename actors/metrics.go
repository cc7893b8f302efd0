package actors

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	liveKeys    prometheus.Gauge
	keys        prometheus.Gauge
	restoreSecs prometheus.Gauge
	snapRecords prometheus.Gauge
	snapErrors  prometheus.Counter
	// Cluster mode.
	followErrors prometheus.Counter
	forwarded    *prometheus.CounterVec // by result
	reservations *prometheus.CounterVec // by result
	applied      prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		liveKeys: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gatehouse_actors_live_key_actors",
			Help: "Key actors currently live (not passivated).",
		}),
		keys: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gatehouse_actors_keys_restored",
			Help: "Keys held after the last restore.",
		}),
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
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_cluster_forwarded_admissions_total",
			Help: "Admissions forwarded to the owner of the key's shard, by outcome (cluster mode).",
		}, []string{"result"}),
		reservations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_cluster_reservations_total",
			Help: "Quota reservations committed to etcd by this node's key actors, by outcome (cluster mode).",
		}, []string{"result"}),
		applied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatehouse_cluster_applied_records_total",
			Help: "Records other nodes wrote that this node applied (cluster mode).",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.liveKeys, m.keys, m.restoreSecs, m.snapRecords, m.snapErrors,
		m.followErrors, m.forwarded, m.reservations, m.applied} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
