package actors

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	liveKeys    prometheus.Gauge
	keys        prometheus.Gauge
	restoreSecs prometheus.Gauge
	snapRecords prometheus.Gauge
	snapErrors  prometheus.Counter
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
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.liveKeys, m.keys, m.restoreSecs, m.snapRecords, m.snapErrors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
