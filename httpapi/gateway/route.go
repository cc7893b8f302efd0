package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"unicode/utf8"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
	"gatehouse/httpapi/listener"
	"gatehouse/httpapi/webassets"
)

// Route declares one endpoint, once: the router, the OpenAPI document and
// Dispatch (the WebSocket RPC's seam) are all built from the table in
// routes.go, so an endpoint cannot exist in one and not the others, and
// the same checks guard every transport.
type Route struct {
	// Method and Path are the HTTP method and the fasthttp/router pattern
	// ("/v1/agents/{id}").
	Method, Path string
	// RPC is the method name over the WebSocket RPC ("agents.get"); unique.
	RPC string
	// Scope is the least scope an API key needs (the gateway token has all).
	Scope gateway.Scope
	// Public skips authentication, the rate limit and the scope (/health).
	Public bool
	// NeedUser requires X-Gateway-User-Id (Caller.UserID).
	NeedUser bool
	// QueryToken also accepts the token in ?token= (media and files).
	QueryToken bool
	// Tag groups the route in the docs; Summary is its one line there.
	Tag, Summary string
	// Status is the success status (0: 200).
	Status int
	// Content is the documented content type of a Body output.
	Content string
	// NoStore marks an answer that carries a secret (a new API key):
	// Cache-Control: no-store.
	NoStore bool
	// Upload is a route whose body (up to Config.MaxUploadBytes) goes to
	// its operation as a stream (an io.Reader body field), unbuffered.
	Upload bool
	// Op does the work; build it with op.
	Op Operation
}

// status returns the success status.
func (rt *Route) status() int {
	if rt.Status == 0 {
		return 200
	}
	return rt.Status
}

// Caller is who makes a request, as the transport established it before
// the operation runs: the credential, the common headers and the client's
// address. Operations get it by value.
type Caller struct {
	// Admin is the gateway token (or open mode): every scope.
	Admin bool
	// Open is open mode: no token was needed and none was sent.
	Open bool
	// KeyID is the id of the API key that authenticated the request.
	KeyID uuid.UUID
	// Scopes are that API key's scopes.
	Scopes []gateway.Scope
	// KeyUser is the user the API key was created for ("" for the gateway
	// token, an admin key made without one, or a key from before keys were
	// bound to users).
	KeyUser string
	// UserID is the user the request acts for (see bindUser): the key's
	// user for a read or write key, else X-Gateway-User-Id, else KeyUser.
	// AgentID and TenantID are X-Gateway-Agent-Id and -Tenant-Id ("" when
	// absent), validated.
	UserID, AgentID, TenantID string
	// IP is the client's address without the port: the rate-limit subject
	// when there is neither a user nor an API key.
	IP string
	// Channel is the transport, for traces: "http" or "ws".
	Channel string
	// Console is a user of the web console on :8080, authenticated by its
	// session and reaching the gateway through Mount (ConsoleCaller).
	Console bool
}

// Trusted reports whether c is a trusted backend that may act for any
// user: the gateway token (or open mode) or an operator.admin key.
func (c Caller) Trusted() bool { return c.Grants(gateway.ScopeAdmin) }

// principal is who c acts for, for the domain's policy
// (actors/gateway/agentrun/policy.go).
func (c Caller) principal() gateway.Principal {
	return gateway.Principal{User: c.UserID, Trusted: c.Trusted(), KeyID: c.KeyID}
}

// Grants reports whether c may use an endpoint that needs scope need.
func (c Caller) Grants(need gateway.Scope) bool {
	if c.Admin {
		return true
	}
	for _, sc := range c.Scopes {
		if sc.Grants(need) {
			return true
		}
	}
	return false
}

// None is the input of an operation that takes nothing, and the output of
// one that answers nothing but its status (204).
type None struct{}

// Body is an answer that is not JSON: bytes, their content type and
// extra headers (the docs viewer, /metrics).
type Body struct {
	ContentType string
	Header      map[string]string
	Data        []byte
	// Encoded, when set, holds Data compressed ahead of time: HTTP sends
	// the form the request's Accept-Encoding accepts.
	Encoded *webassets.Encoded
	// Stream, when set, is sent instead of Data: Size bytes (-1: chunked);
	// the transport closes it if it is an io.Closer.
	Stream io.Reader
	Size   int64
	// Status overrides the route's success status when not 0.
	Status int
}

// Events is a stream an operation answers with. The transport runs it
// once the answer has started (SSE: after the 200 and its headers), with
// a context that ends when the client goes away, and st to send through.
type Events func(ctx context.Context, st Stream)

