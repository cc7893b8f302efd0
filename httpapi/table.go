package httpapi

import (
	"context"
	"reflect"

	"github.com/valyala/fasthttp"

	"gatehouse/actors/accounts"
	"gatehouse/actors/control"
	"gatehouse/httpapi/console"
)

// authKind is who may call a route.
type authKind uint8

const (
	// authPublic: no credentials (login, /health, the docs).
	authPublic authKind = iota
	// authUser: a session cookie or an access token; the caller's own
	// resources (an admin's reach further, see actsAsAdmin).
	authUser
	// authAdmin: an admin's session, or an admin's token with the admin
	// scope.
	authAdmin
	// authKey: an API key (X-API-Key or Authorization: Bearer svc_live_…).
	authKey
)

// route declares one endpoint of :8080, once: the router (apiRoutes) and
// the OpenAPI document (openapi.go) are both built from the table below,
// so a route cannot be served without being documented.
type route struct {
	method, path string
	auth         authKind
	// scope is the least token scope of an authUser route; "" derives it:
	// read for GET, write for the rest.
	scope control.Scope
	// tag groups the route in the docs; summary is its line there and
	// desc its longer text.
	tag, summary, desc string
	// query lists the query parameters.
	query []param
	// in is the JSON request body's type (nil: none); out the success
	// body's (nil: none, or content).
	in, out reflect.Type
	// content is the media type of a success body that is not JSON.
	content string
	// status is the success status (0: 200).
	status int
	// errs are the documented error statuses (authentication's are added
	// by auth kind).
	errs []int
	// limitHeaders: the success answer carries the rate-limit headers.
	limitHeaders bool
	// hot: served by wrapHot (no buffered body, no per-request deadline).
	hot bool
	// h is the handler of authPublic and authKey routes, uh of authUser
	// and authAdmin ones.
	h  handlerFunc
	uh userHandler
}

// param is one query parameter.
type param struct {
	name, desc string
	schema     map[string]any
}

func (rt *route) needScope() control.Scope {
	switch {
	case rt.scope != "":
		return rt.scope
	case rt.method == fasthttp.MethodGet:
		return control.ScopeRead
	}
	return control.ScopeWrite
}

func (rt *route) successStatus() int {
	if rt.status == 0 {
		return fasthttp.StatusOK
	}
	return rt.status
}

func typ[T any]() reflect.Type { return reflect.TypeFor[T]() }

// Documented request bodies: the handlers decode json.RawMessage fields
// to name the field of a wrongly typed value; these are the shapes.
type (
	loginIn struct {
		Email    string `json:"email"`
		Password string `json:"password"`
	}
	userIn struct {
		Email         string         `json:"email"`
		Password      string         `json:"password"`
		Role          *accounts.Role `json:"role,omitempty"`
		Plan          *accounts.Plan `json:"plan,omitempty"`
		LicenseActive *bool          `json:"licenseActive,omitempty"`
	}
	userPatchIn struct {
		Role          *accounts.Role `json:"role,omitempty"`
		Plan          *accounts.Plan `json:"plan,omitempty"`
		LicenseActive *bool          `json:"licenseActive,omitempty"`
		Password      *string        `json:"password,omitempty"`
		KeyRateLimit  *int64         `json:"keyRateLimit,omitempty"`
	}
	keyIn struct {
		Name      string   `json:"name"`
		ExpiresAt *isoTime `json:"expiresAt,omitempty"`
		Services  []string `json:"services,omitempty"`
	}
	keyPatchIn struct {
		Name      *string  `json:"name,omitempty"`
		RateLimit *int64   `json:"rateLimit,omitempty"`
		ExpiresAt *isoTime `json:"expiresAt,omitempty"`
		Services  []string `json:"services,omitempty"`
	}
	tokenIn struct {
		Name      string          `json:"name"`
		Scopes    []control.Scope `json:"scopes"`
		ExpiresAt *isoTime        `json:"expiresAt,omitempty"`
		UserID    *string         `json:"userId,omitempty"`
	}
	serviceIn struct {
		Name        string            `json:"name"`
		Upstream    string            `json:"upstream"`
		Headers     map[string]string `json:"headers,omitempty"`
		TimeoutMs   *int64            `json:"timeoutMs,omitempty"`
		MaxConns    *int              `json:"maxConns,omitempty"`
		Enabled     *bool             `json:"enabled,omitempty"`
		Description *string           `json:"description,omitempty"`
	}
	servicePutIn struct {
		Upstream    string            `json:"upstream"`
		Headers     map[string]string `json:"headers,omitempty"`
		TimeoutMs   *int64            `json:"timeoutMs,omitempty"`
		MaxConns    *int              `json:"maxConns,omitempty"`
		Enabled     *bool             `json:"enabled,omitempty"`
		Description *string           `json:"description,omitempty"`
	}
)

