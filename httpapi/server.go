package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"gatehouse/actors/accounts"
	"gatehouse/actors/keys"
	"gatehouse/httpapi/listener"
)

// KeyService is what the HTTP layer needs from the keys: the management
// API's store and the proxy's authorizer.
type KeyService interface {
	KeyStore
	KeyAuthorizer
}

// KeyStore is what the key management API needs. All methods are safe for
// concurrent use and honour ctx's deadline.
type KeyStore interface {
	// CreateKey creates a key for k.Owner and returns it with its full
	// secret, the only time the secret leaves the system. Errors:
	// ErrLicenseRequired, ErrInvalidArgument.
	CreateKey(ctx context.Context, k keys.NewKey) (keys.KeyInfo, string, error)
	// ListKeys returns owner's keys; an unknown owner has none.
	ListKeys(ctx context.Context, owner uuid.UUID) ([]keys.KeyInfo, error)
	// GetKey returns one key; ErrKeyNotFound if absent.
	GetKey(ctx context.Context, id uuid.UUID) (keys.KeyInfo, error)
	// RotateKey issues a new secret; the old one stays valid for the grace
	// period. Errors: ErrKeyNotFound, ErrKeyInactive.
	RotateKey(ctx context.Context, id uuid.UUID) (keys.KeyInfo, string, error)
	// RevokeKey invalidates every secret of the key at once; ErrKeyNotFound.
	RevokeKey(ctx context.Context, id uuid.UUID) error
	// DeleteKey removes the key; ErrKeyNotFound.
	DeleteKey(ctx context.Context, id uuid.UUID) error
	// UpdateKey applies p; ErrKeyNotFound, ErrInvalidArgument.
	UpdateKey(ctx context.Context, id uuid.UUID, p keys.KeyPatch) (keys.KeyInfo, error)
	// KeyUsage returns the last days (1..30) of usage; ErrKeyNotFound.
	KeyUsage(ctx context.Context, id uuid.UUID, days int) (keys.Usage, error)
}

// KeyAuthorizer is what the proxy (and /api/validate) needs: the hot path.
type KeyAuthorizer interface {
	// Authorize checks secret, consumes one request of the key's limit and
	// counts usage. It does not retain secret. It must bound its own wait
	// when ctx has no deadline: the proxy passes context.Background().
	Authorize(ctx context.Context, secret []byte) keys.AuthResult
	// Validate checks secret without consuming the limit. It does not
	// retain secret, and bounds its own wait like Authorize.
	Validate(ctx context.Context, secret []byte) keys.AuthResult
}

// UserService is what the HTTP layer needs from the user actors. All
// methods are safe for concurrent use and honour ctx's deadline.
type UserService interface {
	// CreateUser errors: ErrEmailTaken, ErrInvalidArgument.
	CreateUser(ctx context.Context, u accounts.NewUser) (accounts.User, error)
	// UpdateUser errors: ErrUserNotFound, ErrInvalidArgument.
	UpdateUser(ctx context.Context, id uuid.UUID, p accounts.UserPatch) (accounts.User, error)
	// GetUser errors: ErrUserNotFound.
	GetUser(ctx context.Context, id uuid.UUID) (accounts.User, error)
	ListUsers(ctx context.Context) ([]accounts.User, error)
	// LoginFrom opens a session for a client at ip: ErrBadCredentials for
	// an unknown email or a wrong password alike, a *ThrottledError after
	// too many failures, ErrBusy when password hashing is saturated.
	LoginFrom(ctx context.Context, email, password, ip string) (accounts.User, accounts.Session, error)
	// Authenticate returns the user of a session token; ErrSessionInvalid.
	Authenticate(ctx context.Context, token string) (accounts.User, error)
	// Logout ends the session; unknown tokens are not an error.
	Logout(ctx context.Context, token string) error
	// LogoutAll ends every session of user.
	LogoutAll(ctx context.Context, user uuid.UUID) error
	// KeyOwner is what creating a key for u needs (KeyService.CreateKey):
	// their licence, how many keys their plan allows, a new key's limit.
	KeyOwner(u accounts.User) keys.KeyOwner
}

// The keys and the accounts are the production implementations.
var (
	_ KeyStore      = (*keys.Service)(nil)
	_ KeyAuthorizer = (*keys.Service)(nil)
	_ UserService   = (*accounts.Service)(nil)
)

