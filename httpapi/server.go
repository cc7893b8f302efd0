package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"gatehouse/actors"
)

// KeyService is what the HTTP layer needs from the key actors. All methods
// are safe for concurrent use and honour ctx's deadline.
type KeyService interface {
	// CreateKey creates a key for k.Owner and returns it with its full
	// secret, the only time the secret leaves the system. Errors:
	// ErrLicenseRequired, ErrInvalidArgument.
	CreateKey(ctx context.Context, k actors.NewKey) (actors.KeyInfo, string, error)
	// ListKeys returns owner's keys; an unknown owner has none.
	ListKeys(ctx context.Context, owner uuid.UUID) ([]actors.KeyInfo, error)
	// GetKey returns one key; ErrKeyNotFound if absent.
	GetKey(ctx context.Context, id uuid.UUID) (actors.KeyInfo, error)
	// RotateKey issues a new secret; the old one stays valid for the grace
	// period. Errors: ErrKeyNotFound, ErrKeyInactive.
	RotateKey(ctx context.Context, id uuid.UUID) (actors.KeyInfo, string, error)
	// RevokeKey invalidates every secret of the key at once; ErrKeyNotFound.
	RevokeKey(ctx context.Context, id uuid.UUID) error
	// DeleteKey removes the key; ErrKeyNotFound.
	DeleteKey(ctx context.Context, id uuid.UUID) error
	// UpdateKey applies p; ErrKeyNotFound, ErrInvalidArgument.
	UpdateKey(ctx context.Context, id uuid.UUID, p actors.KeyPatch) (actors.KeyInfo, error)
	// KeyUsage returns the last days (1..30) of usage; ErrKeyNotFound.
	KeyUsage(ctx context.Context, id uuid.UUID, days int) (actors.Usage, error)
	// Authorize checks secret, consumes one request of the key's limit and
	// counts usage. It does not retain secret. It must bound its own wait
	// when ctx has no deadline: the proxy passes context.Background().
	Authorize(ctx context.Context, secret []byte) actors.AuthResult
	// Validate checks secret without consuming the limit. It does not
	// retain secret, and bounds its own wait like Authorize.
	Validate(ctx context.Context, secret []byte) actors.AuthResult
}

// UserService is what the HTTP layer needs from the user actors. All
// methods are safe for concurrent use and honour ctx's deadline.
type UserService interface {
	// CreateUser errors: ErrEmailTaken, ErrInvalidArgument.
	CreateUser(ctx context.Context, u actors.NewUser) (actors.User, error)
	// UpdateUser errors: ErrUserNotFound, ErrInvalidArgument.
	UpdateUser(ctx context.Context, id uuid.UUID, p actors.UserPatch) (actors.User, error)
	// GetUser errors: ErrUserNotFound.
	GetUser(ctx context.Context, id uuid.UUID) (actors.User, error)
	ListUsers(ctx context.Context) ([]actors.User, error)
	// Login opens a session; ErrBadCredentials for an unknown email or a
	// wrong password alike.
	Login(ctx context.Context, email, password string) (actors.User, actors.Session, error)
	// Authenticate returns the user of a session token; ErrSessionInvalid.
	Authenticate(ctx context.Context, token string) (actors.User, error)
	// Logout ends the session; unknown tokens are not an error.
	Logout(ctx context.Context, token string) error
}

// The actor system is the production implementation of both interfaces.
var (
	_ KeyService  = (*actors.System)(nil)
	_ UserService = (*actors.System)(nil)
)

// Server timeouts that Config does not expose.
const (
	readTimeout = 30 * time.Second
	idleTimeout = 2 * time.Minute
)

// Server is the HTTP API of one listener. Create it with New or
// NewHealthServer; it is safe for concurrent use.
type Server struct {
	cfg      Config
	keys     KeyService
	users    UserService
	lg       *slog.Logger
	m        *metrics
	services map[string]*upstream
	handler  fasthttp.RequestHandler
	srv      *fasthttp.Server
	gather   prometheus.Gatherer
	now      func() time.Time
}

