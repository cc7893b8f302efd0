package httpapi

import (
	"bytes"
	"context"
	"strings"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"gatehouse/httpapi/console"
	"gatehouse/httpapi/listener"
)

// Route patterns, as they appear in the "route" metrics label.
const (
	routeProxy   = "/api/proxy/{service}/v1/{rest:*}"
	routeConsole = "/console/{file:*}"
)

var (
	proxyPrefix   = []byte("/api/proxy/")
	consolePrefix = []byte(console.Prefix)
)

// handlerFunc is a handler below the route wrapper: it gets the request's
// context and returns an error for writeError instead of writing it.
type handlerFunc func(ctx context.Context, rc *fasthttp.RequestCtx) error

// apiRoutes builds the management API, the proxy, /health, the
// admin-only /metrics, the OpenAPI document and the console, all from the
// route table (s.routes): a route is declared once, and the router, the
// prefix dispatch and GET /api/openapi.json are built from the
// declaration.
func (s *Server) apiRoutes() fasthttp.RequestHandler {
	r := s.newRouter()
	var proxy, serveConsole fasthttp.RequestHandler
	for i := range s.routes {
		rt := &s.routes[i]
		switch {
		case rt.path == routeProxy:
			if proxy == nil {
				// The proxy takes every method and is dispatched on its
				// prefix before the router: the router's catch-all would
				// copy the path on every request, and the proxy parses the
				// raw path itself anyway.
				proxy = s.wrapHot(routeProxy, rt.h)
			}
		case rt.path == routeConsole:
			// The web console: a page and its assets, over the API above.
			// It is dispatched on its prefix (the router cannot match
			// "/console/" and the assets below it with one pattern).
			serveConsole = s.l.Wrap(console.Prefix, func(rc *fasthttp.RequestCtx) {
				if err := rt.h(context.Background(), rc); err != nil {
					s.writeError(rc, err)
				}
			})
		case rt.path == "/health":
			// newRouter's (NewHealthServer serves it too).
		case strings.HasPrefix(rt.path, GatewayPrefix+"/"):
			// The gateway bridge: dispatched on its prefix below.
		case rt.hot:
			r.Handle(rt.method, rt.path, s.wrapHot(rt.path, rt.h))
		default:
			r.Handle(rt.method, rt.path, s.wrap(rt.path, s.guard(rt)))
		}
	}
	s.router = r
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

// guard puts rt's authentication in front of its handler.
func (s *Server) guard(rt *route) handlerFunc {
	switch rt.auth {
	case authUser:
		return s.session(rt.needScope(), rt.uh)
	case authAdmin:
		return s.admin(rt.uh)
	}
	return rt.h
}

// newRouter returns a router with /health and the JSON 404 and
// 405 answers (listener.NewRouter: paths match exactly).
func (s *Server) newRouter() *router.Router {
	r := listener.NewRouter()
	r.NotFound = s.wrap(listener.RouteUnmatched, func(context.Context, *fasthttp.RequestCtx) error { return errNotFound })
	r.MethodNotAllowed = s.wrap(listener.RouteUnmatched, func(context.Context, *fasthttp.RequestCtx) error { return errMethodNotAllowed })

	// HEAD answers as GET does (fasthttp sends no body to a HEAD).
	s.handle(r, fasthttp.MethodGet, "/health", s.health)
	s.handle(r, fasthttp.MethodHead, "/health", s.health)
	return r
}

// health: GET /health, without credentials. 503 once the WAL failed
// (until a restart) and, in cluster mode, while the node is not a member
// in good standing, so that a load balancer takes it out.
func (s *Server) health(_ context.Context, rc *fasthttp.RequestCtx) error {
	ch := s.clusterHealthCheck()
	if h, ok := s.keys.(healthReporter); ok {
		if err := h.Health(); err != nil {
			// Not live: only a restart recovers a failed WAL.
			if !s.unhealthy.Swap(true) {
				s.lg.Warn("health check failing until restart", "err", err)
			}
			writeJSON(rc, fasthttp.StatusServiceUnavailable, healthBody{Status: "unavailable", Reason: "write-ahead log failed: restart to recover", Cluster: ch})
			return nil
		}
	}
	if ch != nil && !ch.Member {
		writeJSON(rc, fasthttp.StatusServiceUnavailable, healthBody{Status: "unavailable", Reason: notMember, Cluster: ch})
		return nil
	}
	writeJSON(rc, fasthttp.StatusOK, healthBody{Status: "ok", Cluster: ch})
	return nil
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
