package keys

import "github.com/prometheus/client_golang/prometheus"

// metrics are the keys' Prometheus metrics.
type metrics struct {
	liveKeys prometheus.Gauge
	keys     prometheus.Gauge
	// cluster mode
	forwarded    *prometheus.CounterVec // by result
	reservations *prometheus.CounterVec // by result
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
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_cluster_forwarded_admissions_total",
			Help: "Admissions forwarded to the owner of the key's shard, by outcome (cluster mode).",
		}, []string{"result"}),
		reservations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_cluster_reservations_total",
			Help: "Quota reservations committed to etcd by this node's key actors, by outcome (cluster mode).",
		}, []string{"result"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.liveKeys, m.keys, m.forwarded, m.reservations} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
