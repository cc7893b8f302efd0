package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/fasthttp/router"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/app"
	"gatehouse/httpapi/listener"
	"gatehouse/httpapi/webassets"
)

// Config configures the agent gateway listener.
type Config struct {
	// Listener names the listener in metrics and logs.
	Listener string
	// Token is the gateway admin token; empty disables token checks for
	// requests without a token (cmd refuses it unless loopback-only).
	Token string
	// MaxBodyBytes caps request bodies (413 above it).
	MaxBodyBytes int
	// RequestTimeout bounds control-plane requests; agent runs are bounded
	// by their agent's timeout_seconds instead.
	RequestTimeout time.Duration
	// MaxUploadBytes caps an upload (media; 413 beyond, from the
	// Content-Length when there is one). Uploads are streamed, never held
	// whole in memory.
	MaxUploadBytes int
}

// DefaultConfig returns 1 MiB bodies, 20 MiB uploads and a 10 s request
// timeout.
func DefaultConfig() Config {
	return Config{Listener: "gateway", MaxBodyBytes: 1 << 20, MaxUploadBytes: 20 << 20, RequestTimeout: 10 * time.Second}
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.Listener == "":
		return errors.New("gateway: Listener is required")
	case c.MaxBodyBytes < 1:
		return errors.New("gateway: MaxBodyBytes must be > 0")
	case c.RequestTimeout <= 0:
		return errors.New("gateway: RequestTimeout must be > 0")
	case c.MaxUploadBytes < 1:
		return errors.New("gateway: MaxUploadBytes must be > 0")
	}
	return nil
}

// Deps are the services the gateway's routes use, each a small interface
// declared next to its consumer (auth.go, apikeys.go, providers.go,
// agents.go, chat.go). DepsOf fills them from the gateway domain.
type Deps struct {
	Auth       Authenticator
	Limiter    Limiter
	APIKeys    APIKeyStore
	Providers  ProviderStore
	Agents     AgentStore
	Sharing    SharingStore
	Instances  InstanceStore
	Sessions   SessionStore
	Runs       RunStore
	Activity   ActivityStore
	Channels   ChannelStore
	Webhooks   Webhooks
	Tools      ToolStore
	Memory     MemoryStore
	MCP        MCPStore
	MCPLive    MCPLive
	Media      MediaStore
	Workspaces Workspaces
	Skills     SkillStore
	Budgets    BudgetStore
	// ProviderCalls lists and verifies providers and reports their keys'
	// states (the runtime).
	ProviderCalls ProviderCalls
	// Runner runs agents: every run is a turn of the agent runtime. The
	// server neither builds nor closes it (cmd/gatehouse does).
	Runner Runner
	// Health, optional, fails /health (503) when the state cannot change
	// any more (a failed WAL: see actors.System.Health).
	Health func() error
}

// DepsOf returns the production Deps: g for the state, a for the
// application services over it (built and closed by the caller).
func DepsOf(g *gateway.Gateway, a *app.App) Deps {
	return Deps{Auth: g, Limiter: g, APIKeys: g, Providers: g, Agents: g, Sharing: g, Instances: g, Sessions: g, Runs: g,
		Activity: g, Channels: g, Webhooks: a.Webhooks, Tools: g, Memory: g, MCP: g, MCPLive: a.Toolbox,
		Media: mediaAdapter{g}, Workspaces: a.Workspaces, Skills: g, Budgets: g, ProviderCalls: a.Runtime, Runner: a.Runtime}
}

func (d Deps) validate() error {
	if d.Auth == nil || d.Limiter == nil || d.APIKeys == nil || d.Providers == nil || d.Agents == nil || d.Sharing == nil || d.Instances == nil || d.Sessions == nil || d.Runs == nil || d.Activity == nil || d.Channels == nil || d.Webhooks == nil || d.Tools == nil || d.Memory == nil || d.MCP == nil || d.MCPLive == nil || d.Media == nil || d.Workspaces == nil || d.Skills == nil || d.Budgets == nil || d.ProviderCalls == nil || d.Runner == nil {
		return errors.New("gateway: every dependency is required")
	}
	return nil
}

// Server is the agent gateway's HTTP API (seed 001): auth and scopes,
// rate limiting, API keys, providers, agents, chat completions, responses
// and the docs. Safe for concurrent use.
type Server struct {
	cfg          Config
	authFailures *prometheus.CounterVec
	d            Deps
	l            *listener.Listener
	lg           *slog.Logger
	routes       []Route
	rpc          map[string]*Route
	spec         []byte                    // the OpenAPI document, built once
	specEncoded  func() *webassets.Encoded // spec compressed, on first use
	token        []byte                    // cfg.Token
	ws           wsHub                     // open WebSocket connections
}