// Streaming is the output of an operation that answers either one value
// or, when the request asks for it, a stream: Events set means stream.
type Streaming[T any] struct {
	Value  T
	Events Events
	// Header, set or not, is added to an HTTP answer's headers (a
	// stream's, before it starts); other transports ignore it.
	Header map[string]string
}

// streamer is what the transports see of a Streaming[T].
type streamer interface {
	events() Events
	value() any
	valueType() reflect.Type
	header() map[string]string
}

func (s Streaming[T]) events() Events            { return s.Events }
func (s Streaming[T]) value() any                { return s.Value }
func (Streaming[T]) valueType() reflect.Type     { return reflect.TypeFor[T]() }
func (s Streaming[T]) header() map[string]string { return s.Header }

// Operation is a route's work. It is built by op from a function that
// knows nothing of the transport; only this package implements it.
type Operation interface {
	// types returns the input and output types, for the docs.
	types() (in, out reflect.Type)
	// input describes where the input's fields come from.
	input() *inputSpec
	// run decodes the input from src and calls the function.
	run(ctx context.Context, c Caller, src source) (any, error)
	// invalid reports an input type op cannot fill.
	invalid() error
}

// op adapts fn into an Operation. In is a struct: its fields tagged
// path:"name", query:"name" or header:"Name" (and json:"-", so that the
// body never sets them) come from the path, the query or a header
// (strings, integers or booleans); every other field is the JSON body,
// read as encoding/json reads a struct (an In without body fields reads
// no body). Instead of a JSON body, one []byte field tagged
// body:"media/type" json:"-" gets the raw body, a copy (uploads; over
// RPC, params.body in base64). Out is encoded as JSON, unless it is None
// (no body), Body (raw bytes) or Streaming[T] (T, or a stream).
func op[In, Out any](fn func(ctx context.Context, c Caller, in In) (Out, error)) Operation {
	spec, err := specOf(reflect.TypeFor[In]())
	return &operation[In, Out]{fn: fn, spec: spec, err: err}
}

type operation[In, Out any] struct {
	fn   func(context.Context, Caller, In) (Out, error)
	spec inputSpec
	err  error // a malformed In: New reports it
}

func (o *operation[In, Out]) types() (reflect.Type, reflect.Type) {
	return reflect.TypeFor[In](), reflect.TypeFor[Out]()
}

func (o *operation[In, Out]) input() *inputSpec { return &o.spec }

func (o *operation[In, Out]) invalid() error { return o.err }

func (o *operation[In, Out]) run(ctx context.Context, c Caller, src source) (any, error) {
	var in In
	if err := o.spec.decode(src, &in); err != nil {
		return nil, err
	}
	out, err := o.fn(ctx, c, in)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// source is where an operation's input comes from: an HTTP request, or
// the params of an RPC call.
type source interface {
	// body returns the JSON body (nil or empty: none was sent).
	body() []byte
	// param returns the path, query or header value name; ok is false
	// when it is absent.
	param(in, name string) (v string, ok bool)
	// raw returns a copy of the raw body; ok is false when none was sent.
	raw() (b []byte, ok bool)
	// stream returns the raw body as a stream (an upload), nil when none
	// was sent.
	stream() io.Reader
}

// Input field locations.
const (
	inPath   = "path"
	inQuery  = "query"
	inHeader = "header"
	inBody   = "body" // the raw body; the name is its media type
)

// inputSpec describes an operation's input type, once, at startup.
type inputSpec struct {
	body   bool // some field is read from the JSON body
	params []inputParam
	raw    *inputParam // the raw-body field, if any
}

// inputParam is one field of the input read from the path, the query or
// a header.
type inputParam struct {
	in, name string
	index    []int
	kind     reflect.Kind
}

// specOf describes struct type t; it fails for a type op cannot fill.
func specOf(t reflect.Type) (inputSpec, error) {
	var sp inputSpec
	if t.Kind() != reflect.Struct {
		return sp, fmt.Errorf("input %v is not a struct", t)
	}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		where, name := paramTag(f)
		if where == "" {
			if f.Tag.Get("json") != "-" {
				sp.body = true
			}
			continue
		}
		if f.Tag.Get("json") != "-" { // else a body could set it, or fail on it
			return sp, fmt.Errorf("input %v: %s field %s must also be tagged json:\"-\"", t, where, f.Name)
		}
		p := inputParam{in: where, name: name, index: f.Index, kind: f.Type.Kind()}
		switch {
		case where == inBody && f.Type != reflect.TypeFor[[]byte]() && f.Type != reflect.TypeFor[io.Reader]():
			return sp, fmt.Errorf("input %v: body field %s must be a []byte or an io.Reader", t, f.Name)
		case where == inBody && sp.raw != nil:
			return sp, fmt.Errorf("input %v: two body fields", t)
		case where == inBody:
			sp.raw = &p
			continue
		}
		switch p.kind {
		case reflect.String, reflect.Bool, reflect.Int, reflect.Int64:
		default:
			return sp, fmt.Errorf("input %v: %s field %s must be a string, bool or int", t, where, f.Name)
		}
		sp.params = append(sp.params, p)
	}
	if sp.raw != nil && sp.body {
		return sp, fmt.Errorf("input %v: a raw body field and JSON body fields", t)
	}
	return sp, nil
}