// New builds the management API and proxy server. keys and users must not
// be nil; lg nil discards logs; reg and gather nil use a private registry.
func New(cfg Config, keys KeyService, users UserService, lg *slog.Logger, reg prometheus.Registerer, gather prometheus.Gatherer) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if keys == nil || users == nil {
		return nil, fmt.Errorf("httpapi: keys and users services are required")
	}
	if cfg.MaxProxyBodyBytes == 0 {
		cfg.MaxProxyBodyBytes = DefaultMaxProxyBodyBytes
	}
	s, err := newServer(cfg, lg, reg, gather)
	if err != nil {
		return nil, err
	}
	s.keys, s.users = keys, users
	s.services = make(map[string]*upstream, len(cfg.Services))
	for name, svc := range cfg.Services {
		up, err := newUpstream(name, svc)
		if err != nil {
			return nil, err
		}
		s.services[name] = up
	}
	s.handler = s.apiRoutes()
	s.srv.Handler = s.handler
	// Bodies are read as streams (body.go): MaxRequestBodySize only caps
	// what fasthttp reads ahead; the route wrappers enforce the limits.
	s.srv.StreamRequestBody = true
	s.srv.MaxRequestBodySize = max(cfg.MaxBodyBytes, cfg.MaxProxyBodyBytes)
	return s, nil
}

// NewHealthServer builds a server that answers only GET /health and
// GET /metrics, for the gateway listener until the agent gateway lands.
// A metrics registration failure is logged, not fatal.
func NewHealthServer(listener string, lg *slog.Logger, reg prometheus.Registerer, gather prometheus.Gatherer) *Server {
	cfg := DefaultConfig()
	if listener != "" {
		cfg.Listener = listener
	}
	cfg.MaxProxyBodyBytes = 0
	s, err := newServer(cfg, lg, reg, gather)
	if err != nil {
		s.lg.Warn("metrics not registered", "err", err)
	}
	s.handler = s.healthRoutes()
	s.srv.Handler = s.handler
	s.srv.MaxRequestBodySize = cfg.MaxBodyBytes
	return s
}

// newServer builds the parts shared by New and NewHealthServer. It always
// returns a usable Server, with unregistered metrics if registration fails.
func newServer(cfg Config, lg *slog.Logger, reg prometheus.Registerer, gather prometheus.Gatherer) (*Server, error) {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("component", "httpapi", "listener", cfg.Listener)
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
	s := &Server{cfg: cfg, lg: lg, m: m, gather: gather, now: time.Now}
	s.srv = &fasthttp.Server{
		NoDefaultServerHeader:        true,
		ReadTimeout:                  readTimeout,
		IdleTimeout:                  idleTimeout,
		DisablePreParseMultipartForm: true,
		CloseOnShutdown:              true,
		ErrorHandler:                 s.serverError,
		Logger:                       fastLogger{lg},
	}
	return s, err
}

// Handler returns the request handler, for tests and for mounting.
func (s *Server) Handler() fasthttp.RequestHandler { return s.handler }

// Serve serves ln until Shutdown; it returns nil after a Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.lg.Info("serving", "addr", ln.Addr().String())
	return s.srv.Serve(ln)
}

// Shutdown stops accepting connections and waits, until ctx is done, for
// in-flight requests to finish. Idle upstream connections are closed.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.ShutdownWithContext(ctx)
	for _, up := range s.services {
		up.client.CloseIdleConnections()
	}
	return err
}

// fastLogger sends fasthttp's own messages (mostly broken client
// connections) to slog at debug level.
type fastLogger struct{ lg *slog.Logger }

func (l fastLogger) Printf(format string, args ...any) {
	l.lg.Debug(fmt.Sprintf(format, args...))
}