// New builds the gateway server. lg nil discards logs; reg and gather nil
// use a private registry.
func New(cfg Config, d Deps, lg *slog.Logger, reg prometheus.Registerer, gather prometheus.Gatherer) (*Server, error) {
	return newServer(cfg, d, lg, reg, gather, nil)
}

// newServer is New with extra routes (tests declare some).
func newServer(cfg Config, d Deps, lg *slog.Logger, reg prometheus.Registerer, gather prometheus.Gatherer, extra []Route) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := d.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, d: d, token: []byte(cfg.Token), authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_gateway_auth_failures_total",
		Help: "Gateway requests refused for their credential, by reason (missing, invalid, scope, user_binding).",
	}, []string{"reason"})}
	if reg != nil {
		if err := reg.Register(s.authFailures); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, fmt.Errorf("gateway metrics: %w", err)
			}
			s.authFailures = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	l, err := listener.New(listener.Options{
		Name: cfg.Listener, Logger: lg, Registerer: reg, Gatherer: gather,
		// fasthttp reads a body of up to MaxBodyBytes before the handler and
		// streams a longer one: every route then refuses it (413, from the
		// Content-Length) but uploads, which stream theirs (takeBody).
		MaxRequestBodySize: cfg.MaxBodyBytes, StreamRequestBody: true,
		ErrorHandler: s.listenerError,
	})
	if err != nil {
		return nil, fmt.Errorf("gateway metrics: %w", err)
	}
	s.l, s.lg = l, l.Logger()
	s.routes = append(s.table(), extra...)
	if s.rpc, err = rpcIndex(s.routes); err != nil {
		return nil, err
	}
	if s.spec, err = s.openAPI(); err != nil {
		return nil, fmt.Errorf("gateway openapi: %w", err)
	}
	s.specEncoded = sync.OnceValue(func() *webassets.Encoded { return webassets.Encode(s.spec) })
	routed := s.router()
	s.l.SetHandler(func(rc *fasthttp.RequestCtx) {
		if err := checkFilePath(rc.URI().PathOriginal()); err != nil {
			s.writeError(rc, langOf(rc), err)
			return
		}
		routed(rc)
	})
	return s, nil
}

// Routes returns the route table (for transports and tools; do not
// modify it).
func (s *Server) Routes() []Route { return s.routes }

// Handler returns the request handler, for tests and for mounting.
func (s *Server) Handler() fasthttp.RequestHandler { return s.l.Handler() }

// Serve serves ln until Shutdown; it returns nil after a Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.l.Serve(ln) }

// Shutdown stops accepting connections and waits, until ctx is done, for
// in-flight requests (streams included) to finish. The agent runtime and
// the other application services outlive it: their owner closes them
// once every listener has drained.
func (s *Server) Shutdown(ctx context.Context) error {
	s.ws.shutdown() // hijacked connections: fasthttp does not track them
	return s.l.Shutdown(ctx)
}

// uploadOverhead is what a multipart request may carry beside the file.
const uploadOverhead = 64 << 10

// takeBody reads the request body of a route whole, up to MaxBodyBytes;
// an upload route's is left as a stream, refused at once when its
// Content-Length says it is too large.
func (s *Server) takeBody(rc *fasthttp.RequestCtx, rt *Route) error {
	if rt.Upload {
		if cl := rc.Request.Header.ContentLength(); cl > s.cfg.MaxUploadBytes+uploadOverhead {
			rc.SetConnectionClose()
			return errTooLarge
		}
		return nil
	}
	switch err := listener.BufferBody(rc, s.cfg.MaxBodyBytes); {
	case errors.Is(err, listener.ErrTooLarge):
		return errTooLarge
	case err != nil:
		rc.SetConnectionClose()
		return errInvalid("the request body could not be read")
	}
	return nil
}

// settleUpload closes the connection after an upload whose body was not
// read to its end: the rest would be read as the next request.
func settleUpload(rc *fasthttp.RequestCtx) {
	if !rc.Request.IsBodyStream() {
		return
	}
	if _, err := rc.RequestBodyStream().Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		rc.SetConnectionClose()
	}
}

// newRouter returns a router whose unmatched paths and methods answer in
// the gateway's error envelope.
func (s *Server) newRouter() *router.Router {
	r := listener.NewRouter()
	unmatched := func(err error) fasthttp.RequestHandler {
		return s.l.Wrap(listener.RouteUnmatched, func(rc *fasthttp.RequestCtx) { s.writeError(rc, langOf(rc), err) })
	}
	r.NotFound, r.MethodNotAllowed = unmatched(errRouteNotFound), unmatched(errMethod)
	return r
}

