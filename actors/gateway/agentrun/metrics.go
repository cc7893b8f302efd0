package agentrun

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// callMetrics are the provider calls' Prometheus metrics: attempts by
// provider and result, calls that moved on to a fallback, and at scrape
// time each provider's keys cooling down or refused.
type callMetrics struct {
	attempts  *prometheus.CounterVec
	fallbacks *prometheus.CounterVec
	pools     *pools
	coolDesc  *prometheus.Desc
	rejDesc   *prometheus.Desc
}

func newCallMetrics(ps *pools) *callMetrics {
	return &callMetrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_provider_attempts_total",
			Help: "Provider call attempts by provider and result (ok, rate_limited, key_rejected, retryable_error, error, skipped).",
		}, []string{"provider", "result"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_provider_fallbacks_total",
			Help: "Calls that left the provider for the agent's next fallback.",
		}, []string{"provider"}),
		pools:    ps,
		coolDesc: prometheus.NewDesc("gatehouse_provider_keys_cooling", "Provider keys cooling down after a rate limit.", []string{"provider"}, nil),
		rejDesc:  prometheus.NewDesc("gatehouse_provider_keys_rejected", "Provider keys set aside after the provider refused them (401/403) until the provider is updated.", []string{"provider"}, nil),
	}
}

func (m *callMetrics) attempt(provider, result string) {
	m.attempts.WithLabelValues(provider, result).Inc()
}

func (m *callMetrics) fallback(provider string) { m.fallbacks.WithLabelValues(provider).Inc() }

// Describe implements prometheus.Collector.
func (m *callMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.attempts.Describe(ch)
	m.fallbacks.Describe(ch)
	ch <- m.coolDesc
	ch <- m.rejDesc
}

// Collect implements prometheus.Collector.
func (m *callMetrics) Collect(ch chan<- prometheus.Metric) {
	m.attempts.Collect(ch)
	m.fallbacks.Collect(ch)
	now := time.Now()
	type counts struct {
		at        time.Time
		cool, rej int
	}
	byName := map[string]counts{} // a renamed provider's old pool may linger
	m.pools.each(func(pp *provPool) {
		cool, rej := pp.cooling(now)
		pp.mu.Lock()
		name, at := pp.p.Name, pp.p.UpdatedAt
		pp.mu.Unlock()
		if c, ok := byName[name]; !ok || at.After(c.at) {
			byName[name] = counts{at, cool, rej}
		}
	})
	for name, c := range byName {
		ch <- prometheus.MustNewConstMetric(m.coolDesc, prometheus.GaugeValue, float64(c.cool), name)
		ch <- prometheus.MustNewConstMetric(m.rejDesc, prometheus.GaugeValue, float64(c.rej), name)
	}
}

// RegisterMetrics registers the provider calls' metrics with reg.
func (rt *Runtime) RegisterMetrics(reg prometheus.Registerer) error {
	return reg.Register(rt.metrics)
}
