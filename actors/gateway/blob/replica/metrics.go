package replica

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	pushes       *prometheus.CounterVec
	fetches      *prometheus.CounterVec
	peerFailures *prometheus.CounterVec
	bytes        *prometheus.CounterVec
}

// newMetrics builds the collectors and registers them on reg (nil: not
// registered). On error nothing stays registered.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_blob_replica_pushes_total",
			Help: "Blob Puts in cluster mode, by result: ok (another member took a copy), failed (none did: the upload was refused).",
		}, []string{"result"}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_blob_replica_fetches_total",
			Help: "Fetches of a blob missing on this node (Opens, and copies pulled for another node's Put), by result: ok, not_found (no member has it), failed, refused (a copy asked to be pulled from an address that is not a member's: nothing fetched).",
		}, []string{"result"}),
		peerFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_blob_replica_peer_failures_total",
			Help: "Members that failed a push or a fetch, by op (push, fetch) and reason (corrupt: the bytes did not hash to the ref; error).",
		}, []string{"op", "reason"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_blob_replica_bytes_total",
			Help: "Blob bytes copied between nodes, by direction: in (received), out (served).",
		}, []string{"direction"}),
	}
	for _, r := range []string{"ok", "failed"} {
		m.pushes.WithLabelValues(r)
	}
	for _, r := range []string{"ok", "not_found", "failed", "refused"} {
		m.fetches.WithLabelValues(r)
	}
	for _, op := range []string{"push", "fetch"} {
		for _, r := range []string{"corrupt", "error"} {
			m.peerFailures.WithLabelValues(op, r)
		}
	}
	for _, d := range []string{"in", "out"} {
		m.bytes.WithLabelValues(d)
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.pushes, m.fetches, m.peerFailures, m.bytes}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("replica metrics: %w", err)
		}
	}
	return m, nil
}
