package httpapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"runtime/debug"
	"time"
	"unicode/utf8"

	"github.com/fasthttp/router"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"gatehouse/actors/gateway"
)

// GatewayService is what the gateway's HTTP layer needs from the gateway
// actors. All methods are safe for concurrent use and honour ctx.
type GatewayService interface {
	// Authenticate resolves an API key: gateway.ErrKeyMissing,
	// gateway.ErrKeyInvalid (malformed, unknown, revoked, expired). It
	// bounds its own wait and does not retain token.
	Authenticate(ctx context.Context, token []byte) (gateway.KeyAuth, error)
	// Allow takes a token from subject's bucket; always true when off.
	Allow(ctx context.Context, subject string) (bool, error)

	CreateAPIKey(ctx context.Context, n gateway.NewAPIKey) (gateway.APIKey, string, error)
	ListAPIKeys(ctx context.Context) ([]gateway.APIKey, error)
	RevokeAPIKey(ctx context.Context, id uuid.UUID) error

	CreateProvider(ctx context.Context, in gateway.ProviderInput) (gateway.Provider, error)
	UpdateProvider(ctx context.Context, ref string, in gateway.ProviderInput) (gateway.Provider, error)
	GetProvider(ctx context.Context, ref string) (gateway.Provider, error)
	ListProviders(ctx context.Context) ([]gateway.Provider, error)
	DeleteProvider(ctx context.Context, ref string) error
	// ProviderKey opens a provider's sealed credential, to call out only.
	ProviderKey(p gateway.Provider) (string, error)

	CreateAgent(ctx context.Context, user string, in gateway.AgentInput) (gateway.Agent, error)
	UpdateAgent(ctx context.Context, user, ref string, in gateway.AgentInput) (gateway.Agent, error)
	GetAgent(ctx context.Context, user, ref string) (gateway.Agent, error)
	ListAgents(ctx context.Context, user string) ([]gateway.Agent, error)
	DeleteAgent(ctx context.Context, user, ref string) error
	ResolveAgent(ctx context.Context, ref string) (gateway.Agent, gateway.Provider, error)

	// RecordRun records a finished run (trace and usage); it does not wait.
	RecordRun(t gateway.Trace)
}

var _ GatewayService = (*gateway.Gateway)(nil)

// GatewayConfig configures the agent gateway listener.
type GatewayConfig struct {
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
}

// DefaultGatewayConfig returns 1 MiB bodies and a 10 s request timeout.
func DefaultGatewayConfig() GatewayConfig {
	return GatewayConfig{Listener: "gateway", MaxBodyBytes: 1 << 20, RequestTimeout: 10 * time.Second}
}

// Validate names the first bad field.
func (c GatewayConfig) Validate() error {
	switch {
	case c.Listener == "":
		return errors.New("httpapi: gateway Listener is required")
	case c.MaxBodyBytes < 1:
		return errors.New("httpapi: gateway MaxBodyBytes must be > 0")
	case c.RequestTimeout <= 0:
		return errors.New("httpapi: gateway RequestTimeout must be > 0")
	}
	return nil
}

// GatewayServer is the agent gateway's HTTP API (seed 001): auth and
// scopes, rate limiting, providers, agents, chat completions, responses and
// the docs. Safe for concurrent use.
type GatewayServer struct {
	cfg     GatewayConfig
	svc     GatewayService
	lg      *slog.Logger
	m       *metrics
	gather  prometheus.Gatherer
	routes  []gwRoute
	handler fasthttp.RequestHandler
	srv     *fasthttp.Server
	llm     *llmClients
	spec    []byte // the OpenAPI document, built once
	token   []byte // cfg.Token
	prom    fasthttp.RequestHandler
}

// NewGateway builds the gateway server. svc must not be nil; lg nil
// discards logs; reg and gather nil use a private registry.
func NewGateway(cfg GatewayConfig, svc GatewayService, lg *slog.Logger, reg prometheus.Registerer, gather prometheus.Gatherer) (*GatewayServer, error) {
	return newGateway(cfg, svc, lg, reg, gather, nil)
}