// Server is the HTTP API of one listener. Create it with New or
// NewHealthServer; it is safe for concurrent use.
type Server struct {
	cfg   Config
	keys  KeyService
	users UserService
	l     *listener.Listener
	lg    *slog.Logger
	ctl   ControlService // nil: no tokens, config services only
	// config are the config file's services, built once; table is every
	// service the proxy serves (config's and the API's), rebuilt on each
	// change of the API's (services.go) and read on the hot path without a
	// lock.
	config  map[string]*upstream
	table   atomic.Pointer[serviceTable]
	tableMu sync.Mutex     // serializes rebuilds
	routes  []route        // the route table (table.go)
	router  *router.Router // built from it (kept for TestOpenAPIDocument)
	spec    []byte         // the OpenAPI document built from it
	now     func() time.Time
	// unhealthy is set once /health has reported a failed WAL: probes come
	// every few seconds, and the failure was logged when it happened.
	unhealthy atomic.Bool
	// cluster is this node's membership (WithCluster); nil: a single
	// node. notMember is set while /health reports it not in good
	// standing, to log each change once.
	cluster   ClusterView
	notMember atomic.Bool
	// bridge is the agent gateway mounted for the console (MountGateway).
	bridge gatewayBridge
	// pprof: NewHealthServer serves /debug/pprof/ (WithPprof, pprof.go).
	pprof bool
}

// Option configures New.
type Option func(*Server)

// WithControl serves access tokens, the API's services and per-key
// service lists from c (cmd wires the actors/control extension).
func WithControl(c ControlService) Option { return func(s *Server) { s.ctl = c } }

// New builds the management API and proxy server. keys and users must not
// be nil; lg nil discards logs; reg and gather nil use a private registry.
func New(cfg Config, keys KeyService, users UserService, lg *slog.Logger, reg prometheus.Registerer, gather prometheus.Gatherer, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if keys == nil || users == nil {
		return nil, fmt.Errorf("httpapi: keys and users services are required")
	}
	if cfg.MaxProxyBodyBytes == 0 {
		cfg.MaxProxyBodyBytes = DefaultMaxProxyBodyBytes
	}
	// Bodies are read as streams (body.go): MaxRequestBodySize only caps
	// what fasthttp reads ahead; the route wrappers enforce the limits.
	s, err := newServer(cfg, lg, reg, gather, max(cfg.MaxBodyBytes, cfg.MaxProxyBodyBytes), true)
	if err != nil {
		return nil, err
	}
	s.keys, s.users = keys, users
	for _, o := range opts {
		o(s)
	}
	s.config = make(map[string]*upstream, len(cfg.Services))
	for name, svc := range cfg.Services {
		up, err := newUpstream(name, svc)
		if err != nil {
			return nil, err
		}
		s.config[name] = up
	}
	s.rebuildServices(nil)
	if s.ctl != nil {
		s.ctl.Subscribe(s.rebuildServices)
	}
	s.routes = s.buildRoutes()
	if s.spec, err = s.openAPI(); err != nil {
		return nil, fmt.Errorf("httpapi: openapi document: %w", err)
	}
	s.l.SetHandler(s.apiRoutes())
	return s, nil
}

// NewHealthServer builds a server that answers only GET /health and
// GET /metrics, without authentication, for a listener that serves
// nothing else (the metrics address scrapers use; bind it to loopback or
// a private network). A metrics registration failure is logged, not
// fatal. Of the options only WithCluster and WithPprof matter: /health
// then answers as the API listener's does in cluster mode, and
// /debug/pprof/ serves net/http/pprof's profiles.
func NewHealthServer(name string, lg *slog.Logger, reg prometheus.Registerer, gather prometheus.Gatherer, opts ...Option) *Server {
	cfg := DefaultConfig()
	if name != "" {
		cfg.Listener = name
	}
	cfg.MaxProxyBodyBytes = 0
	s, err := newServer(cfg, lg, reg, gather, cfg.MaxBodyBytes, false)
	if err != nil {
		s.lg.Warn("metrics not registered", "err", err)
	}
	for _, o := range opts {
		o(s)
	}
	r := s.newRouter()
	s.handle(r, fasthttp.MethodGet, "/metrics", s.metricsHandler())
	if s.pprof {
		s.handlePprof(r)
	}
	s.l.SetHandler(r.Handler)
	return s
}

// newServer builds the parts shared by New and NewHealthServer. It always
// returns a usable Server, with unregistered metrics if registration fails.
func newServer(cfg Config, lg *slog.Logger, reg prometheus.Registerer, gather prometheus.Gatherer, maxBody int, stream bool) (*Server, error) {
	s := &Server{cfg: cfg, now: time.Now}
	l, err := listener.New(listener.Options{
		Name: cfg.Listener, Logger: lg, Registerer: reg, Gatherer: gather,
		MaxRequestBodySize: maxBody, StreamRequestBody: stream, ErrorHandler: s.serverError,
	})
	s.l, s.lg = l, l.Logger()
	return s, err
}

// Handler returns the request handler, for tests and for mounting.
func (s *Server) Handler() fasthttp.RequestHandler { return s.l.Handler() }

// Serve serves ln until Shutdown; it returns nil after a Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.l.Serve(ln) }

// Shutdown stops accepting connections and waits, until ctx is done, for
// in-flight requests to finish. Idle upstream connections are closed.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.l.Shutdown(ctx)
	if t := s.table.Load(); t != nil {
		for _, up := range t.byName {
			up.pool.Close()
		}
	}
	return err
}