// proxyMethods are the methods the proxy documents (it forwards any).
var proxyMethods = []string{
	fasthttp.MethodGet, fasthttp.MethodPost, fasthttp.MethodPut, fasthttp.MethodPatch, fasthttp.MethodDelete,
}

// buildRoutes is the route table of :8080.
func (s *Server) buildRoutes() []route {
	get, post, put, patch, del := fasthttp.MethodGet, fasthttp.MethodPost, fasthttp.MethodPut, fasthttp.MethodPatch, fasthttp.MethodDelete
	const (
		bad, unauth, forbidden, notFound, conflict, tooLarge, limited, unavail = 400, 401, 403, 404, 409, 413, 429, 503
	)
	metrics := s.metricsHandler()
	viewAsParam := param{"viewAs", "another user's id (admin only)", map[string]any{"type": "string", "format": "uuid"}}
	rs := []route{
		{method: get, path: "/health", auth: authPublic, tag: "system", summary: "Liveness: 503 once the write-ahead log failed, or while not a cluster member in good standing",
			desc: "In cluster mode the answer carries `cluster: {node, member}`; `member` is false, with a 503, while the node holds no valid etcd lease.",
			out:  typ[healthBody](), errs: []int{unavail}, h: s.health},
		{method: fasthttp.MethodHead, path: "/health", auth: authPublic, tag: "system", summary: "Liveness, as GET without the body",
			errs: []int{unavail}, h: s.health},
		{method: get, path: "/metrics", auth: authAdmin, tag: "system", summary: "Prometheus metrics (admins; scrapers use the metrics listener)",
			content: "text/plain; version=0.0.4", uh: func(ctx context.Context, rc *fasthttp.RequestCtx, _ accounts.User) error { return metrics(ctx, rc) }},
		{method: get, path: "/api/openapi.json", auth: authPublic, tag: "system", summary: "This OpenAPI 3.1 document",
			content: "application/json", h: s.openAPIDoc},
		{method: get, path: "/api/docs", auth: authPublic, tag: "system", summary: "The interactive API viewer (HTML)",
			content: "text/html", h: s.docsPage},
		{method: get, path: "/api/docs/assets/{file}", auth: authPublic, tag: "system", summary: "The viewer's assets",
			content: "application/octet-stream", errs: []int{notFound}, h: s.docsAsset},

		{method: post, path: "/api/auth/login", auth: authPublic, tag: "auth", summary: "Log in: sets the session cookie",
			in: typ[loginIn](), out: typ[sessionUserBody](), errs: []int{bad, unauth, forbidden, limited, unavail}, h: s.login},
		{method: post, path: "/api/auth/logout", auth: authPublic, tag: "auth", summary: "Log out (idempotent)",
			out: typ[successBody](), errs: []int{forbidden}, h: s.logout},
		{method: post, path: "/api/auth/logout-all", auth: authUser, tag: "auth", summary: "End every session of the caller",
			desc: "Also revokes every access token of the caller (and the tokens those made), as a new password, role or licence does.",
			out:  typ[successBody](), uh: s.logoutAll},
		{method: get, path: "/api/auth/me", auth: authUser, tag: "auth", summary: "The caller",
			out: typ[sessionUserBody](), uh: s.me},

		{method: post, path: "/api/users", auth: authAdmin, tag: "users", summary: "Create a user", status: 201,
			in: typ[userIn](), out: typ[userView](), errs: []int{bad, conflict}, uh: s.createUser},
		{method: get, path: "/api/users", auth: authAdmin, tag: "users", summary: "List users",
			out: typ[usersBody](), uh: s.listUsers},
		{method: patch, path: "/api/users/{id}", auth: authAdmin, tag: "users", summary: "Change a user's plan, license, role, password or key limit",
			in: typ[userPatchIn](), out: typ[userView](), errs: []int{bad, notFound}, uh: s.updateUser},

		{method: post, path: "/api/keys", auth: authUser, tag: "keys", summary: "Create an API key (the full key is answered once)", status: 201,
			desc: "`services` limits the key to those services (403 SERVICE_NOT_ALLOWED for the others); without it the key reaches every service.",
			in:   typ[keyIn](), out: typ[createdKeyBody](), errs: []int{bad, forbidden}, uh: s.createKey},
		{method: get, path: "/api/keys", auth: authUser, tag: "keys", summary: "List the caller's keys, newest first",
			query: []param{viewAsParam}, out: typ[keysBody](), errs: []int{bad, forbidden}, uh: s.listKeys},
		{method: post, path: "/api/keys/validate", auth: authKey, tag: "keys", summary: "Validate a key (does not consume its limit)",
			out: typ[validateBody](), errs: []int{unauth, unavail}, hot: true, h: func(ctx context.Context, rc *fasthttp.RequestCtx) error {
				// validate is a hot path like the proxy: no per-request
				// deadline, and its (meaningless) body is settled rather
				// than buffered.
				settleUnreadBody(rc)
				return s.validateKey(ctx, rc)
			}},
		{method: get, path: "/api/keys/{id}", auth: authUser, tag: "keys", summary: "Get a key",
			out: typ[keyBody](), errs: []int{notFound}, uh: s.getKey},
		{method: del, path: "/api/keys/{id}", auth: authUser, tag: "keys", summary: "Delete a key",
			out: typ[successBody](), errs: []int{notFound}, uh: s.deleteKey},
		{method: patch, path: "/api/keys/{id}", auth: authAdmin, tag: "keys", summary: "Change a key's name, rate limit, expiry or services",
			desc: "A `rateLimit` below what the owner's new keys get also becomes the owner's `keyRateLimit` (their later keys get it); a higher one is this key's alone.",
			in:   typ[keyPatchIn](), out: typ[keyBody](), errs: []int{bad, notFound}, uh: s.updateKey},
		{method: post, path: "/api/keys/{id}/rotate", auth: authUser, tag: "keys", summary: "Rotate a key (the old secret stays valid for the grace period)",
			out: typ[rotatedKeyBody](), errs: []int{bad, notFound}, uh: s.rotateKey},
		{method: post, path: "/api/keys/{id}/revoke", auth: authUser, tag: "keys", summary: "Revoke a key (invalid at once)",
			out: typ[successBody](), errs: []int{notFound}, uh: s.revokeKey},
		{method: get, path: "/api/keys/{id}/usage", auth: authUser, tag: "keys", summary: "Daily usage and the rate-limit window",
			query: []param{{"days", "1-30, default 7", map[string]any{"type": "integer", "minimum": 1, "maximum": 30, "default": 7}}},
			out:   typ[usageBody](), errs: []int{bad, notFound}, uh: s.keyUsage},

		{method: post, path: "/api/tokens", auth: authUser, tag: "tokens", summary: "Create an access token (svc_pat_…, answered once)", status: 201,
			desc: "Scopes never exceed the user's role (`admin` is for admins), nor, when the request itself uses a token, that token's scopes; such a token also expires no later than the token used (its expiry when `expiresAt` is absent) and is revoked with it. An admin may set `userId` to create one for another user.",
			in:   typ[tokenIn](), out: typ[tokenCreatedBody](), errs: []int{bad, forbidden, notFound}, uh: s.createToken},
		{method: get, path: "/api/tokens", auth: authUser, tag: "tokens", summary: "List the caller's access tokens",
			query: []param{viewAsParam}, out: typ[tokensBody](), errs: []int{bad, forbidden}, uh: s.listTokens},
		{method: del, path: "/api/tokens/{id}", auth: authUser, tag: "tokens", summary: "Revoke an access token and the tokens made with it (they fail on their next request)",
			out: typ[successBody](), errs: []int{notFound}, uh: s.revokeToken},

		{method: get, path: "/api/services", auth: authAdmin, tag: "services", summary: "List the proxied services (config file's and the API's)",
			out: typ[servicesBody](), uh: s.listServices},
		{method: post, path: "/api/services", auth: authAdmin, tag: "services", summary: "Create a service (takes effect on the next proxied request)", status: 201,
			desc: "`upstream` may not be a link-local address (169.254.0.0/16, fe80::/10: cloud metadata), nor resolve to one when dialled, unless the server allows it (`server.services_allow_link_local`).",
			in:   typ[serviceIn](), out: typ[serviceBody](), errs: []int{bad, conflict}, uh: s.createService},
		{method: get, path: "/api/services/{name}", auth: authAdmin, tag: "services", summary: "Get a service (header values masked)",
			out: typ[serviceBody](), errs: []int{notFound}, uh: s.getService},
		{method: put, path: "/api/services/{name}", auth: authAdmin, tag: "services", summary: "Replace a service (headers absent: kept)",
			desc: "A config-file service is read-only: 409 SERVICE_READ_ONLY.",
			in:   typ[servicePutIn](), out: typ[serviceBody](), errs: []int{bad, notFound, conflict}, uh: s.updateService},
		{method: del, path: "/api/services/{name}", auth: authAdmin, tag: "services", summary: "Delete a service (requests in flight finish on it)",
			desc: "A config-file service is read-only: 409 SERVICE_READ_ONLY.",
			out:  typ[successBody](), errs: []int{notFound, conflict}, uh: s.deleteService},

		{method: get, path: "/api/cluster", auth: authAdmin, tag: "cluster", summary: "This node, the cluster's members and every shard's owner",
			desc: "Cluster mode only (404 NOT_FOUND on a single node). `members` are the nodes etcd lists (alive) and this node always, alive only while it holds a valid etcd lease (its address is \"\" once etcd dropped it); `shards` are all virtual shards with their owner and epoch (\"\" and 0 while unowned), as this node last heard from etcd.",
			out:  typ[clusterBody](), errs: []int{notFound}, uh: s.getCluster},
		{method: get, path: "/api/cluster/keys/{id}", auth: authAdmin, tag: "cluster", summary: "The shard of a key id and its owner",
			desc: "Cluster mode only (404 NOT_FOUND on a single node). The shard is a function of the id: any well-formed key id answers, whether or not the key exists. A malformed id is 400 VALIDATION_ERROR.",
			out:  typ[clusterKeyBody](), errs: []int{bad, notFound}, uh: s.getClusterKey},

		{method: get, path: "/", auth: authPublic, tag: "console", summary: "Redirects to the console", status: 302, h: toConsole},
		{method: fasthttp.MethodHead, path: "/", auth: authPublic, tag: "console", summary: "Redirects to the console", status: 302, h: toConsole},
		{method: get, path: routeConsole, auth: authPublic, tag: "console", summary: "The web console's page and assets",
			content: "text/html", errs: []int{notFound}, h: s.consoleHandler()},
	}
	for _, m := range proxyMethods {
		rs = append(rs, route{method: m, path: routeProxy, auth: authKey, tag: "proxy",
			summary: "Proxy to {service}'s /v1/{rest} with an API key",
			desc:    "Checked in the order path (400), service (404, 503 disabled), body size (413), key (401), rate limit (429), the key's services (403 SERVICE_NOT_ALLOWED); the upstream's answer is relayed with the rate-limit headers.",
			content: "*/*", limitHeaders: true, errs: []int{bad, unauth, forbidden, notFound, tooLarge, limited, 502, unavail, 504}, hot: true, h: s.proxy})
	}
	// The console's bridge to the agent gateway (gatewaybridge.go):
	// dispatched on its prefix; declared here for the document.
	for _, m := range []string{get, post, put, patch, del} {
		rs = append(rs, route{method: m, path: routeGatewayBridge, auth: authUser, tag: "gateway bridge",
			summary: "The agent gateway's /v1/{rest} operations for the session's user",
			desc:    "The console's way to the agent gateway: the session cookie only (a token answers 401; automation calls the gateway's own listener with a gateway API key), under the cookie CSRF rule. The console user's id is their gateway user id; an admin acts as a trusted backend for their own user. The answers are the gateway's, described by its own document (/docs/openapi.json on the gateway's listener).",
			content: "application/json", errs: []int{unauth, forbidden, notFound}})
	}
	rs = append(rs, route{method: get, path: GatewayPrefix + "/ws", auth: authUser, tag: "gateway bridge",
		summary: "The agent gateway's WebSocket RPC for the session's user",
		desc:    "Upgrades to the gateway's WebSocket RPC, authenticated by the session cookie (no connect frame); closed when the session ends or the user's role changes.",
		status:  101, errs: []int{unauth, forbidden}})
	return rs
}

// routeGatewayBridge is the bridge's operations, as declared.
const routeGatewayBridge = GatewayPrefix + "/v1/{rest:*}"

// consoleHandler serves the console's files (GET and HEAD).
func (s *Server) consoleHandler() handlerFunc {
	cons := console.New()
	return func(_ context.Context, rc *fasthttp.RequestCtx) error {
		switch {
		case !rc.IsGet() && !rc.IsHead():
			return errMethodNotAllowed
		case !cons.Serve(rc):
			return errNotFound
		}
		return nil
	}
}

// toConsole redirects to the console with a relative Location: behind TLS
// or a proxy an absolute one would name the wrong scheme or host
// (fasthttp's Redirect builds one).
func toConsole(_ context.Context, rc *fasthttp.RequestCtx) error {
	rc.Response.Header.Set(fasthttp.HeaderLocation, console.Root)
	rc.SetStatusCode(fasthttp.StatusFound)
	return nil
}
