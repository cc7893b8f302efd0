package gateway

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"
)

// The gateway's OpenAPI 3.1 document, generated from the route table
// (routes.go) and the Go types of the operations' inputs and outputs: a
// route cannot be served without appearing here.

// schemaer lets a type with a custom JSON form describe itself.
type schemaer interface{ jsonSchema() map[string]any }

var (
	schemaerType = reflect.TypeFor[schemaer]()
	timeType     = reflect.TypeFor[time.Time]()
	uuidType     = reflect.TypeFor[uuid.UUID]()
	rawType      = reflect.TypeFor[json.RawMessage]()
	noneType     = reflect.TypeFor[None]()
	bodyType     = reflect.TypeFor[Body]()
	streamerType = reflect.TypeFor[streamer]()
)

// schemaGen turns Go types into JSON Schema (2020-12, as OpenAPI 3.1 uses),
// collecting named structs under components.schemas.
type schemaGen struct {
	defs map[string]any
}

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	if t.Implements(schemaerType) {
		return reflect.Zero(t).Interface().(schemaer).jsonSchema()
	}
	switch t {
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case uuidType:
		return map[string]any{"type": "string", "format": "uuid"}
	case rawType:
		return map[string]any{"type": "object"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return map[string]any{"anyOf": []any{g.schema(t.Elem()), map[string]any{"type": "null"}}}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Struct:
		return g.ref(t)
	}
	return map[string]any{}
}

// ref defines struct t under components.schemas once and refers to it;
// an anonymous struct is described in place.
func (g *schemaGen) ref(t reflect.Type) map[string]any {
	name := t.Name()
	if name == "" {
		props, req := map[string]any{}, []string{}
		g.fields(t, props, &req)
		return map[string]any{"type": "object", "properties": props, "required": req}
	}
	if _, ok := g.defs[name]; !ok {
		g.defs[name] = nil // recursion guard
		props, req := map[string]any{}, []string{}
		g.fields(t, props, &req)
		def := map[string]any{"type": "object", "properties": props}
		if len(req) > 0 {
			def["required"] = req
		}
		g.defs[name] = def
	}
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

func (g *schemaGen) fields(t reflect.Type, props map[string]any, req *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			g.fields(f.Type, props, req)
			continue
		}
		if where, _ := paramTag(f); !f.IsExported() || tag == "-" || where != "" {
			continue // path, query and header fields are parameters
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		props[name] = g.schema(f.Type)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			*req = append(*req, name)
		}
	}
}

var pathParam = regexp.MustCompile(`\{([a-zA-Z]+)(?::\*)?\}`)

// specPath is a router pattern as an OpenAPI path ({path:*} → {path}).
func specPath(p string) string { return strings.ReplaceAll(p, ":*}", "}") }

// openAPI renders the document for s.routes.
func (s *Server) openAPI() ([]byte, error) {
	g := &schemaGen{defs: map[string]any{}}
	errRef := map[string]any{"$ref": "#/components/responses/Error"}
	paths := map[string]map[string]any{}
	for i := range s.routes {
		rt := &s.routes[i]
		in, out := rt.Op.types()
		op := map[string]any{
			"operationId": operationID(rt), "summary": rt.Summary, "tags": []string{rt.Tag},
			"parameters": parameters(rt), "responses": map[string]any{}, "x-rpc-method": rt.RPC,
		}
		if rt.Public {
			op["security"] = []any{}
		} else {
			sec := []any{map[string]any{"bearerAuth": []string{}}}
			if rt.QueryToken {
				sec = append(sec, map[string]any{"queryToken": []string{}})
			}
			op["security"] = sec
			op["x-required-scope"] = string(rt.Scope)
			op["description"] = "Needs scope `" + string(rt.Scope) + "` (or the gateway token)."
		}
		switch spec := rt.Op.input(); {
		case spec.body:
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				"application/json": map[string]any{"schema": g.schema(in)},
			}}
		case spec.raw != nil:
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				spec.raw.name: map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}},
			}}
		}
		ok := map[string]any{"description": fasthttp.StatusMessage(rt.status())}
		if content := g.content(rt, out); len(content) > 0 {
			ok["content"] = content
		}
		resps := op["responses"].(map[string]any)
		resps[strconv.Itoa(rt.status())] = ok
		if !rt.Public {
			resps["4XX"], resps["5XX"] = errRef, errRef
		}
		if paths[specPath(rt.Path)] == nil {
			paths[specPath(rt.Path)] = map[string]any{}
		}
		paths[specPath(rt.Path)][strings.ToLower(rt.Method)] = op
	}
	errSchema := g.schema(reflect.TypeFor[ErrorBody]())
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title": "gatehouse agent gateway", "version": "1",
			"description": "Agent gateway HTTP API: API keys, providers, agents, chat completions and responses. " +
				"Every endpoint except /health needs Authorization: Bearer <token> (the gateway token or a gateway_ API key). " +
				"x-rpc-method names each operation's method over the WebSocket RPC.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas": g.defs,
			"securitySchemes": map[string]any{
				"bearerAuth": map[string]any{"type": "http", "scheme": "bearer", "description": "gateway token or gateway_ API key"},
				"queryToken": map[string]any{"type": "apiKey", "in": "query", "name": "token", "description": "only on file-serving endpoints"},
			},
			"responses": map[string]any{"Error": map[string]any{
				"description": "The error envelope; message in the Accept-Language language (en, vi, zh)",
				"content":     map[string]any{"application/json": map[string]any{"schema": errSchema}},
			}},
		},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	return append(b, '\n'), err
}