// router registers every route of the table behind its handler.
func (s *Server) router() fasthttp.RequestHandler {
	r := s.newRouter()
	for i := range s.routes {
		rt := &s.routes[i]
		r.Handle(rt.Method, rt.Path, s.handler(rt))
		if rt.Path == "/health" { // HEAD answers as GET does (fasthttp sends no body to a HEAD)
			r.Handle(fasthttp.MethodHead, rt.Path, s.handler(rt))
		}
	}
	r.Handle(fasthttp.MethodGet, "/ws", s.l.Wrap("/ws", s.serveWS))
	// The root points a browser at the docs, relatively (behind TLS or a
	// proxy an absolute Location would name the wrong scheme or host).
	toDocs := s.l.Wrap("/", func(rc *fasthttp.RequestCtx) {
		rc.Response.Header.Set(fasthttp.HeaderLocation, "/docs")
		rc.SetStatusCode(fasthttp.StatusFound)
	})
	r.Handle(fasthttp.MethodGet, "/", toDocs)
	r.Handle(fasthttp.MethodHead, "/", toDocs)
	return r.Handler
}

// handler is the HTTP transport of one route: the caller (token and
// headers), the shared checks (admit), the operation, then its output or
// its error, in the request's language.
func (s *Server) handler(rt *Route) fasthttp.RequestHandler { return s.routeHandler(rt.Path, rt, nil) }

