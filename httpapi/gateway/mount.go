package gateway

import (
	"bytes"
	"context"
	"strings"

	"github.com/valyala/fasthttp"

	"gatehouse/actors/gateway"
)

// Mounting: the gateway's operations served on another listener, for
// callers that listener authenticates. The web console on :8080 mounts
// them below /api/gateway with its session cookie (httpapi's bridge), so
// that a browser reaches agents, chat, traces and the rest without ever
// holding a gateway credential. The routes are the table's (every /v1
// route but the public ones), with the same checks (the rate limit, the
// scope, the user binding), the same answers and errors, SSE streams
// included, and the WebSocket RPC at <prefix>/ws: only where the caller
// comes from differs.

// Authority authenticates a request on the listener the gateway is
// mounted on. It returns the
// caller to act as (ConsoleCaller) and recheck, which a WebSocket runs
// before each of its requests: an error ends the socket (1008), as a
// revoked key does on /ws. When ok is false, Authority has answered the
// request itself (401, a CSRF refusal) in its listener's error shape.
// recheck must not keep rc.
type Authority func(ctx context.Context, rc *fasthttp.RequestCtx) (c Caller, recheck func(context.Context) error, ok bool)

// ConsoleCaller is the caller of a console user: their gateway user id is
// their console user id, so their agents, sessions, traces and usage are
// the same as for X-Gateway-User-Id: <id>. A console admin acts as a
// trusted backend (the gateway token's rights) for their own user; any
// other user as an operator.write key bound to them.
func ConsoleCaller(userID string, admin bool) Caller {
	c := Caller{KeyUser: userID, UserID: userID, Console: true}
	if admin {
		c.Admin = true
	} else {
		c.Scopes = []gateway.Scope{gateway.ScopeWrite}
	}
	return c
}

// Mount returns a handler that serves, below prefix ("/api/gateway"),
// every route of the table under /v1 (prefix+"/v1/agents", …) and the
// WebSocket RPC (prefix+"/ws"), for the callers auth establishes. Paths
// not below prefix are answered 404. The requests are counted in the
// gateway's metrics under their prefixed routes.
func (s *Server) Mount(prefix string, auth Authority) fasthttp.RequestHandler {
	r := s.newRouter()
	for i := range s.routes {
		rt := &s.routes[i]
		if rt.Public || !strings.HasPrefix(rt.Path, "/v1/") {
			continue
		}
		r.Handle(rt.Method, prefix+rt.Path, s.routeHandler(prefix+rt.Path, rt, auth))
	}
	r.Handle(fasthttp.MethodGet, prefix+"/ws", s.l.Wrap(prefix+"/ws", func(rc *fasthttp.RequestCtx) {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
		defer cancel()
		c, recheck, ok := auth(ctx, rc)
		if !ok {
			return
		}
		if recheck == nil {
			recheck = func(context.Context) error { return nil }
		}
		s.upgradeWS(rc, langOf(rc), rc.RemoteIP().String(), &wsMounted{c: c, recheck: recheck})
	}))
	routed := r.Handler
	pre := []byte(prefix)
	return func(rc *fasthttp.RequestCtx) {
		if err := checkFilePath(bytes.TrimPrefix(rc.URI().PathOriginal(), pre)); err != nil {
			s.writeError(rc, langOf(rc), err)
			return
		}
		routed(rc)
	}
}
