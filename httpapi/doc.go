// Package httpapi is gatehouse's HTTP layer: the key-management API, the
// authenticating and rate-limiting proxy, /health and /metrics, served by
// fasthttp and fasthttp/router. It turns requests into calls on small
// consumer-side interfaces: KeyStore and KeyAuthorizer (together
// KeyService, satisfied by the actor system's keys) and UserService
// (satisfied by actors/accounts), and is the only place where errors become HTTP statuses
// (errors.go). The fasthttp plumbing it shares with the agent gateway
// (httpapi/gateway) is in httpapi/listener: server settings, the route
// wrapper (metrics, panic guard), the exact-match router, JSON, the
// Bearer parser and /metrics.
//
// # Usage
//
//	cfg := httpapi.DefaultConfig()
//	cfg.Services = map[string]httpapi.Service{
//		"llm": {Upstream: "https://llm.internal:8443/api", Timeout: 30 * time.Second},
//	}
//	srv, err := httpapi.New(cfg, system, system, lg, reg, reg)
//	if err != nil {
//		return err
//	}
//	go srv.Serve(ln)        // blocks until Shutdown
//	defer srv.Shutdown(ctx) // drains in-flight requests
//
// NewHealthServer serves only /health and /metrics, for a second listener,
// and with WithPprof net/http/pprof's /debug/pprof/ (cmd: the metrics
// listener only).
//
// WithCluster(node) (a *cluster.Node, seen through the ClusterView
// interface) turns on cluster mode's operator routes, GET /api/cluster
// and GET /api/cluster/keys/{id}, and makes /health (of New's server and
// NewHealthServer's alike, given the same option) answer 503 while the
// node is not a member in good standing (no valid etcd lease), so that a
// load balancer takes it out. Without it both routes answer 404
// NOT_FOUND ("cluster mode is off") and /health is as on a single node.
//
// # Concurrency and ownership
//
// A Server is safe for concurrent use. Each request gets its own context,
// context.WithTimeout(context.Background(), Config.RequestTimeout), for its
// calls into the services, except on the two hot paths, the proxy and
// validate: they pass context.Background(), because Authorize and Validate
// bound their own wait with a shared watchdog, and a timer per request
// would be those paths' largest cost. No *fasthttp.RequestCtx, and no byte
// slice of one, outlives its handler: strings handed to the services are
// copies, and the one exception is the key passed to Authorize and
// Validate, which those methods must not retain. A streamed answer is
// written by the server after the handler returns, from the upstream's
// answer, which the stream owns and releases (proxybody.go). Upstream
// exchanges are bounded by Service.Timeout. Every upstream has one
// keep-alive pool of httpapi/relay, built in New: the upstream request is
// the client's raw header lines, edited (proxyreq.go), and the answer's
// headers are copied from the relay's read buffer. A panic in a handler is
// logged with its stack and answered 500; it is a bug, never control flow.
//
// Request bodies are read as streams (fasthttp's StreamRequestBody); the
// route wrappers read them whole (up to MaxBodyBytes) for the management
// API, and the proxy streams them on. A body left unread, for instance
// by a 401, closes its connection after the answer unless it is short
// enough to be skipped (body.go).
//
// # Routes
//
// Every route is declared once in the route table (table.go); the router
// and the OpenAPI 3.1 document (GET /api/openapi.json, viewer at
// /api/docs) are built from it, so a route cannot be served undocumented
// (TestOpenAPIDocument).
//
//	GET    /health                         200 {status:"ok"} | 503 {status:"unavailable",reason} (failed WAL);
//	                                       cluster mode adds cluster:{node,member}, 503 while member is false
//	GET    /metrics                        Prometheus text
//	POST   /api/auth/login                 200 {user}, cookie | 400 401 INVALID_CREDENTIALS
//	POST   /api/auth/logout                200 {success}, cookie cleared (also without a session)
//	GET    /api/auth/me                    200 {user} | 401
//	POST   /api/users                 adm  201 user | 400 401 403 409 EMAIL_TAKEN
//	GET    /api/users                 adm  200 {users} | 401 403
//	PATCH  /api/users/{id}            adm  200 user | 400 401 403 404 NOT_FOUND
//	POST   /api/keys                  ses  201 {id,key,name,message} | 400 401 403 LICENSE_REQUIRED 413
//	GET    /api/keys[?viewAs=<uuid>]  ses  200 {keys} newest first | 400 401 403 (viewAs by non-admin)
//	GET    /api/keys/{id}             own  200 {key} | 401 404 KEY_NOT_FOUND
//	DELETE /api/keys/{id}             own  200 {success} | 401 404
//	PATCH  /api/keys/{id}             adm  200 {key} | 400 401 403 404
//	POST   /api/keys/{id}/rotate      own  200 {key,message,gracePeriodHours} | 400 KEY_INACTIVE 401 404
//	POST   /api/keys/{id}/revoke      own  200 {success,message} | 401 404
//	GET    /api/keys/{id}/usage?days= own  200 {dailyUsage,totalUsageCount,rateLimit} | 400 401 404
//	POST   /api/keys/validate         key  200 {valid,userId,rateLimit,isActive} | 401 {valid:false,error}
//	ANY    /api/proxy/{service}/v1/*  key  upstream's answer | 400 404 413 401 429 403 SERVICE_NOT_ALLOWED 502 503 SERVICE_DISABLED 504
//	GET    /api/openapi.json, /api/docs    the OpenAPI document and its viewer, no credentials
//	POST   /api/tokens                ses  201 {id,token,name,scopes,userId,expiresAt,createdAt} | 400 401 403
//	GET    /api/tokens[?viewAs=<uuid>] ses 200 {tokens} newest first | 400 401 403
//	DELETE /api/tokens/{id}           own  200 {success,message} | 401 404 TOKEN_NOT_FOUND
//	GET    /api/services              adm  200 {services} config's (readOnly) and the API's, by name
//	POST   /api/services              adm  201 {service} | 400 401 403 409 SERVICE_EXISTS
//	GET    /api/services/{name}       adm  200 {service} | 401 403 404 SERVICE_NOT_FOUND
//	PUT    /api/services/{name}       adm  200 {service} | 400 401 403 404 409 SERVICE_READ_ONLY
//	DELETE /api/services/{name}       adm  200 {success,message} | 401 403 404 409 SERVICE_READ_ONLY
//	GET    /api/cluster               adm  200 {node,members:[{id,addr,alive}],shards:[{shard,owner,epoch}]} | 401 403 404 (single node)
//	GET    /api/cluster/keys/{id}     adm  200 {keyId,shard,owner,epoch} | 400 VALIDATION_ERROR 401 403 404 (single node)
//	ANY    /api/gateway/v1/*, GET /api/gateway/ws
//	                                  ses  the agent gateway's operations for the session's user (gatewaybridge.go) | 401 403 CSRF_REJECTED, then the gateway's answers
//
// ses: a session cookie, or an access token (Authorization: Bearer
// svc_pat_…) with the read scope for GET and write for the rest (403
// INSUFFICIENT_SCOPE); adm: the session of an admin, or an admin's token
// with the admin scope (403 FORBIDDEN for others); own: the session or
// token of the key's owner or of an admin; another
// user's key, an unknown id and a malformed id all answer 404
// KEY_NOT_FOUND, so nobody learns whether a key exists. key: an API key
// in X-API-Key (preferred) or Authorization: Bearer. Unknown paths answer
// 404 NOT_FOUND and known paths with another method 405
// METHOD_NOT_ALLOWED (with Allow). Paths match exactly: no redirects for
// trailing slashes or case.
//
// # Errors
//
// Error bodies are {error: CODE, message} except the 429, {error,
// retryAfter} with Retry-After, and validate's 401, {valid:false, error}.
//
//	400 VALIDATION_ERROR   a field fails validation; message starts with the field's name
//	400 INVALID_JSON       body is not exactly one JSON object
//	400 INVALID_PATH       proxy path is not /api/proxy/{service}/v1/..., or has a dot segment
//	400 KEY_INACTIVE       rotate of a revoked key
//	400 BAD_REQUEST        fasthttp could not parse the request, or the client's
//	                       streamed body broke off (a malformed chunk)
//	401 UNAUTHORIZED       no, unknown or expired session
//	401 INVALID_CREDENTIALS wrong email or password
//	401 MISSING_API_KEY / INVALID_API_KEY / KEY_EXPIRED / KEY_REVOKED
//	401 INVALID_TOKEN      unknown, revoked or malformed access token, a
//	                       svc_live_ key or another scheme in Authorization on a management route
//	401 TOKEN_EXPIRED      the access token passed its expiresAt
//	403 INSUFFICIENT_SCOPE the access token lacks the route's scope, or a token
//	                       tries to create a token with more scopes than its own
//	403 SERVICE_NOT_ALLOWED the key is limited to other services (proxy; nothing sent upstream)
//	403 FORBIDDEN          admin only, or viewAs by a non-admin
//	403 LICENSE_REQUIRED   creating a key without an active license
//	403 CSRF_REJECTED      see below
//	404 NOT_FOUND          unknown route or user; the cluster routes on a single node
//	404 KEY_NOT_FOUND      unknown, foreign or malformed key id
//	404 UNKNOWN_SERVICE    proxy service not configured
//	404 TOKEN_NOT_FOUND    unknown, foreign or malformed token id
//	404 SERVICE_NOT_FOUND  no such service (of the API's)
//	405 METHOD_NOT_ALLOWED
//	409 EMAIL_TAKEN
//	409 SERVICE_EXISTS     a service (config's or the API's) has that name
//	409 SERVICE_READ_ONLY  PUT or DELETE of a config-file service
//	413 PAYLOAD_TOO_LARGE  body over MaxBodyBytes (JSON) or MaxProxyBodyBytes (proxy)
//	429 RATE_LIMIT_EXCEEDED {error, retryAfter}; also after too many failed
//	                       logins or bad access tokens from one client
//	502 UPSTREAM_UNAVAILABLE upstream refused, reset or answered garbage
//	503 UNAVAILABLE        the services are shutting down or did not answer in time
//	503 SERVICE_DISABLED   the proxied service is switched off (enabled: false)
//	504 UPSTREAM_TIMEOUT   upstream (or a free connection to it) took over Service.Timeout
//	500 INTERNAL           anything else; logged once, never with secrets
//
// # CSRF
//
// A state-changing request (POST, PUT, PATCH, DELETE) that carries the
// session cookie is refused with 403 CSRF_REJECTED if its Origin header
// (or, lacking one, its Referer) names another host than its Host header
// (default ports ignored; Origin "null" never matches), or if its
// Content-Type is one a cross-site HTML form can send:
// application/x-www-form-urlencoded, multipart/form-data or text/plain.
// Requests without those headers (curl, SDKs) pass. Login has no session
// yet: only its Origin/Referer is checked (against login CSRF), so that
// `curl -d` (a form content type) can log in. The check runs
// before the session is looked up; without a cookie the answer is 401.
// Validate and the proxy authenticate by key, not cookie, and are exempt;
// so are requests with an access token (Authorization: Bearer): a
// browser never adds that header by itself.
//
// # Decisions where the seed is silent
//
//   - Session cookie "gatehouse_session": HttpOnly, SameSite=Lax, Path=/,
//     Secure with Config.SecureCookies, Max-Age until the session expires.
//   - Key names: a JSON string of 1-100 Unicode code points
//     (utf8.RuneCountInString), not only whitespace, no control characters.
//     Names are stored as given, not trimmed.
//   - Body validation failures are 400 VALIDATION_ERROR naming the field;
//     a wrongly typed field is VALIDATION_ERROR too, not INVALID_JSON.
//     Unknown fields are ignored. Errors of the services wrapping
//     actors.ErrInvalidArgument become VALIDATION_ERROR with their text
//     minus the "actors: " noise.
//   - Timestamps are ISO 8601 UTC with whole seconds, 2026-11-22T10:00:00Z,
//     and null when unset. expiresAt accepts any RFC 3339 time after now;
//     in PATCH, null clears the expiry.
//   - PATCH /api/keys/{id}: rateLimit is a JSON integer in 1..10^9 (no
//     fraction or exponent); an empty patch is a VALIDATION_ERROR.
//   - POST /api/users: role defaults to "user", plan to "standard",
//     licenseActive to false. PATCH cannot change the email.
//   - ids in paths must be canonical 36-character UUIDs; viewAs must be one
//     too (400), but a non-admin gets 403 before the value is looked at.
//     viewAs of an unknown user lists nothing.
//   - GET /api/cluster/keys/{id} answers any well-formed key id without
//     looking the key up (the shard is a function of the id), and a
//     malformed id is 400 VALIDATION_ERROR rather than 404: the route is
//     for admins, so there is no key's existence to hide.
//   - usage days: the query must be an integer 1..30; an empty value is 400.
//   - validate of a valid key that is at its rate limit answers valid:true;
//     the limit is not consumed either way.
//   - Revoking a revoked key succeeds (200). Logout without a session
//     succeeds and clears the cookie.
//   - Proxy order of checks: path (400), service (404), body size (413),
//     key (401), limit (429). So only a forwardable request costs quota.
//   - Proxy forwarding: method, query and body unchanged; the raw,
//     still-encoded path suffix /v1/... is appended to the upstream's base
//     path. Dot segments ("." and "..", also as %2e, or behind '\', %2f or
//     %5c) are refused with INVALID_PATH so a key for one service cannot
//     reach outside its base path. Hop-by-hop headers (Connection and the
//     headers it names, Keep-Alive, Proxy-*, TE, Trailer,
//     Transfer-Encoding, Upgrade, Expect), X-API-Key, Authorization, the
//     gatehouse_session cookie, and the client's Forwarded and X-Real-IP
//     (they would name an address nobody checked) are removed;
//     X-Forwarded-For (appended),
//     X-Forwarded-Host, X-Forwarded-Proto, X-Gatehouse-User-Id and
//     X-Gatehouse-Key-Id are set; Service.Headers replace client headers of
//     the same name; Host is the upstream's.
//   - A request admitted by the limiter counts in usage and in the window
//     even if the upstream then fails (502/504): it was admitted before the
//     upstream was contacted, and the upstream may have done the work even
//     when its answer was lost.
//   - X-RateLimit-Limit, -Remaining and -Reset (Unix seconds) come from the
//     limiter's decision and are set on every admitted response (upstream
//     values of those headers are replaced), on the 429 and on 502/504.
//     On a 429, Retry-After and retryAfter equal Reset minus now. The IETF
//     draft headers (draft-ietf-httpapi-ratelimit-headers) go along:
//     RateLimit-Policy: "hourly";q=LIMIT;w=3600 and
//     RateLimit: "hourly";r=REMAINING;t=SECONDS, SECONDS being Reset minus
//     now (Retry-After on a 429).
//   - Bodies: MaxBodyBytes (64 KiB) bounds JSON bodies; MaxProxyBodyBytes
//     (8 MiB) bounds proxied request bodies, by Content-Length before the
//     key is checked, or, for a chunked body, as it streams (413 if the
//     upstream has not answered yet; the request was admitted and counts).
//   - Proxy bodies of known length up to 64 KiB are buffered, in both
//     directions, and keep their Content-Length; longer or chunked ones
//     are streamed as they arrive, the answer flushed after every read so
//     that server-sent events reach the client one by one. An upstream
//     that breaks off a buffered answer is a 502 (504 on a timeout); one
//     that breaks off a streamed answer cuts the client's connection, the
//     only signal left once the status is sent.
//   - Service.Timeout bounds the whole upstream exchange, a streamed
//     answer included: set it above the longest stream (an LLM completion
//     can take minutes). A 504 is possible only before the status is sent.
//     A streamed upload must also arrive within the listener's read
//     timeout (30 s), which fasthttp sets once per request.
package httpapi
