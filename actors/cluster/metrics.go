package cluster

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	changes   *prometheus.CounterVec
	commits   *prometheus.CounterVec
	demotions prometheus.Counter
	latency   *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_cluster_ownership_changes_total",
			Help: "Shards this node acquired, released (handed over) or lost (lease gone).",
		}, []string{"kind"}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_cluster_commits_total",
			Help: "Fenced commits (quota reservations and records) by result: ok, fenced (not the owner), error (outcome unknown).",
		}, []string{"result"}),
		demotions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatehouse_cluster_demotions_total",
			Help: "Times this node lost its lease and dropped every shard.",
		}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gatehouse_cluster_etcd_request_seconds",
			Help:    "etcd request latency by operation.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2},
		}, []string{"op"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.changes, m.commits, m.demotions, m.latency} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("cluster: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) etcd(op string, d time.Duration) {
	m.latency.WithLabelValues(op).Observe(d.Seconds())
}
