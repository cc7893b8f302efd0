package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// rpcIndex maps each route's RPC name to it; names must be unique and
// every route must have one, and every operation's input must be one op
// can fill.
func rpcIndex(routes []Route) (map[string]*Route, error) {
	idx := make(map[string]*Route, len(routes))
	for i := range routes {
		rt := &routes[i]
		switch {
		case rt.Op == nil:
			return nil, fmt.Errorf("gateway: route %s %s has no operation", rt.Method, rt.Path)
		case rt.RPC == "":
			return nil, fmt.Errorf("gateway: route %s %s has no RPC name", rt.Method, rt.Path)
		case idx[rt.RPC] != nil:
			return nil, fmt.Errorf("gateway: RPC name %q is declared twice", rt.RPC)
		}
		if err := rt.Op.invalid(); err != nil {
			return nil, fmt.Errorf("gateway: route %s %s: %w", rt.Method, rt.Path, err)
		}
		idx[rt.RPC] = rt
	}
	return idx, nil
}

// Dispatch runs the operation whose RPC name is method for c, as the
// WebSocket RPC (issue 7) will: c comes from the connection's handshake
// (credential, headers, client address), params is the JSON object of the
// input, path and query fields under their tag names (agents.get:
// {"id": "helper"}). The checks are HTTP's, from the same table: the rate
// limit, the scope, the user header. It returns the operation's output:
// a value to encode as JSON, None, a Body, or, when the operation answers
// with a stream, its Events for the transport to run with its own
// Stream. Errors go through the transport's mapper (classify).
func (s *Server) Dispatch(ctx context.Context, c Caller, method string, params json.RawMessage) (any, error) {
	rt, ok := s.rpc[method]
	if !ok {
		return nil, errNoSuchMethod
	}
	if err := s.admit(ctx, rt, c); err != nil {
		return nil, err
	}
	out, err := rt.Op.run(withActor(ctx, c), c, &rpcSource{params: params})
	if err != nil {
		return nil, err
	}
	if st, ok := out.(streamer); ok {
		if ev := st.events(); ev != nil {
			return ev, nil
		}
		return st.value(), nil
	}
	return out, nil
}

// rpcSource reads an operation's input from an RPC call's params: the
// whole object is the body, and path and query fields are its members.
type rpcSource struct {
	params json.RawMessage
	fields map[string]json.RawMessage // parsed on first use
}

func (r *rpcSource) body() []byte {
	if len(bytes.TrimSpace(r.params)) == 0 {
		return []byte("{}")
	}
	return r.params
}

// raw is params.body, a base64 string.
func (r *rpcSource) raw() ([]byte, bool) {
	m, ok := r.member("body")
	var b []byte
	if !ok || json.Unmarshal(m, &b) != nil {
		return nil, false
	}
	return b, len(b) > 0
}

// stream is raw as a reader.
func (r *rpcSource) stream() io.Reader {
	b, ok := r.raw()
	if !ok {
		return nil
	}
	return bytes.NewReader(b)
}

// member returns the params member name, parsing params on first use.
func (r *rpcSource) member(name string) (json.RawMessage, bool) {
	if r.fields == nil && json.Unmarshal(r.params, &r.fields) != nil {
		return nil, false
	}
	m, ok := r.fields[name]
	return m, ok
}

func (r *rpcSource) param(in, name string) (string, bool) {
	if in == inHeader {
		return "", false
	}
	raw, ok := r.member(name)
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String(), true
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return strconv.FormatBool(b), true
	}
	return "", false
}