// paramTag returns the location and name of a path, query, header or
// raw-body field; "" for a JSON body field.
func paramTag(f reflect.StructField) (where, name string) {
	for _, where := range [...]string{inPath, inQuery, inHeader, inBody} {
		if name, ok := f.Tag.Lookup(where); ok {
			return where, name
		}
	}
	return "", ""
}

// decode fills dst (a pointer to the input struct) from src: the body
// first, then the path, query and header fields, which win.
func (sp *inputSpec) decode(src source, dst any) error {
	if sp.body {
		body := src.body()
		release := heavyWork(len(body)) // heavy.go
		err := decodeJSON(body, dst)
		release()
		if err != nil {
			return err
		}
	}
	v := reflect.ValueOf(dst).Elem()
	if sp.raw != nil {
		f := v.FieldByIndex(sp.raw.index)
		if f.Kind() == reflect.Interface { // an io.Reader: the body as a stream
			if r := src.stream(); r != nil {
				f.Set(reflect.ValueOf(r))
			}
		} else if b, ok := src.raw(); ok {
			f.SetBytes(b)
		}
	}
	for i := range sp.params {
		p := &sp.params[i]
		s, ok := src.param(p.in, p.name)
		if !ok {
			continue
		}
		f := v.FieldByIndex(p.index)
		switch p.kind {
		case reflect.String:
			f.SetString(s)
		case reflect.Bool:
			b, err := strconv.ParseBool(s)
			if err != nil {
				return errInvalid(p.name + " must be true or false")
			}
			f.SetBool(b)
		default:
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return errInvalid(p.name + " must be an integer")
			}
			f.SetInt(n)
		}
	}
	return nil
}

// decodeJSON reads a request body, exactly one JSON object, into dst. A
// wrongly typed field is an invalid request naming the field.
//
// A body listener.DecodeObject accepts (one object, valid UTF-8, nothing
// but white space after it) is decoded in place by json.Unmarshal, which
// accepts the same bodies: DecodeObject's json.Decoder would first copy
// the body into its own growing buffer (a megabyte chat message copied
// again and again; issue 35). Decoding reads body in place but keeps
// nothing of it: strings and json.RawMessage are copies, and the
// UnmarshalJSON methods of the request types copy what they keep, so
// nothing refers to fasthttp's request buffer after the handler. Any
// other body goes to DecodeObject, for its error.
func decodeJSON(body []byte, dst any) error {
	if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '{' && utf8.Valid(b) && json.Unmarshal(b, dst) == nil {
		return nil
	}
	return decodeErr(listener.DecodeObject(body, dst))
}

// decodeErr maps DecodeObject's error: a wrongly typed field is an
// invalid request naming the field, the rest a JSON error.
func decodeErr(err error) error {
	var te *json.UnmarshalTypeError
	var ie invalidContent
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te):
		return errInvalid(te.Field + " must be " + jsonKind(te.Type.Kind()))
	case errors.As(err, &ie):
		return errInvalid(string(ie))
	}
	return errJSON(err.Error())
}

func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a number"
}

// nonNil is s, or an empty slice for nil: lists answer [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// publicView is a domain view with a redacted form for callers who are
// not trusted backends (actors/gateway/public.go).
type publicView[T any] interface{ Public() T }

// shown is v as c may see it.
func shown[T publicView[T]](c Caller, v T) T {
	if c.Trusted() {
		return v
	}
	return v.Public()
}

// shownAll is vs as c may see them (in place).
func shownAll[T publicView[T]](c Caller, vs []T) []T {
	if !c.Trusted() {
		for i := range vs {
			vs[i] = vs[i].Public()
		}
	}
	return vs
}