// routeHandler is handler under the metrics label route, with the caller
// from auth when it is set (Mount), else from the request's token.
func (s *Server) routeHandler(route string, rt *Route, auth Authority) fasthttp.RequestHandler {
	return s.l.Wrap(route, func(rc *fasthttp.RequestCtx) {
		lang := langOf(rc)
		if err := s.takeBody(rc, rt); err != nil {
			s.writeError(rc, lang, err)
			return
		}
		if rt.Upload {
			defer settleUpload(rc)
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
		defer cancel()
		cw := &clientWatch{conn: rc.Conn()}
		defer cw.stop() // before the connection goes back to the server
		ctx = context.WithValue(ctx, clientWatchKey{}, cw)
		var out any
		var err error
		if auth == nil {
			out, err = s.serve(ctx, rc, rt)
			if err != nil && rt.RPC == rpcDocsPage && s.docsHint(rc, err) {
				return
			}
		} else {
			c, _, ok := auth(ctx, rc)
			if !ok {
				return // auth has answered
			}
			out, err = s.serveMounted(ctx, rc, rt, c)
		}
		if err != nil {
			s.writeError(rc, lang, err)
			return
		}
		s.writeOutput(rc, rt, lang, out)
	})
}

func (s *Server) serve(ctx context.Context, rc *fasthttp.RequestCtx, rt *Route) (any, error) {
	if s.cfg.Token == "" {
		if err := openModeGuard(rc, rt); err != nil {
			return nil, err
		}
	}
	if rt.Public {
		return rt.Op.run(ctx, Caller{}, httpSource{rc})
	}
	c, err := s.caller(ctx, rc, rt.QueryToken)
	if err != nil {
		return nil, err
	}
	return s.serveAs(ctx, rc, rt, c)
}

// serveMounted runs a mounted route for c, the caller the mount's
// authority established: X-Gateway-Agent-Id and -Tenant-Id are read as
// on this listener, X-Gateway-User-Id is not (the authority decided the
// user).
func (s *Server) serveMounted(ctx context.Context, rc *fasthttp.RequestCtx, rt *Route, c Caller) (any, error) {
	var hd Caller
	if err := readHeaders(&rc.Request.Header, &hd); err != nil {
		return nil, err
	}
	c.AgentID, c.TenantID = hd.AgentID, hd.TenantID
	c.IP, c.Channel = rc.RemoteIP().String(), "http"
	return s.serveAs(ctx, rc, rt, c)
}

// serveAs runs a route that is not public for c: the shared checks, then
// the operation, audited as c's.
func (s *Server) serveAs(ctx context.Context, rc *fasthttp.RequestCtx, rt *Route, c Caller) (any, error) {
	if err := s.admit(ctx, rt, c); err != nil {
		return nil, err
	}
	return rt.Op.run(withActor(ctx, c), c, httpSource{rc})
}

// withActor names c in ctx as the author of the changes the operation
// makes: the activity log records it (the key's id, never a secret).
func withActor(ctx context.Context, c Caller) context.Context {
	a := gateway.Actor{Type: gateway.ActorToken, ID: "gateway_token", UserID: c.UserID, IP: c.IP}
	switch {
	case c.KeyID != uuid.Nil:
		a.Type, a.ID = gateway.ActorAPIKey, c.KeyID.String()
	case c.Open:
		a.ID = "open_mode"
	case c.Console:
		a.Type, a.ID = gateway.ActorConsole, c.UserID
	}
	return gateway.WithActor(ctx, a)
}

// clientWatch watches the client of one request, from the first call of
// gone until the handler returns (stop). It is how a run answered in one
// piece (runContext) notices a client that went away: fasthttp does not
// tell a blocked handler.
type clientWatch struct {
	conn    net.Conn
	once    sync.Once
	ctx     context.Context
	release func()
}

type clientWatchKey struct{}

// socketLifeKey holds, in a WebSocket RPC call's context, a context that
// ends when the socket closes or the call returns (runContext).
type socketLifeKey struct{}

// errCallDone ends a WebSocket call's socketLife once it has answered.
var errCallDone = errors.New("gateway: call answered")

// gone returns a context that ends when the client goes away or the
// handler returns.
func (w *clientWatch) gone() context.Context {
	w.once.Do(func() { w.ctx, w.release = listener.WatchPeer(w.conn, listener.PeerCheckInterval) })
	if w.release == nil { // the handler has returned
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	return w.ctx
}

// stop ends the watch; gone starts none after it.
func (w *clientWatch) stop() {
	w.once.Do(func() {})
	if w.release != nil {
		w.release()
	}
}

// writeOutput answers rc with an operation's output.
func (s *Server) writeOutput(rc *fasthttp.RequestCtx, rt *Route, lang int, out any) {
	if st, ok := out.(streamer); ok {
		for k, v := range st.header() {
			rc.Response.Header.Set(k, v)
		}
		if ev := st.events(); ev != nil {
			s.serveSSE(rc, lang, ev)
			return
		}
		out = st.value()
	}
	if rt.NoStore {
		rc.Response.Header.Set("Cache-Control", "no-store")
	}
	switch v := out.(type) {
	case None:
		rc.SetStatusCode(rt.status())
	case Body:
		rc.SetStatusCode(rt.status())
		if v.Status != 0 {
			rc.SetStatusCode(v.Status)
		}
		rc.SetContentType(v.ContentType)
		for k, val := range v.Header {
			rc.Response.Header.Set(k, val)
		}
		if v.Stream != nil {
			rc.SetBodyStream(v.Stream, int(v.Size))
			return
		}
		if v.Encoded != nil {
			body, enc := v.Encoded.For(rc.Request.Header.Peek(fasthttp.HeaderAcceptEncoding))
			rc.Response.Header.Set(fasthttp.HeaderVary, fasthttp.HeaderAcceptEncoding)
			if enc != "" {
				rc.Response.Header.Set(fasthttp.HeaderContentEncoding, enc)
			}
			rc.Response.SetBodyRaw(body) // shared and never written: no copy
			return
		}
		rc.SetBody(v.Data)
	default:
		if err := listener.WriteJSON(rc, rt.status(), v); err != nil {
			s.writeError(rc, lang, fmt.Errorf("encode %s answer: %w", rt.RPC, err))
		}
	}
}

// httpSource reads an operation's input from a request. It lives only as
// long as the handler.
type httpSource struct{ rc *fasthttp.RequestCtx }

func (h httpSource) body() []byte { return h.rc.Request.Body() }

func (h httpSource) stream() io.Reader {
	if h.rc.Request.IsBodyStream() {
		if h.rc.Request.Header.ContentLength() == 0 {
			return nil
		}
		return h.rc.RequestBodyStream()
	}
	if b := h.rc.Request.Body(); len(b) > 0 {
		return bytes.NewReader(b)
	}
	return nil
}

func (h httpSource) raw() ([]byte, bool) {
	b := h.rc.Request.Body()
	return bytes.Clone(b), len(b) > 0
}

func (h httpSource) param(in, name string) (string, bool) {
	switch in {
	case inPath:
		v, ok := h.rc.UserValue(name).(string)
		return v, ok
	case inQuery:
		if !h.rc.QueryArgs().Has(name) {
			return "", false
		}
		return string(h.rc.QueryArgs().Peek(name)), true
	case inHeader:
		v := h.rc.Request.Header.Peek(name)
		return string(v), len(v) > 0
	}
	return "", false
}
