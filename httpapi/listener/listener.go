package listener

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/fasthttp/router"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// Server timeouts, the defaults of every listener (Options): a request
// is read within ReadTimeout of its first byte (a new connection's first
// byte too), and the next one on a kept-alive connection starts within
// IdleTimeout. The listener keeps them itself (timeouts.go).
const (
	ReadTimeout = 30 * time.Second
	IdleTimeout = 2 * time.Minute
)

// RouteUnmatched is the "route" metrics label of requests no route
// matched (404, 405).
const RouteUnmatched = "unmatched"

// Options configure a Listener.
type Options struct {
	// Name is the "listener" label of the metrics and of the logs ("api",
	// "gateway").
	Name string
	// Logger receives the listener's logs; nil discards them.
	Logger *slog.Logger
	// Registerer takes the HTTP metrics and Gatherer serves /metrics. nil
	// Registerer: a private registry; nil Gatherer: the Registerer if it
	// is one, else an empty registry.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// MaxRequestBodySize is fasthttp's: a longer body is refused before
	// any handler runs (ErrTooLarge), or, with StreamRequestBody, what
	// fasthttp reads ahead of the handler.
	MaxRequestBodySize int
	// StreamRequestBody hands bodies to handlers as streams (see
	// fasthttp.Server.StreamRequestBody).
	StreamRequestBody bool
	// ReadTimeout and IdleTimeout replace the defaults of the same names
	// when positive (tests).
	ReadTimeout, IdleTimeout time.Duration
	// ErrorHandler answers what no handler could: a request fasthttp
	// could not read (its error, see ServerError) and a handler that
	// panicked (ErrPanic, after the panic was logged and the response
	// reset). It must write the listener's own error body.
	ErrorHandler func(rc *fasthttp.RequestCtx, err error)
}

// Listener is one fasthttp server with the house settings, its route
// metrics and its panic guard. It is safe for concurrent use once
// SetHandler has been called.
type Listener struct {
	name   string
	lg     *slog.Logger
	m      *metrics
	gather prometheus.Gatherer
	srv    *fasthttp.Server
	onErr  func(rc *fasthttp.RequestCtx, err error)

	promOnce sync.Once
	prom     http.Handler

	lingering lingerSet // connections closing gracefully (conn.go)
	to        *timeouts // read and idle timeouts (timeouts.go)
}

// New builds a Listener; its handler is set with SetHandler. It always
// returns a usable Listener: when the metrics cannot be registered, the
// error says so and the collectors work unexported.
func New(o Options) (*Listener, error) {
	lg := o.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("component", "httpapi", "listener", o.Name)
	reg, gather := o.Registerer, o.Gatherer
	if reg == nil {
		r := prometheus.NewRegistry()
		reg = r
		if gather == nil {
			gather = r
		}
	}
	if gather == nil {
		if g, ok := reg.(prometheus.Gatherer); ok {
			gather = g
		} else {
			gather = prometheus.NewRegistry()
		}
	}
	m, err := newMetrics(reg)
	l := &Listener{name: o.Name, lg: lg, m: m, gather: gather, onErr: o.ErrorHandler}
	if l.onErr == nil {
		l.onErr = func(rc *fasthttp.RequestCtx, _ error) { rc.SetStatusCode(fasthttp.StatusInternalServerError) }
	}
	read, idle := ReadTimeout, IdleTimeout
	if o.ReadTimeout > 0 {
		read = o.ReadTimeout
	}
	if o.IdleTimeout > 0 {
		idle = o.IdleTimeout
	}
	l.to = newTimeouts(read, idle)
	l.srv = &fasthttp.Server{
		// No ReadTimeout or IdleTimeout: fasthttp would set a deadline
		// twice per request; l.to keeps both (timeouts.go).
		ConnState:                    l.to.connState,
		NoDefaultServerHeader:        true,
		MaxRequestBodySize:           o.MaxRequestBodySize,
		StreamRequestBody:            o.StreamRequestBody,
		DisablePreParseMultipartForm: true,
		CloseOnShutdown:              true,
		ErrorHandler:                 func(rc *fasthttp.RequestCtx, err error) { l.onErr(rc, err) },
		Logger:                       fastLogger{lg},
	}
	return l, err
}

// Logger returns the listener's logger (component and listener set).
func (l *Listener) Logger() *slog.Logger { return l.lg }

