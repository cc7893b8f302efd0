package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun"
)

// TestRouteTable checks the declarations themselves: every route has a
// unique RPC name and a fillable input, every {param} of its path is a
// path field of its input and the other way round, and only /health is
// public.
func TestRouteTable(t *testing.T) {
	routes := (&Server{}).table()
	if _, err := rpcIndex(routes); err != nil {
		t.Fatal(err)
	}
	rpcName := regexp.MustCompile(`^[a-z][a-z_]*(\.[a-z][a-z_]*)*$`)
	for _, rt := range routes {
		if !rpcName.MatchString(rt.RPC) {
			t.Errorf("%s %s: RPC name %q is not dotted lower case", rt.Method, rt.Path, rt.RPC)
		}
		var inPathFields []string
		for _, p := range rt.Op.input().params {
			if p.in == inPath {
				inPathFields = append(inPathFields, p.name)
			}
		}
		var inPattern []string
		for _, m := range pathParam.FindAllStringSubmatch(rt.Path, -1) {
			inPattern = append(inPattern, m[1])
		}
		if diff := cmp.Diff(inPattern, inPathFields); diff != "" {
			t.Errorf("%s %s: path parameters and path fields differ (-pattern +input):\n%s", rt.Method, rt.Path, diff)
		}
		// Public: the probe, and the webhook inbound route (its own HMAC).
		public := rt.Path == "/health" || rt.Path == "/v1/channels/{id}/inbound"
		if rt.Public != public || !rt.Public && !gateway.ValidScope(rt.Scope) {
			t.Errorf("%s %s: public %v, scope %q", rt.Method, rt.Path, rt.Public, rt.Scope)
		}
	}
	dup := append(routes, Route{Method: "GET", Path: "/x", RPC: routes[0].RPC, Op: routes[0].Op})
	if _, err := rpcIndex(dup); err == nil {
		t.Error("rpcIndex accepted a duplicate RPC name")
	}
	bad := []Route{{Method: "GET", Path: "/x", RPC: "x", Op: op(func(context.Context, Caller, struct {
		F []string `query:"f" json:"-"`
	}) (None, error) {
		return None{}, nil
	})}}
	if _, err := rpcIndex(bad); err == nil {
		t.Error("rpcIndex accepted a slice query field")
	}
	bad[0].Op = op(func(context.Context, Caller, struct {
		ID string `path:"id"`
	}) (None, error) {
		return None{}, nil
	})
	if _, err := rpcIndex(bad); err == nil || !strings.Contains(err.Error(), `json:"-"`) {
		t.Errorf("rpcIndex accepted a path field the body could set: %v", err)
	}
}

// mapSource is a source for decoding tests.
type mapSource struct {
	b      string
	params map[string]string // "in:name" → value
}

func (m mapSource) body() []byte { return []byte(m.b) }

func (m mapSource) stream() io.Reader { return nil }

func (m mapSource) raw() ([]byte, bool) { return []byte(m.b), m.b != "" }

func (m mapSource) param(in, name string) (string, bool) {
	v, ok := m.params[in+":"+name]
	return v, ok
}