// content describes the success answer of a route whose output is out.
func (g *schemaGen) content(rt *Route, out reflect.Type) map[string]any {
	content := map[string]any{}
	switch {
	case out == noneType:
	case out == bodyType:
		content[rt.Content] = map[string]any{"schema": map[string]any{"type": "string"}}
	case out.Implements(streamerType):
		v := reflect.Zero(out).Interface().(streamer)
		content["application/json"] = map[string]any{"schema": g.schema(v.valueType())}
		content["text/event-stream"] = map[string]any{"schema": map[string]any{
			"type": "string", "description": "Server-Sent Events when the request sets \"stream\": true",
		}}
	default:
		content["application/json"] = map[string]any{"schema": g.schema(out)}
	}
	return content
}

func operationID(rt *Route) string {
	var sb strings.Builder
	sb.WriteString(strings.ToLower(rt.Method))
	for seg := range strings.SplitSeq(specPath(rt.Path), "/") {
		seg = strings.Trim(seg, "{}")
		for part := range strings.FieldsFuncSeq(seg, func(r rune) bool { return r == '-' || r == '.' || r == '_' }) {
			sb.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return sb.String()
}

// reservedHeaders are header parameters OpenAPI ignores (it has its own
// ways to describe them).
var reservedHeaders = map[string]bool{"Accept": true, "Content-Type": true, "Authorization": true}

func parameters(rt *Route) []any {
	ps := []any{}
	for _, m := range pathParam.FindAllStringSubmatch(rt.Path, -1) {
		ps = append(ps, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
	}
	for _, p := range rt.Op.input().params {
		switch {
		case p.in == inPath, p.in == inHeader && reservedHeaders[p.name], p.in == inQuery && p.name == "token" && rt.QueryToken:
			continue // documented above, by OpenAPI itself, or below
		}
		t := map[reflect.Kind]string{reflect.String: "string", reflect.Bool: "boolean"}[p.kind]
		if t == "" {
			t = "integer"
		}
		ps = append(ps, map[string]any{"name": p.name, "in": p.in, "required": false, "schema": map[string]any{"type": t}})
	}
	if rt.Public {
		return ps
	}
	header := func(name string, required bool, desc string) {
		ps = append(ps, map[string]any{"name": name, "in": "header", "required": required, "description": desc, "schema": map[string]any{"type": "string"}})
	}
	header("X-Gateway-User-Id", rt.NeedUser, "external user id (multi-tenant context)")
	header("X-Gateway-Agent-Id", false, "agent id or agent_key")
	header("X-Gateway-Tenant-Id", false, "tenant: UUID or slug")
	header("Accept-Language", false, "en, vi or zh: language of error messages")
	if rt.QueryToken {
		ps = append(ps, map[string]any{"name": "token", "in": "query", "required": false, "description": "bearer token, for browsers and media tags", "schema": map[string]any{"type": "string"}})
	}
	return ps
}
