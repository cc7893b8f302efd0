package listener

import (
	"bytes"
	"net/http"
	"net/url"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// MetricsHandler serves the Gatherer in the Prometheus formats.
func (l *Listener) MetricsHandler() fasthttp.RequestHandler {
	return fasthttpadaptor.NewFastHTTPHandler(l.metricsHTTP())
}

// Metrics renders the Gatherer as MetricsHandler would answer a GET with
// the headers h (Accept and Accept-Encoding choose the format and the
// compression), for a handler that returns its answer as a value.
func (l *Listener) Metrics(h http.Header) (status int, header http.Header, body []byte) {
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	req := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/metrics"}, Header: h, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
	l.metricsHTTP().ServeHTTP(rec, req)
	return rec.status, rec.header, rec.body.Bytes()
}

func (l *Listener) metricsHTTP() http.Handler {
	l.promOnce.Do(func() { l.prom = promhttp.HandlerFor(l.gather, promhttp.HandlerOpts{}) })
	return l.prom
}

// recorder is the smallest http.ResponseWriter that keeps the answer.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.wrote = true
	return r.body.Write(p)
}
