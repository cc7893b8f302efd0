package listener

import (
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// metrics are the Prometheus collectors of every Server sharing a
// Registerer; the "listener" label tells the servers apart.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// connections (limit.go)
	connsOpen     *prometheus.GaugeVec
	connsRefused  *prometheus.CounterVec
	acceptRetries *prometheus.CounterVec
}

// connMetrics are one listener's connection collectors.
type connMetrics struct {
	open    prometheus.Gauge
	refused *prometheus.CounterVec // by reason
	retries prometheus.Counter
}

func (m *metrics) forListener(name string) connMetrics {
	return connMetrics{
		open:    m.connsOpen.WithLabelValues(name),
		refused: m.connsRefused.MustCurryWith(prometheus.Labels{"listener": name}),
		retries: m.acceptRetries.WithLabelValues(name),
	}
}

// newMetrics creates the collectors and registers them on reg. If another
// Server registered them already, its collectors are shared. On any other
// registration error the collectors work but are not exported.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_http_requests_total",
			Help: "HTTP requests answered, by listener, route pattern, method and status.",
		}, []string{"listener", "route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gatehouse_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by listener and route pattern.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"listener", "route"}),
		connsOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gatehouse_http_connections_open",
			Help: "TCP connections open (counted against server.max_conns), by listener.",
		}, []string{"listener"}),
		connsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_http_connections_refused_total",
			Help: "TCP connections refused over a cap, by listener and reason (max_conns: 503, max_conns_per_ip: 429).",
		}, []string{"listener", "reason"}),
		acceptRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_http_accept_retries_total",
			Help: "Accepts retried after a pause because the process was out of file descriptors (EMFILE, ENFILE), by listener.",
		}, []string{"listener"}),
	}
	var err error
	if m.requests, err = register(reg, m.requests); err != nil {
		return m, err
	}
	if m.duration, err = register(reg, m.duration); err != nil {
		return m, err
	}
	if m.connsOpen, err = register(reg, m.connsOpen); err != nil {
		return m, err
	}
	if m.connsRefused, err = register(reg, m.connsRefused); err != nil {
		return m, err
	}
	m.acceptRetries, err = register(reg, m.acceptRetries)
	return m, err
}

// register registers c, or returns the collector already registered
// under the same description.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	if err != nil {
		return c, err
	}
	return c, nil
}

// routeMetrics are the collectors of one route, curried once at startup.
type routeMetrics struct {
	requests *prometheus.CounterVec
	duration prometheus.Observer
	// last is the counter of the last method and status counted: a route
	// answers mostly one kind (a proxied GET, 200), and finding a
	// counter by its labels hashes them and takes the vector's lock, about
	// half a microsecond per request (issue 25).
	last *atomic.Pointer[labelledCounter]
}

// labelledCounter is a counter with its method and status.
type labelledCounter struct {
	method string
	status int
	c      prometheus.Counter
}

func (m *metrics) forRoute(listener, route string) routeMetrics {
	return routeMetrics{
		requests: m.requests.MustCurryWith(prometheus.Labels{"listener": listener, "route": route}),
		duration: m.duration.WithLabelValues(listener, route),
		last:     new(atomic.Pointer[labelledCounter]),
	}
}

// record counts one answered request.
func (r routeMetrics) record(rc *fasthttp.RequestCtx, d time.Duration) {
	method, status := methodLabel(rc.Method()), rc.Response.StatusCode()
	if l := r.last.Load(); l != nil && l.status == status && l.method == method {
		l.c.Inc()
	} else {
		c := r.requests.WithLabelValues(method, statusLabel(status))
		c.Inc()
		r.last.Store(&labelledCounter{method: method, status: status, c: c})
	}
	r.duration.Observe(d.Seconds())
}

// methodLabel maps the method to a constant string: no allocation, and a
// bounded label set whatever clients send.
func methodLabel(m []byte) string {
	switch string(m) {
	case fasthttp.MethodGet:
		return fasthttp.MethodGet
	case fasthttp.MethodPost:
		return fasthttp.MethodPost
	case fasthttp.MethodPut:
		return fasthttp.MethodPut
	case fasthttp.MethodPatch:
		return fasthttp.MethodPatch
	case fasthttp.MethodDelete:
		return fasthttp.MethodDelete
	case fasthttp.MethodHead:
		return fasthttp.MethodHead
	case fasthttp.MethodOptions:
		return fasthttp.MethodOptions
	}
	return "OTHER"
}

// statusLabels holds "100".."599" so that labelling allocates nothing.
var statusLabels = func() (l [600]string) {
	for i := 100; i < len(l); i++ {
		l[i] = strconv.Itoa(i)
	}
	return l
}()

func statusLabel(code int) string {
	if code < 100 || code >= len(statusLabels) {
		return "other"
	}
	return statusLabels[code]
}
