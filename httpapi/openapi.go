package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"html/template"
	"path"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"gatehouse/httpapi/gateway"
)

// The OpenAPI 3.1 document of :8080, generated from the route table
// (table.go) and the Go types of the bodies, and its viewer at /api/docs
// (the gateway's vendored swagger-ui).

var (
	isoTimeType = reflect.TypeFor[isoTime]()
	uuidType    = reflect.TypeFor[uuid.UUID]()
)

// schemaGen turns Go types into JSON Schema 2020-12, collecting named
// structs under components.schemas.
type schemaGen struct{ defs map[string]any }

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	switch t {
	case isoTimeType:
		return map[string]any{"type": []any{"string", "null"}, "format": "date-time"}
	case uuidType:
		return map[string]any{"type": "string", "format": "uuid"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		s := g.schema(t.Elem())
		if _, ref := s["$ref"]; ref {
			return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
		}
		if ty, ok := s["type"].(string); ok {
			s["type"] = []any{ty, "null"}
		}
		return s
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.String:
		s := map[string]any{"type": "string"}
		if e := enums[t.Name()]; e != nil {
			s["enum"] = e
		}
		return s
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Struct:
		return g.ref(t)
	}
	return map[string]any{}
}

// enums are the values of the string types that have a fixed set.
var enums = map[string][]any{
	"Role":  {"user", "admin"},
	"Plan":  {"standard", "premium"},
	"Scope": {"read", "write", "admin"},
}

// schemaNames renames the Go types of the document's schemas (the
// generated clients' type names).
var schemaNames = map[string]string{
	"healthBody": "Health", "sessionUserBody": "SessionUserBody", "sessionUserView": "SessionUser", "userView": "User",
	"usersBody": "UserList", "userIn": "UserCreate", "userPatchIn": "UserPatch", "loginIn": "Login",
	"keyIn": "KeyCreate", "keyPatchIn": "KeyPatch", "createdKeyBody": "KeyCreated", "keysBody": "KeyList",
	"keyListView": "KeyListItem", "keyBody": "KeyBody", "keyDetailView": "Key", "rotatedKeyBody": "KeyRotated",
	"successBody": "Success", "usageBody": "Usage", "dayView": "DailyUsage", "limitView": "RateLimitStatus",
	"validateBody": "ValidateResult", "tokenIn": "TokenCreate", "tokenCreatedBody": "TokenCreated",
	"tokensBody": "TokenList", "tokenView": "Token", "serviceIn": "ServiceCreate", "servicePutIn": "ServiceReplace",
	"servicesBody": "ServiceList", "serviceBody": "ServiceBody", "serviceView": "Service",
	"errorBody": "Error", "rateLimitBody": "RateLimitError",
	"clusterBody": "Cluster", "clusterMemberView": "ClusterMember", "clusterShardView": "ClusterShard",
	"clusterKeyBody": "ClusterKey", "clusterHealth": "HealthCluster",
}

func (g *schemaGen) ref(t reflect.Type) map[string]any {
	name := schemaNames[t.Name()]
	if name == "" {
		name = t.Name()
	}
	if _, ok := g.defs[name]; !ok {
		g.defs[name] = nil // recursion guard
		props, req := map[string]any{}, []string{}
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if !f.IsExported() || tag == "-" {
				continue
			}
			n, opts, _ := strings.Cut(tag, ",")
			if n == "" {
				n = f.Name
			}
			props[n] = g.schema(f.Type)
			if !strings.Contains(opts, "omitempty") {
				req = append(req, n)
			}
		}
		def := map[string]any{"type": "object", "properties": props}
		if len(req) > 0 {
			def["required"] = req
		}
		g.defs[name] = def
	}
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

var pathParam = regexp.MustCompile(`\{([a-zA-Z]+)(?::\*)?\}`)

// specPath is a router pattern as an OpenAPI path ({rest:*} → {rest}).
func specPath(p string) string { return strings.ReplaceAll(p, ":*}", "}") }