func newGateway(cfg GatewayConfig, svc GatewayService, lg *slog.Logger, reg prometheus.Registerer, gather prometheus.Gatherer, extra []gwRoute) (*GatewayServer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if svc == nil {
		return nil, errors.New("httpapi: gateway service is required")
	}
	base, err := newServer(Config{Listener: cfg.Listener}, lg, reg, gather)
	if err != nil {
		return nil, fmt.Errorf("gateway metrics: %w", err)
	}
	s := &GatewayServer{cfg: cfg, svc: svc, lg: base.lg, m: base.m, gather: base.gather, llm: newLLMClients()}
	s.prom = newPromHandler(s.gather)
	s.token = []byte(cfg.Token)
	s.routes = append(s.gwRoutes(), extra...)
	if s.spec, err = s.openAPI(); err != nil {
		return nil, fmt.Errorf("gateway openapi: %w", err)
	}
	s.handler = s.router().Handler
	s.srv = &fasthttp.Server{
		Handler:                      s.handler,
		NoDefaultServerHeader:        true,
		ReadTimeout:                  readTimeout,
		IdleTimeout:                  idleTimeout,
		MaxRequestBodySize:           cfg.MaxBodyBytes,
		DisablePreParseMultipartForm: true,
		CloseOnShutdown:              true,
		ErrorHandler:                 s.serverError,
		Logger:                       fastLogger{s.lg},
	}
	return s, nil
}

// Handler returns the request handler, for tests and for mounting.
func (s *GatewayServer) Handler() fasthttp.RequestHandler { return s.handler }

// Serve serves ln until Shutdown; it returns nil after a Shutdown.
func (s *GatewayServer) Serve(ln net.Listener) error {
	s.lg.Info("serving", "addr", ln.Addr().String())
	return s.srv.Serve(ln)
}

// Shutdown stops accepting connections and waits, until ctx is done, for
// in-flight requests (streams included) to finish.
func (s *GatewayServer) Shutdown(ctx context.Context) error {
	err := s.srv.ShutdownWithContext(ctx)
	s.llm.close()
	return err
}

// gwHandler handles one request; it returns an error for the envelope.
type gwHandler func(r *gwReq) error

// gwReq is a request's parsed context: who is calling and the common
// headers, parsed once by the route wrapper.
type gwReq struct {
	ctx      context.Context // bounded by RequestTimeout
	rc       *fasthttp.RequestCtx
	lang     int
	admin    bool // the gateway token
	keyID    uuid.UUID
	scopes   []gateway.Scope
	userID   string
	agentID  string
	tenantID string
}

// router registers every declared route behind the wrapper.
func (s *GatewayServer) router() *router.Router {
	r := router.New()
	r.RedirectTrailingSlash, r.RedirectFixedPath = false, false
	r.HandleMethodNotAllowed, r.HandleOPTIONS = true, false
	r.NotFound = s.wrap(gwRoute{Path: routeUnmatched, Public: true, Handler: func(*gwReq) error { return errGWRouteNotFound }})
	r.MethodNotAllowed = s.wrap(gwRoute{Path: routeUnmatched, Public: true, Handler: func(*gwReq) error { return errGWMethod }})
	for _, rt := range s.routes {
		r.Handle(rt.Method, rt.Path, s.wrap(rt))
	}
	return r
}

// wrap turns a route into a fasthttp handler: language, authentication,
// rate limit, scope, headers, then the handler; errors become the envelope.
func (s *GatewayServer) wrap(rt gwRoute) fasthttp.RequestHandler {
	obs := s.m.forRoute(s.cfg.Listener, rt.Path)
	return func(rc *fasthttp.RequestCtx) {
		start := time.Now()
		r := &gwReq{rc: rc, lang: parseLang(string(rc.Request.Header.Peek("Accept-Language")))}
		defer s.finish(r, obs, start)
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
		defer cancel()
		r.ctx = ctx
		if err := s.admit(r, rt); err != nil {
			s.writeError(r, err)
			return
		}
		if err := rt.Handler(r); err != nil {
			s.writeError(r, err)
		}
	}
}

// admit runs everything before the handler.
func (s *GatewayServer) admit(r *gwReq, rt gwRoute) error {
	if rt.Public {
		return nil
	}
	if err := s.authenticate(r, rt.QueryToken); err != nil {
		return err
	}
	if err := r.parseHeaders(); err != nil {
		return err
	}
	if err := s.limit(r); err != nil {
		return err
	}
	if !r.admin && !grants(r.scopes, rt.Scope) {
		return errGWScope(rt.Scope)
	}
	if rt.NeedUser && r.userID == "" {
		return errGWUserRequired
	}
	return nil
}

func grants(have []gateway.Scope, need gateway.Scope) bool {
	for _, sc := range have {
		if sc.Grants(need) {
			return true
		}
	}
	return false
}