func TestOpInput(t *testing.T) {
	type in struct {
		ID     string `path:"id" json:"-"`
		Limit  int    `query:"limit" json:"-"`
		Full   bool   `query:"full" json:"-"`
		Lang   string `header:"Accept-Language" json:"-"`
		Name   string `json:"name"`
		Weight int    `json:"weight"`
	}
	var got in
	o := op(func(_ context.Context, _ Caller, v in) (None, error) { got = v; return None{}, nil })
	tests := []struct {
		name string
		src  mapSource
		want in
		err  string // substring of the error, "" for none
	}{
		{"all", mapSource{`{"name":"n","weight":3,"id":5}`, map[string]string{"path:id": "7", "query:limit": "20", "query:full": "true", "header:Accept-Language": "vi"}},
			in{ID: "7", Limit: 20, Full: true, Lang: "vi", Name: "n", Weight: 3}, ""},
		{"absent params", mapSource{`{}`, nil}, in{}, ""},
		{"empty body", mapSource{``, nil}, in{}, "empty body"},
		{"wrong type", mapSource{`{"weight":"x"}`, nil}, in{}, "weight must be a number"},
		{"bad int", mapSource{`{}`, map[string]string{"query:limit": "ten"}}, in{}, "limit must be an integer"},
		{"bad bool", mapSource{`{}`, map[string]string{"query:full": "maybe"}}, in{}, "full must be true or false"},
		{"trailing", mapSource{`{} {}`, nil}, in{}, "trailing data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got = in{}
			_, err := o.run(context.Background(), Caller{}, tt.src)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("run() = %v, want an error with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("input (-want +got):\n%s", diff)
			}
		})
	}
	// An input of path fields only reads no body.
	if o := op(func(context.Context, Caller, idIn) (None, error) { return None{}, nil }); o.input().body {
		t.Error("idIn reads a body")
	}
	// A raw body (an upload) comes as it is, not as JSON.
	type upload struct {
		Name string `query:"name" json:"-"`
		Data []byte `body:"application/zip" json:"-"`
	}
	var up upload
	o = op(func(_ context.Context, _ Caller, v upload) (None, error) { up = v; return None{}, nil })
	if _, err := o.run(context.Background(), Caller{}, mapSource{"PK\x03\x04 not json", map[string]string{"query:name": "s.zip"}}); err != nil {
		t.Fatal(err)
	}
	if up.Name != "s.zip" || string(up.Data) != "PK\x03\x04 not json" || o.input().body {
		t.Errorf("upload = %+v (reads JSON: %v)", up, o.input().body)
	}
	for _, bad := range []Operation{
		op(func(context.Context, Caller, struct {
			Data string `body:"text/plain" json:"-"`
		}) (None, error) {
			return None{}, nil
		}),
		op(func(context.Context, Caller, struct {
			Data []byte `body:"text/plain" json:"-"`
			Name string `json:"name"`
		}) (None, error) {
			return None{}, nil
		}),
	} {
		if bad.invalid() == nil {
			t.Errorf("op accepted a bad raw body input %v", bad)
		}
	}
}

// TestDispatch drives operations through the RPC seam: the same table,
// the same checks as HTTP.
func TestDispatch(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("helper", `{"delay_ms":0}`, "")
	ctx := ctxT(t)
	alice := Caller{Admin: true, UserID: "alice", IP: "127.0.0.1"}
	reader := Caller{Scopes: []gateway.Scope{gateway.ScopeRead}, UserID: "alice", IP: "127.0.0.1"}

	out, err := e.srv.Dispatch(ctx, reader, "agents.get", json.RawMessage(`{"id":"helper"}`))
	if v, ok := out.(gateway.Agent); err != nil || !ok || v.AgentKey != "helper" {
		t.Fatalf("agents.get = %#v, %v", out, err)
	}
	out, err = e.srv.Dispatch(ctx, alice, "agents.wake", json.RawMessage(`{"id":"helper","message":"hi there"}`))
	if v, ok := out.(wakeResp); err != nil || !ok || v.Content != "echo: hi there" {
		t.Fatalf("agents.wake = %#v, %v", out, err)
	}
	out, err = e.srv.Dispatch(ctx, alice, "chat.completions", json.RawMessage(`{"model":"agent:helper","stream":true,"messages":[{"role":"user","content":"x"}]}`))
	if _, ok := out.(Events); err != nil || !ok {
		t.Fatalf("streaming chat.completions = %T, %v; want Events", out, err)
	}
	out, err = e.srv.Dispatch(ctx, alice, "api_keys.revoke", json.RawMessage(`{"id":"not-a-uuid"}`))
	if out != nil || !errors.Is(err, errKeyNotFound) {
		t.Errorf("api_keys.revoke = %v, %v; want errKeyNotFound", out, err)
	}
	tests := []struct {
		name   string
		c      Caller
		method string
		params string
		code   string
	}{
		{"unknown method", alice, "agents.explode", `{}`, codeNotFound},
		{"scope", reader, "agents.create", `{"agent_key":"x","provider":"echo","model":"m"}`, codeUnauthorized},
		{"user required", Caller{Admin: true}, "agents.create", `{"agent_key":"x","provider":"echo","model":"m"}`, codeInvalid},
		{"op error", alice, "agents.get", `{"id":"ghost"}`, codeNotFound},
		{"bad params", alice, "providers.create", `[1]`, codeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.srv.Dispatch(ctx, tt.c, tt.method, json.RawMessage(tt.params))
			if e, _ := classify(err); err == nil || e.code != tt.code {
				t.Errorf("Dispatch(%s) = %v, want code %s", tt.method, err, tt.code)
			}
		})
	}
}