// Reusable responses of components.responses, by status.
var errResponses = map[int]string{
	400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
	413: "TooLarge", 429: "RateLimited", 502: "BadGateway", 503: "Unavailable", 504: "GatewayTimeout",
}

// openAPI renders the document for s.routes.
func (s *Server) openAPI() ([]byte, error) {
	g := &schemaGen{defs: map[string]any{}}
	paths := map[string]map[string]any{}
	for i := range s.routes {
		rt := &s.routes[i]
		op := map[string]any{
			"operationId": operationID(rt), "summary": rt.summary, "tags": []string{rt.tag},
		}
		if rt.desc != "" {
			op["description"] = rt.desc
		}
		var ps []any
		for _, m := range pathParam.FindAllStringSubmatch(rt.path, -1) {
			sch := map[string]any{"type": "string"}
			if m[1] == "id" {
				sch["format"] = "uuid"
			}
			ps = append(ps, map[string]any{"name": m[1], "in": "path", "required": true, "schema": sch})
		}
		for _, q := range rt.query {
			ps = append(ps, map[string]any{"name": q.name, "in": "query", "required": false, "description": q.desc, "schema": q.schema})
		}
		if len(ps) > 0 {
			op["parameters"] = ps
		}
		errs := append([]int(nil), rt.errs...)
		switch rt.auth {
		case authPublic:
			op["security"] = []any{}
		case authUser, authAdmin:
			op["security"] = []any{map[string]any{"sessionCookie": []string{}}, map[string]any{"accessToken": []string{}}}
			scope := string(rt.needScope())
			if rt.auth == authAdmin {
				scope = "admin"
				op["x-admin-only"] = true
			}
			op["x-required-scope"] = scope
			errs = append(errs, 401, 403, 429, 503)
		case authKey:
			op["security"] = []any{map[string]any{"apiKey": []string{}}, map[string]any{"apiKeyBearer": []string{}}}
		}
		if rt.in != nil {
			errs = append(errs, 400, 413)
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				"application/json": map[string]any{"schema": g.schema(rt.in)},
			}}
		}
		resps := map[string]any{}
		ok := map[string]any{"description": fasthttp.StatusMessage(rt.successStatus())}
		switch {
		case rt.out != nil:
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": g.schema(rt.out)}}
		case rt.content != "":
			ok["content"] = map[string]any{rt.content: map[string]any{"schema": map[string]any{"type": "string"}}}
		}
		if rt.successStatus() == 302 {
			ok["headers"] = map[string]any{"Location": map[string]any{"schema": map[string]any{"type": "string"}}}
		}
		if rt.limitHeaders {
			ok["headers"] = map[string]any{
				"X-RateLimit-Limit":     map[string]any{"$ref": "#/components/headers/X-RateLimit-Limit"},
				"X-RateLimit-Remaining": map[string]any{"$ref": "#/components/headers/X-RateLimit-Remaining"},
				"X-RateLimit-Reset":     map[string]any{"$ref": "#/components/headers/X-RateLimit-Reset"},
			}
		}
		resps[strconv.Itoa(rt.successStatus())] = ok
		for _, st := range errs {
			name := errResponses[st]
			if rt.path == "/api/keys/validate" && st == 401 {
				name = "ValidateInvalid"
			}
			resps[strconv.Itoa(st)] = map[string]any{"$ref": "#/components/responses/" + name}
		}
		op["responses"] = resps
		p := specPath(rt.path)
		if paths[p] == nil {
			paths[p] = map[string]any{}
		}
		paths[p][strings.ToLower(rt.method)] = op
	}
	errSchema := g.schema(typ[errorBody]())
	limitSchema := g.schema(typ[rateLimitBody]())
	errResp := func(desc string) map[string]any {
		return map[string]any{"description": desc, "content": map[string]any{"application/json": map[string]any{"schema": errSchema}}}
	}
	responses := map[string]any{
		"BadRequest":     errResp("Invalid input: VALIDATION_ERROR, INVALID_JSON, INVALID_PATH, BAD_REQUEST, KEY_INACTIVE"),
		"Unauthorized":   errResp("No valid credentials: UNAUTHORIZED, INVALID_CREDENTIALS, INVALID_TOKEN, TOKEN_EXPIRED, MISSING_API_KEY, INVALID_API_KEY, KEY_EXPIRED, KEY_REVOKED"),
		"Forbidden":      errResp("Not allowed: FORBIDDEN, INSUFFICIENT_SCOPE, CSRF_REJECTED, LICENSE_REQUIRED, KEY_LIMIT_REACHED, SERVICE_NOT_ALLOWED"),
		"NotFound":       errResp("Not found: NOT_FOUND, KEY_NOT_FOUND, TOKEN_NOT_FOUND, SERVICE_NOT_FOUND, UNKNOWN_SERVICE"),
		"Conflict":       errResp("Conflict: EMAIL_TAKEN, SERVICE_EXISTS, SERVICE_READ_ONLY"),
		"TooLarge":       errResp("PAYLOAD_TOO_LARGE"),
		"BadGateway":     errResp("UPSTREAM_UNAVAILABLE"),
		"Unavailable":    errResp("UNAVAILABLE, SERVICE_DISABLED (Retry-After may be set)"),
		"GatewayTimeout": errResp("UPSTREAM_TIMEOUT"),
		"RateLimited": map[string]any{
			"description": "RATE_LIMIT_EXCEEDED: a key's limit, or too many failed logins or bad access tokens",
			"headers": map[string]any{
				"Retry-After":           map[string]any{"description": "seconds to wait", "schema": map[string]any{"type": "integer"}},
				"X-RateLimit-Limit":     map[string]any{"$ref": "#/components/headers/X-RateLimit-Limit"},
				"X-RateLimit-Remaining": map[string]any{"$ref": "#/components/headers/X-RateLimit-Remaining"},
				"X-RateLimit-Reset":     map[string]any{"$ref": "#/components/headers/X-RateLimit-Reset"},
			},
			"content": map[string]any{"application/json": map[string]any{"schema": limitSchema}},
		},
		"ValidateInvalid": map[string]any{
			"description": "The key is not valid: {valid: false, error}",
			"content":     map[string]any{"application/json": map[string]any{"schema": g.schema(typ[validateBody]())}},
		},
	}
	intHeader := func(desc string) map[string]any {
		return map[string]any{"description": desc, "schema": map[string]any{"type": "integer"}}
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title": "gatehouse key service", "version": "1",
			"description": "The key-management service and its proxy: API keys (svc_live_…), users, sessions, access tokens (svc_pat_…) and proxied services. " +
				"Management routes take the session cookie or `Authorization: Bearer svc_pat_…` within the token's scopes (x-required-scope); " +
				"the proxy and validate take an API key. Errors are {error, message}; a 429 is {error, retryAfter}.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas":   g.defs,
			"responses": responses,
			"headers": map[string]any{
				"X-RateLimit-Limit":     intHeader("requests per hour"),
				"X-RateLimit-Remaining": intHeader("requests left in the sliding window"),
				"X-RateLimit-Reset":     intHeader("Unix time when the window frees a request"),
			},
			"securitySchemes": map[string]any{
				"sessionCookie": map[string]any{"type": "apiKey", "in": "cookie", "name": CookieName, "description": "set by POST /api/auth/login"},
				"accessToken":   map[string]any{"type": "http", "scheme": "bearer", "bearerFormat": "svc_pat_…", "description": "an access token (POST /api/tokens), within its scopes"},
				"apiKey":        map[string]any{"type": "apiKey", "in": "header", "name": "X-API-Key", "description": "an API key (svc_live_…)"},
				"apiKeyBearer":  map[string]any{"type": "http", "scheme": "bearer", "bearerFormat": "svc_live_…", "description": "an API key as a bearer token"},
			},
		},
	}
	return json.MarshalIndent(doc, "", "  ")
}