var bearerPrefix = []byte("Bearer ")

// authenticate accepts the gateway token (constant-time compare) or an
// API key, from Authorization: Bearer, or from ?token= where allowed.
func (s *GatewayServer) authenticate(r *gwReq, queryToken bool) error {
	h := r.rc.Request.Header.Peek(fasthttp.HeaderAuthorization)
	var tok []byte
	switch {
	case len(h) > len(bearerPrefix) && bytes.EqualFold(h[:len(bearerPrefix)], bearerPrefix):
		tok = h[len(bearerPrefix):]
	case len(h) > 0:
		return errGWTokenInvalid
	case queryToken:
		tok = r.rc.QueryArgs().Peek("token")
	}
	if len(tok) == 0 {
		if s.cfg.Token == "" { // loopback-only open mode (cmd enforces it)
			r.admin = true
			return nil
		}
		return errGWTokenMissing
	}
	if len(s.token) > 0 && subtle.ConstantTimeCompare(tok, s.token) == 1 {
		r.admin = true
		return nil
	}
	auth, err := s.svc.Authenticate(r.ctx, tok)
	if err != nil {
		if errors.Is(err, gateway.ErrKeyMissing) || errors.Is(err, gateway.ErrKeyInvalid) {
			return errGWTokenInvalid
		}
		return err
	}
	r.keyID, r.scopes = auth.ID, auth.Scopes
	return nil
}

var slugRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// parseHeaders reads X-Gateway-User-Id, -Agent-Id and -Tenant-Id once.
func (r *gwReq) parseHeaders() error {
	h := &r.rc.Request.Header
	r.userID = string(h.Peek("X-Gateway-User-Id"))
	if !printable(r.userID, 255) {
		return errGWBadHeader("X-Gateway-User-Id")
	}
	r.agentID = string(h.Peek("X-Gateway-Agent-Id"))
	if !printable(r.agentID, 255) {
		return errGWBadHeader("X-Gateway-Agent-Id")
	}
	r.tenantID = string(h.Peek("X-Gateway-Tenant-Id"))
	if r.tenantID != "" {
		if _, err := uuid.Parse(r.tenantID); err != nil && !slugRE.MatchString(r.tenantID) {
			return errGWBadHeader("X-Gateway-Tenant-Id")
		}
	}
	return nil
}

func printable(v string, maxLen int) bool {
	if len(v) > maxLen || !utf8.ValidString(v) {
		return false
	}
	for _, c := range v {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// limit applies the per-user / per-key / per-IP token bucket.
func (s *GatewayServer) limit(r *gwReq) error {
	var subject string
	switch {
	case r.userID != "":
		subject = "user:" + r.userID
	case r.keyID != uuid.Nil:
		subject = "key:" + r.keyID.String()
	default:
		subject = "ip:" + r.rc.RemoteIP().String() // never IP:port
	}
	ok, err := s.svc.Allow(r.ctx, subject)
	if err != nil {
		return err
	}
	if !ok {
		return errGWRateLimited
	}
	return nil
}

// writeError writes the envelope for err in the request's language.
func (s *GatewayServer) writeError(r *gwReq, err error) {
	e, body, unexpected := envelope(err, r.lang)
	if unexpected {
		s.lg.Error("request failed", "method", string(r.rc.Method()), "path", string(r.rc.Path()), "err", err)
	}
	r.rc.Response.ResetBody()
	if e.code == gwExhausted {
		r.rc.Response.Header.Set("Retry-After", rateRetryHeader)
	}
	writeJSON(r.rc, e.status, body)
}

// finish records metrics; a panic is a bug, logged and answered as 500.
func (s *GatewayServer) finish(r *gwReq, obs routeMetrics, start time.Time) {
	if v := recover(); v != nil {
		s.lg.Error("handler panic", "path", string(r.rc.Path()), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		r.rc.Response.Reset()
		s.writeError(r, errGWInternal)
	}
	obs.record(r.rc, time.Since(start))
}

// serverError answers requests fasthttp could not read.
func (s *GatewayServer) serverError(rc *fasthttp.RequestCtx, err error) {
	r := &gwReq{rc: rc, lang: parseLang(string(rc.Request.Header.Peek("Accept-Language")))}
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		s.writeError(r, errGWTooLarge)
		return
	}
	s.writeError(r, errGWInvalid("malformed HTTP request"))
}
