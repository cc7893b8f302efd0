package httpapi

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"gatehouse/actors/accounts"
	"gatehouse/actors/control"
	gwapi "gatehouse/httpapi/gateway"
	"gatehouse/httpapi/listener"
)

// The console's bridge to the agent gateway. A console user is a gateway
// user: their gateway user id is their console user id, and a console
// admin acts as a gateway admin (gwapi.ConsoleCaller). The console
// reaches the gateway's operations on this listener, below GatewayPrefix,
// with its session cookie and the same CSRF rule as the rest of the
// console (session, checkCSRF): /api/gateway/v1/agents is GET /v1/agents
// of the gateway for that user, and /api/gateway/ws its WebSocket RPC,
// authenticated by the session at the upgrade (same-origin only) and
// again before every request. No gateway token ever reaches the browser:
// the bridge calls the gateway's operations in-process (gwapi.Mount).

// GatewayPrefix is where this listener serves the gateway's operations.
const GatewayPrefix = "/api/gateway"

var gatewayPrefix = []byte(GatewayPrefix)

// GatewayMount is the agent gateway as the bridge mounts it
// (*gwapi.Server).
type GatewayMount interface {
	Mount(prefix string, auth gwapi.Authority) fasthttp.RequestHandler
}

var _ GatewayMount = (*gwapi.Server)(nil)

// gatewayBridge holds the mounted gateway's handler (nil until
// MountGateway).
type gatewayBridge struct {
	h atomic.Pointer[fasthttp.RequestHandler]
}

// MountGateway serves gw's operations below GatewayPrefix for the
// console's sessions. Without it, paths there answer 404.
func (s *Server) MountGateway(gw GatewayMount) {
	h := gw.Mount(GatewayPrefix, s.consoleAuthority)
	s.bridge.h.Store(&h)
}

// isGatewayPath reports whether p is GatewayPrefix or below it.
func isGatewayPath(p []byte) bool {
	return bytes.HasPrefix(p, gatewayPrefix) && (len(p) == len(gatewayPrefix) || p[len(gatewayPrefix)] == '/')
}

// serveGateway answers a request below GatewayPrefix.
func (s *Server) serveGateway(rc *fasthttp.RequestCtx) {
	h := s.bridge.h.Load()
	if h == nil {
		s.l.Wrap(GatewayPrefix, func(rc *fasthttp.RequestCtx) { s.writeError(rc, errNotFound) })(rc)
		return
	}
	(*h)(rc)
}

// errRoleChanged ends a bridged WebSocket whose user's role has changed
// since it was opened.
var errRoleChanged = errors.New("httpapi: the user's role changed")

// consoleAuthority is the bridge's gwapi.Authority: the session cookie's
// user (401 without a valid session) and the CSRF rule (403
// CSRF_REJECTED), answered in this listener's error shape. Its recheck
// authenticates the session again: a session logged out, expired, or
// whose user's role changed ends a bridged WebSocket.
func (s *Server) consoleAuthority(ctx context.Context, rc *fasthttp.RequestCtx) (gwapi.Caller, func(context.Context) error, bool) {
	var u accounts.User
	var err error
	if _, sent := listener.Bearer(&rc.Request.Header); sent {
		// The bridge is the console's: automation calls the gateway on its
		// own listener with a gateway API key.
		err = &apiError{fasthttp.StatusUnauthorized, codeUnauthorized, "the gateway bridge takes the console's session cookie, not a token: call the gateway's listener with a gateway API key"}
	} else {
		err = s.session(control.ScopeWrite, func(_ context.Context, _ *fasthttp.RequestCtx, su accounts.User) error {
			u = su
			return nil
		})(ctx, rc)
	}
	if err != nil {
		s.writeError(rc, err)
		return gwapi.Caller{}, nil, false
	}
	token := string(rc.Request.Header.Cookie(CookieName)) // a copy: the recheck outlives rc
	recheck := func(ctx context.Context) error {
		now, err := s.users.Authenticate(ctx, token)
		switch {
		case err != nil:
			return err
		case now.ID != u.ID || now.Role != u.Role:
			return errRoleChanged
		}
		return nil
	}
	admin := u.Role == accounts.RoleAdmin
	if admin && rc.IsGet() && string(rc.QueryArgs().Peek("view")) == "all" {
		// An admin's read of every user's data (the agents page's "every
		// user" view): a trusted caller acting for no user, as the
		// gateway's own token does. Reads only: a change is always made
		// as the admin's own user.
		return gwapi.ConsoleCaller("", true), recheck, true
	}
	return gwapi.ConsoleCaller(u.ID.String(), admin), recheck, true
}