// fakeRunner fails every run with err once the stream has started.
type fakeRunner struct{ err error }

func (f fakeRunner) Begin(context.Context, gateway.Principal, agentrun.TurnRequest) (*agentrun.Turn, error) {
	return &agentrun.Turn{ID: "0123", Agent: gateway.Agent{AgentKey: "default", TimeoutSeconds: 5}}, nil
}

func (f fakeRunner) RunTurn(context.Context, *agentrun.Turn, func(string) error) (agentrun.TurnResult, error) {
	return agentrun.TurnResult{}, f.err
}

func (f fakeRunner) Turn(context.Context, gateway.Principal, agentrun.TurnRequest) (agentrun.TurnResult, error) {
	return agentrun.TurnResult{}, f.err
}

func (f fakeRunner) ToolsFor(context.Context, gateway.Principal, string) (gateway.Agent, []agentrun.Tool, error) {
	return gateway.Agent{}, nil, f.err
}

func (f fakeRunner) Summon(gateway.Agent, string) {}

func (f fakeRunner) Regenerate(context.Context, gateway.Principal, string, string) (gateway.Agent, error) {
	return gateway.Agent{}, f.err
}

// logRecorder is a slog.Handler that keeps every record's message and
// err attribute, for tests that count log lines.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			line += ": " + a.Value.String()
		}
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	return nil
}

func (r *logRecorder) count(line string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range r.lines {
		if l == line {
			n++
		}
	}
	return n
}

// TestStreamErrorsAreLogged: an unexpected error in a stream is logged
// once, as on the other paths, and the client gets INTERNAL.
func TestStreamErrorsAreLogged(t *testing.T) {
	logs := &logRecorder{}
	e := newGWEnv(t, gwOpts{token: gwToken, lg: slog.New(logs), deps: func(d *Deps) {
		d.Runner = fakeRunner{err: errors.New("disk on fire")}
	}})
	for _, path := range []string{"/v1/chat/completions", "/v1/responses"} {
		evs := e.stream(path, `{"stream":true,"model":"agent:x","input":"x","messages":[{"role":"user","content":"x"}]}`)
		last := evs[len(evs)-1].data
		if path == "/v1/chat/completions" {
			last = evs[len(evs)-2].data // then [DONE]
		}
		if !strings.Contains(last, `"code":"INTERNAL"`) || strings.Contains(last, "disk on fire") {
			t.Errorf("%s error event = %s, want INTERNAL without the cause", path, last)
		}
	}
	// The failure is logged once its stream has ended: the client may see
	// the end first.
	deadline := time.Now().Add(5 * time.Second)
	for logs.count("request failed: disk on fire") < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := logs.count("request failed: disk on fire"); n != 2 {
		logs.mu.Lock()
		defer logs.mu.Unlock()
		t.Errorf("logged %d failures, want 2 (one per stream): %q", n, logs.lines)
	}
}