func operationID(rt *route) string {
	var sb strings.Builder
	sb.WriteString(strings.ToLower(rt.method))
	p := specPath(rt.path)
	if p == "/" {
		return "getRoot"
	}
	for seg := range strings.SplitSeq(p, "/") {
		seg = strings.Trim(seg, "{}")
		for part := range strings.FieldsFuncSeq(seg, func(r rune) bool { return r == '-' || r == '.' || r == '_' }) {
			sb.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return sb.String()
}

// openAPIDoc: GET /api/openapi.json.
func (s *Server) openAPIDoc(_ context.Context, rc *fasthttp.RequestCtx) error {
	rc.SetStatusCode(fasthttp.StatusOK)
	rc.SetContentType("application/json")
	rc.SetBody(s.spec)
	return nil
}

var docsPageHTML = func() []byte {
	var b bytes.Buffer
	template.Must(template.New("docs").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gatehouse key service API</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/api/docs/assets/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/api/docs/assets/swagger-ui-bundle.js"></script>
<script src="/api/docs/assets/api-init.js"></script>
</body></html>
`)).Execute(&b, nil)
	return b.Bytes()
}()

// docsInitJS starts the viewer on this listener's document: a file, so
// that the page needs no inline script under its Content-Security-Policy.
const docsInitJS = `// gatehouse: the key service's API viewer.
window.ui = SwaggerUIBundle({
  url: '/api/openapi.json',
  dom_id: '#swagger-ui',
  docExpansion: 'list',
  deepLinking: true,
});
`

// docsPage: GET /api/docs, the viewer.
func (s *Server) docsPage(_ context.Context, rc *fasthttp.RequestCtx) error {
	rc.Response.Header.Set("Cache-Control", "no-store")
	rc.Response.Header.Set("Content-Security-Policy", gateway.DocsCSP)
	rc.Response.Header.Set("Referrer-Policy", "no-referrer")
	rc.SetStatusCode(fasthttp.StatusOK)
	rc.SetContentType("text/html; charset=utf-8")
	rc.SetBody(docsPageHTML)
	return nil
}

// docsAsset: GET /api/docs/assets/{file}: the gateway's vendored viewer,
// and our init script.
func (s *Server) docsAsset(_ context.Context, rc *fasthttp.RequestCtx) error {
	name, _ := rc.UserValue("file").(string)
	if name == "api-init.js" {
		rc.SetContentType("text/javascript; charset=utf-8")
		rc.SetBodyString(docsInitJS)
		return nil
	}
	if name == "" || name != path.Base(name) || name[0] == '.' || name == "gatehouse-init.js" {
		return errNotFound
	}
	ctype, enc, ok, err := gateway.DocsAsset(name)
	if err != nil {
		return err
	}
	if !ok {
		return errNotFound
	}
	rc.Response.Header.Set("Cache-Control", "public, max-age=3600")
	rc.SetContentType(ctype)
	body, coding := enc.For(rc.Request.Header.Peek(fasthttp.HeaderAcceptEncoding))
	rc.Response.Header.Set(fasthttp.HeaderVary, fasthttp.HeaderAcceptEncoding)
	if coding != "" {
		rc.Response.Header.Set(fasthttp.HeaderContentEncoding, coding)
	}
	rc.Response.SetBodyRaw(body) // shared and never written: no copy
	return nil
}

// documentedRoutes lists "METHOD path" of every declared route, sorted
// (for tests and the route-coverage check).
func (s *Server) documentedRoutes() []string {
	out := make([]string, 0, len(s.routes))
	for _, rt := range s.routes {
		out = append(out, rt.method+" "+rt.path)
	}
	sort.Strings(out)
	return out
}
