package gateway

import (
	"strings"
	"testing"
	"time"

	"gatehouse/actors/gateway"
)

// waitStatus polls the agent until its status is want.
func waitStatus(t *testing.T, e *gwEnv, agent, want string) gwResp {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.must(200, "GET", "/v1/agents/"+agent, gwToken, "", as("alice")...)
		if r.body["status"] == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %s stayed %v (want %s): %s", agent, r.body["status"], want, r.raw)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSummoning: an agent created with a description and no prompt is
// summoned by its provider (echo writes "echo: <description>"), traced;
// resummon retries, refused while one runs or without a description; a
// failing provider ends in summon_failed with the error; regenerate
// rewrites the prompt.
func TestSummoning(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo","settings":{"delay_ms":1}}`)
	r := e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"pirate","provider":"echo","model":"m","other_config":{"description":"a terse pirate"},"max_tool_iterations":5}`, as("alice")...)
	if r.body["status"] != gateway.AgentSummoning || r.body["max_tool_iterations"] != 5.0 {
		t.Fatalf("created = %s, want summoning", r.raw)
	}
	r = waitStatus(t, e, "pirate", gateway.AgentActive)
	if r.body["system_prompt"] != "echo: a terse pirate" || r.body["other_config"].(map[string]any)["description"] != "a terse pirate" {
		t.Errorf("summoned agent = %s", r.raw)
	}
	waitTraces(t, e, 1) // the run is logged just after the agent is saved
	traces, err := e.gw.Traces(ctxT(t), gateway.TraceFilter{})
	if err != nil || len(traces) == 0 || traces[0].Endpoint != "agents.summon" {
		t.Errorf("traces = %+v, %v; want the summon run", traces, err)
	}

	e.must(202, "POST", "/v1/agents/pirate/resummon", gwToken, "", as("alice")...)
	waitStatus(t, e, "pirate", gateway.AgentActive)
	e.must(404, "POST", "/v1/agents/pirate/resummon", gwToken, "", as("bob")...) // a stranger
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"plain","provider":"echo","model":"m","system_prompt":"hi"}`, as("alice")...)
	e.must(400, "POST", "/v1/agents/plain/resummon", gwToken, "", as("alice")...)

	// A disabled provider: the summon fails, with the reason kept.
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"off","provider_type":"echo","enabled":false}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"doomed","provider":"off","model":"m","other_config":{"description":"x"}}`, as("alice")...)
	r = waitStatus(t, e, "doomed", gateway.AgentSummonFailed)
	if msg, _ := r.body["summon_error"].(string); !strings.Contains(msg, "disabled") {
		t.Errorf("summon_error = %q, want the provider's being disabled", msg)
	}

	r = e.must(200, "POST", "/v1/agents/plain/regenerate", gwToken, `{"prompt":"be kinder"}`, as("alice")...)
	if p, _ := r.body["system_prompt"].(string); !strings.HasPrefix(p, "echo: Current system prompt:") || !strings.Contains(p, "be kinder") {
		t.Errorf("regenerated prompt = %q", p)
	}
	e.must(400, "POST", "/v1/agents/plain/regenerate", gwToken, `{"prompt":" "}`, as("alice")...)
	e.must(404, "POST", "/v1/agents/plain/regenerate", gwToken, `{"prompt":"x"}`, as("mallory")...)
}