// SetHandler sets the request handler; call it once, before Serve. A
// request with ambiguous framing never reaches h: it is answered
// ErrFraming through the ErrorHandler and its connection closed.
func (l *Listener) SetHandler(h fasthttp.RequestHandler) {
	l.srv.Handler = func(rc *fasthttp.RequestCtx) {
		if err := checkFraming(&rc.Request.Header); err != nil {
			rc.SetConnectionClose()
			l.onErr(rc, err)
			return
		}
		h(rc)
	}
}

// Handler returns the request handler, for tests and for mounting.
func (l *Listener) Handler() fasthttp.RequestHandler { return l.srv.Handler }

// Serve serves ln until Shutdown; it returns nil after a Shutdown. TCP
// connections close gracefully (see LingerTimeout), within the budget of
// a listener from Conns.Limit. Running out of file descriptors pauses
// accepting, it does not end Serve (limit.go). Call it once.
func (l *Listener) Serve(ln net.Listener) error {
	l.lg.Info("serving", "addr", ln.Addr().String())
	stop := make(chan struct{})
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		l.to.run(stop)
	}()
	defer func() { close(stop); <-swept }()
	return l.srv.Serve(newGracefulListener(ln, &l.lingering, l.m, l.name, l.lg))
}

// Shutdown stops accepting connections and waits, until ctx is done, for
// in-flight requests (streamed answers included) to finish and for closing
// connections to drain (at most LingerTimeout).
func (l *Listener) Shutdown(ctx context.Context) error {
	if err := l.srv.ShutdownWithContext(ctx); err != nil {
		return err
	}
	return l.lingering.wait(ctx)
}

// Wrap is the one route wrapper: it records the request's metrics under
// route (the pattern, never the raw path) and turns a panic in h, a bug,
// into one log line with the stack and a 500 written by the
// ErrorHandler, so one bad request cannot stop the listener. It adds no
// allocation to h.
func (l *Listener) Wrap(route string, h fasthttp.RequestHandler) fasthttp.RequestHandler {
	obs := l.m.forRoute(l.name, route)
	return func(rc *fasthttp.RequestCtx) {
		start := rc.Time() // fasthttp's clock read just before the handler
		if start.IsZero() {
			start = time.Now() // a RequestCtx no server filled in (tests)
		}
		defer l.finish(rc, obs, start)
		h(rc)
	}
}

// finish runs deferred by Wrap.
func (l *Listener) finish(rc *fasthttp.RequestCtx, obs routeMetrics, start time.Time) {
	if v := recover(); v != nil {
		l.lg.Error("handler panic", "path", string(rc.Path()), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		rc.Response.Reset()
		l.onErr(rc, ErrPanic)
	}
	obs.record(rc, time.Since(start))
}

// NewRouter returns a router that matches paths exactly: no
// trailing-slash or case redirects (they turn a POST into a GET in many
// clients), 405 for a known path with another method, no automatic
// OPTIONS. The caller sets NotFound and MethodNotAllowed.
func NewRouter() *router.Router {
	r := router.New()
	r.RedirectTrailingSlash, r.RedirectFixedPath = false, false
	r.HandleMethodNotAllowed, r.HandleOPTIONS = true, false
	return r
}

// fastLogger sends fasthttp's own messages (mostly broken client
// connections) to slog at debug level. fasthttp may quote the raw request
// in them, so credentials are redacted first (Redact).
type fastLogger struct{ lg *slog.Logger }

func (f fastLogger) Printf(format string, args ...any) {
	if f.lg.Enabled(context.Background(), slog.LevelDebug) { // else neither format nor redact
		f.lg.Debug(Redact(fmt.Sprintf(format, args...)))
	}
}

var (
	// secretHeader matches a credential-carrying header line in a raw
	// request or response dump, up to the end of the line.
	secretHeader = regexp.MustCompile(`(?i)\b(x-api-key|authorization|proxy-authorization|cookie|set-cookie)(\s*:\s*)[^\r\n]*`)
	// secretToken matches API keys of both kinds and bearer tokens.
	secretToken = regexp.MustCompile(`(?i)\b(svc_live_|gateway_)[A-Za-z0-9]+|\bbearer\s+[A-Za-z0-9._~+/=-]+|([?&]token=)[^&\s]+`)
)

// Redact removes credentials from a log line: the values of credential
// headers, API keys (svc_live_…, gateway_…) and bearer tokens.
func Redact(s string) string {
	s = secretHeader.ReplaceAllString(s, "$1$2[redacted]")
	return secretToken.ReplaceAllStringFunc(s, func(m string) string {
		if i := strings.Index(m, "token="); i >= 0 && (m[0] == '?' || m[0] == '&') {
			return m[:i+len("token=")] + "[redacted]" // a ?token= query parameter
		}
		return "[redacted]"
	})
}
