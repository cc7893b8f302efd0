package httpapi

import (
	"bytes"
	"context"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"gatehouse/actors"
	"gatehouse/httpapi/console"
	"gatehouse/httpapi/listener"
)

// Route patterns, as they appear in the "route" metrics label.
const routeProxy = "/api/proxy/{service}/v1/{rest:*}"

var (
	proxyPrefix   = []byte("/api/proxy/")
	consolePrefix = []byte(console.Prefix)
)

// handlerFunc is a handler below the route wrapper: it gets the request's
// context and returns an error for writeError instead of writing it.
type handlerFunc func(ctx context.Context, rc *fasthttp.RequestCtx) error

// apiRoutes builds the management API, the proxy, /health and the
// admin-only /metrics.
func (s *Server) apiRoutes() fasthttp.RequestHandler {
	r := s.newRouter()
	get, post, patch, del := fasthttp.MethodGet, fasthttp.MethodPost, fasthttp.MethodPatch, fasthttp.MethodDelete

	// The process's metrics reveal traffic and the key count: admins only
	// here; scrapers use the separate metrics listener (NewHealthServer).
	metrics := s.metricsHandler()
	s.handle(r, get, "/metrics", s.admin(func(ctx context.Context, rc *fasthttp.RequestCtx, _ actors.User) error {
		return metrics(ctx, rc)
	}))
	s.handle(r, post, "/api/auth/login", s.login)
	s.handle(r, post, "/api/auth/logout", s.logout)
	s.handle(r, post, "/api/auth/logout-all", s.session(s.logoutAll))
	s.handle(r, get, "/api/auth/me", s.session(s.me))

	s.handle(r, post, "/api/users", s.admin(s.createUser))
	s.handle(r, get, "/api/users", s.admin(s.listUsers))
	s.handle(r, patch, "/api/users/{id}", s.admin(s.updateUser))

	s.handle(r, post, "/api/keys", s.session(s.createKey))
	s.handle(r, get, "/api/keys", s.session(s.listKeys))
	// validate is a hot path like the proxy: no per-request deadline, and
	// its (meaningless) body is settled rather than buffered.
	r.Handle(post, "/api/keys/validate", s.wrapHot("/api/keys/validate", func(ctx context.Context, rc *fasthttp.RequestCtx) error {
		settleUnreadBody(rc)
		return s.validateKey(ctx, rc)
	}))
	s.handle(r, get, "/api/keys/{id}", s.session(s.getKey))
	s.handle(r, del, "/api/keys/{id}", s.session(s.deleteKey))
	s.handle(r, patch, "/api/keys/{id}", s.admin(s.updateKey))
	s.handle(r, post, "/api/keys/{id}/rotate", s.session(s.rotateKey))
	s.handle(r, post, "/api/keys/{id}/revoke", s.session(s.revokeKey))
	s.handle(r, get, "/api/keys/{id}/usage", s.session(s.keyUsage))

	// The web console: a page and its assets, over the API above. It is
	// dispatched on its prefix (the router cannot match "/console/" and
	// the assets below it with one pattern).
	cons := console.New()
	serveConsole := s.l.Wrap(console.Prefix, func(rc *fasthttp.RequestCtx) {
		switch {
		case !rc.IsGet() && !rc.IsHead():
			s.writeError(rc, errMethodNotAllowed)
		case !cons.Serve(rc):
			s.writeError(rc, errNotFound)
		}
	})
	r.Handle(get, "/", s.l.Wrap("/", func(rc *fasthttp.RequestCtx) { rc.Redirect(console.Root, fasthttp.StatusFound) }))

	// The proxy takes every method and is dispatched on its prefix before
	// the router: the router's catch-all would copy the path on every
	// request, and the proxy parses the raw path itself anyway.
	proxy := s.wrapHot(routeProxy, s.proxy)
	routed := r.Handler
	return func(rc *fasthttp.RequestCtx) {
		if bytes.HasPrefix(rc.Request.URI().PathOriginal(), proxyPrefix) {
			proxy(rc)
			return
		}
		if p := rc.Path(); bytes.HasPrefix(p, consolePrefix) && (len(p) == len(consolePrefix) || p[len(consolePrefix)] == '/') {
			serveConsole(rc)
			return
		}
		if isGatewayPath(rc.Path()) { // the console's bridge to the gateway (gatewaybridge.go)
			s.serveGateway(rc)
			return
		}
		routed(rc)
	}
}

// newRouter returns a router with /health and the JSON 404 and
// 405 answers (listener.NewRouter: paths match exactly).
func (s *Server) newRouter() *router.Router {
	r := listener.NewRouter()
	r.NotFound = s.wrap(listener.RouteUnmatched, func(context.Context, *fasthttp.RequestCtx) error { return errNotFound })
	r.MethodNotAllowed = s.wrap(listener.RouteUnmatched, func(context.Context, *fasthttp.RequestCtx) error { return errMethodNotAllowed })

	s.handle(r, fasthttp.MethodGet, "/health", func(_ context.Context, rc *fasthttp.RequestCtx) error {
		if h, ok := s.keys.(healthReporter); ok {
			if err := h.Health(); err != nil {
				// Not live: only a restart recovers a failed WAL.
				if !s.unhealthy.Swap(true) {
					s.lg.Warn("health check failing until restart", "err", err)
				}
				writeJSON(rc, fasthttp.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": "write-ahead log failed: restart to recover"})
				return nil
			}
		}
		writeJSON(rc, fasthttp.StatusOK, map[string]string{"status": "ok"})
		return nil
	})
	return r
}

// metricsHandler serves the listener's Gatherer.
func (s *Server) metricsHandler() handlerFunc {
	prom := s.l.MetricsHandler()
	return func(_ context.Context, rc *fasthttp.RequestCtx) error {
		prom(rc)
		return nil
	}
}

// healthReporter is implemented by a KeyService that can fail as a whole
// (*actors.System: its WAL is fail-stop).
type healthReporter interface{ Health() error }

// handle registers h for method and pattern behind the route wrapper.
func (s *Server) handle(r *router.Router, method, pattern string, h handlerFunc) {
	r.Handle(method, pattern, s.wrap(pattern, h))
}

// wrap turns h into a fasthttp handler behind the listener's wrapper
// (metrics, panic guard): it reads the request body whole (bufferBody),
// derives the request context with Config.RequestTimeout and writes h's
// error.
func (s *Server) wrap(route string, h handlerFunc) fasthttp.RequestHandler {
	return s.l.Wrap(route, func(rc *fasthttp.RequestCtx) {
		if err := bufferBody(rc, s.cfg.MaxBodyBytes); err != nil {
			s.writeError(rc, err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
		defer cancel()
		if err := h(ctx, rc); err != nil {
			s.writeError(rc, err)
		}
	})
}

// wrapHot is wrap for the hot paths (proxy, validate), which allocate
// nothing per request on their own: h gets context.Background(), because
// KeyService.Authorize and Validate bound their own wait (a timer per
// request would be the path's largest cost), and h owns the request body
// (see body.go).
func (s *Server) wrapHot(route string, h handlerFunc) fasthttp.RequestHandler {
	return s.l.Wrap(route, func(rc *fasthttp.RequestCtx) {
		if err := h(context.Background(), rc); err != nil {
			s.writeError(rc, err)
		}
	})
}
