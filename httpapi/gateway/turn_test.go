package gateway

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun"
)

// countingToolbox counts the tool resolutions a run makes: where MCP
// servers are connected and custom tools listed.
type countingToolbox struct{ n atomic.Int64 }

func (b *countingToolbox) Tools(context.Context, gateway.Agent, gateway.RunTools) ([]agentrun.Tool, error) {
	b.n.Add(1)
	return nil, nil
}

// TestRefusedCallerTouchesNoTools: a caller who may not run an agent is
// refused before its tools (custom, MCP) are resolved, on every path that
// runs an agent; an allowed caller's run does resolve them.
func TestRefusedCallerTouchesNoTools(t *testing.T) {
	box := &countingToolbox{}
	e := newGWEnv(t, gwOpts{token: gwToken, deps: func(d *Deps) {
		gw := d.Agents.(*gateway.Gateway)
		rt, err := agentrun.New(agentrun.Deps{Agents: gw, Recorder: gw, Sessions: gw, Prompts: gw, Now: gw.Now, Logger: gw.Logger(),
			Memory: gw, Delegations: gw, Skills: gw, Toolbox: box})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.Close(context.Background()) })
		d.Runner = rt
	}})
	e.seedAgent("private", `{"delay_ms":0}`, "")
	mallory := as("mallory")
	refused := []struct{ method, path, body string }{
		{"POST", "/v1/chat/completions", `{"model":"gateway:private","messages":[{"role":"user","content":"hi"}]}`},
		{"POST", "/v1/chat/completions", `{"model":"gateway:private","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"POST", "/v1/responses", `{"model":"gateway:private","input":"hi"}`},
		{"POST", "/v1/agents/private/wake", `{"message":"hi"}`},
		{"POST", "/v1/tools/invoke", `{"tool":"memory_search","agentId":"private","args":{}}`},
	}
	for _, r := range refused {
		if got := e.do(r.method, r.path, gwToken, r.body, mallory...); got.status != 404 {
			t.Errorf("%s %s as mallory = %d %s, want 404", r.method, r.path, got.status, got.raw)
		}
	}
	if n := box.n.Load(); n != 0 {
		t.Fatalf("refused callers resolved tools %d times, want 0 (policy must come first)", n)
	}
	e.must(200, "POST", "/v1/chat/completions", gwToken, `{"model":"gateway:private","messages":[{"role":"user","content":"hi"}]}`, as("alice")...)
	if n := box.n.Load(); n != 1 {
		t.Errorf("alice's run resolved tools %d times, want 1", n)
	}
}

// TestWakeSessionIsTraced: a wake with a session key is a turn of that
// session, and its run's trace carries the session key, as every other
// turn's does (chat.send, the webhook channel).
func TestWakeSessionIsTraced(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("helper", `{"delay_ms":0}`, "")
	e.must(200, "POST", "/v1/agents/helper/wake", gwToken, `{"message":"first","session_key":"s-wake"}`, as("alice")...)
	r := e.must(200, "POST", "/v1/agents/helper/wake", gwToken, `{"message":"second","session_key":"s-wake"}`, as("alice")...)
	var tr gateway.Trace
	var err error
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) { // runs are recorded without waiting
		if tr, err = e.gw.Trace(ctxT(t), r.body["run_id"].(string)); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil || tr.SessionKey != "s-wake" || tr.Endpoint != "agents.wake" {
		t.Errorf("wake trace = session %q endpoint %q, %v; want session s-wake", tr.SessionKey, tr.Endpoint, err)
	}
	sess, err := e.gw.SessionOp(ctxT(t), "get", "s-wake", "alice", false, nil)
	if err != nil || len(sess.Messages) != 4 || sess.Messages[2].Content != "second" {
		t.Errorf("session = %+v, %v; want both turns, question and answer", sess.Messages, err)
	}
	e.must(404, "POST", "/v1/agents/helper/wake", gwToken, `{"message":"x","session_key":"s-wake"}`, as("mallory")...)
}

// TestTurnHops: a turn asks the registry nothing (the agent, its
// provider, the user's context and skills come from the registry's
// view); a session turn asks its tenant shard twice (begin, end).
func TestTurnHops(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newGWEnv(t, gwOpts{token: gwToken, gw: func(c *gateway.Config) { c.Registerer = reg }})
	e.seedAgent("helper", `{"delay_ms":0}`, "")
	asks := func() (registry, tenant float64) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "gatehouse_gateway_actor_asks_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				switch m.GetLabel()[0].GetValue() {
				case "registry":
					registry = m.GetCounter().GetValue()
				case "tenant":
					tenant = m.GetCounter().GetValue()
				}
			}
		}
		return registry, tenant
	}
	for _, tt := range []struct {
		name, path, body     string
		wantReg, wantTenants float64
	}{
		{"chat completion", "/v1/chat/completions", `{"model":"gateway:helper","messages":[{"role":"user","content":"hi"}]}`, 0, 0},
		{"session turn", "/v1/agents/helper/wake", `{"message":"hi","session_key":"s-hops"}`, 0, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r0, t0 := asks()
			e.must(200, "POST", tt.path, gwToken, tt.body, as("alice")...)
			r1, t1 := asks()
			if r1-r0 != tt.wantReg || t1-t0 != tt.wantTenants {
				t.Errorf("asks: registry %v, tenant shards %v; want %v, %v", r1-r0, t1-t0, tt.wantReg, tt.wantTenants)
			}
		})
	}
}
