package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun"
)

// withLimits sets the runtime's limits before the server starts.
func withLimits(tb testing.TB, l agentrun.Limits) func(*Deps) {
	return func(d *Deps) {
		if err := d.Runner.(*agentrun.Runtime).SetLimits(l); err != nil {
			tb.Fatal(err)
		}
	}
}

// TestMessageTooLarge: chat content over the runtime's MaxMessageBytes is
// answered 413 with the error envelope, before any run, on every chat
// entry point; the limit counts message text, not the body.
func TestMessageTooLarge(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken, deps: withLimits(t, agentrun.Limits{MaxMessageBytes: 64 << 10, MaxAnswerBytes: 1 << 20})})
	e.seedAgent("a1", `{"delay_ms":0}`, "")
	half, _ := json.Marshal(strings.Repeat("x", 40<<10))
	tests := []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"gateway:a1","messages":[{"role":"user","content":` + string(half) + `},{"role":"user","content":` + string(half) + `}]}`},
		{"chat parts", "/v1/chat/completions", `{"model":"gateway:a1","messages":[{"role":"user","content":[{"type":"text","text":` + string(half) + `},{"type":"text","text":` + string(half) + `}]}]}`},
		{"chat stream", "/v1/chat/completions", `{"model":"gateway:a1","stream":true,"messages":[{"role":"user","content":` + string(half) + `},{"role":"user","content":` + string(half) + `}]}`},
		{"responses", "/v1/responses", `{"model":"gateway:a1","instructions":` + string(half) + `,"input":` + string(half) + `}`},
		{"wake", "/v1/agents/a1/wake", `{"message":` + string(half[:len(half)-1]) + strings.Repeat("y", 30<<10) + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("POST", tt.path, gwToken, tt.body, "X-Gateway-User-Id", "alice")
			if r.status != http.StatusRequestEntityTooLarge || r.errCode() != codeInvalid || r.errMsg() == "" {
				t.Errorf("POST %s with 80 KiB of text = %d %.200s, want 413 %s", tt.path, r.status, r.raw, codeInvalid)
			}
		})
	}
	if got := e.chat(gwToken, "a1", strings.Repeat("z", 60<<10)); !strings.HasPrefix(got, "echo: zzz") {
		t.Errorf("60 KiB chat = %.40q, want it run", got)
	}
	if ts, err := e.gw.Traces(ctxT(t), gateway.TraceFilter{}); err != nil || len(ts) != 1 {
		t.Errorf("traces = %d, %v; want only the run under the limit", len(ts), err)
	}
}

// TestDisconnectCancelsRun: a run answered in one piece (no stream) whose
// client goes away is cancelled, and the provider's request with it,
// within a bound; the trace says why. It used to run on to the agent's
// time limit.
func TestDisconnectCancelsRun(t *testing.T) {
	st, up := newStub(t)
	st.hang = 30 * time.Second
	e := newGWEnv(t, gwOpts{token: gwToken})
	seedStubAgent(e, up.URL, 60)
	tests := []struct{ path, body string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"input":"hi"}`},
		{"/v1/agents/default/wake", `{"message":"hi in s1","session_key":"s1"}`},
	}
	for i, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			// The client goes away once the upstream has the request (a
			// fixed delay raced the run's start on a loaded machine).
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				select {
				case <-st.arrived:
				case <-time.After(10 * time.Second):
				}
				cancel()
			}()
			req, _ := http.NewRequestWithContext(ctx, "POST", e.url+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+gwToken)
			req.Header.Set("X-Gateway-User-Id", "alice")
			if resp, err := e.http.Do(req); err == nil {
				resp.Body.Close()
				t.Fatalf("POST %s answered %d while the upstream hangs", tt.path, resp.StatusCode)
			}
			left := time.Now() // the client has closed its connection
			select {
			case <-st.cancelled:
				t.Logf("upstream cancelled %v after the client left", time.Since(left))
			case <-time.After(3 * time.Second):
				t.Fatal("the upstream request was not cancelled after the client went away")
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				ts, err := e.gw.Traces(ctxT(t), gateway.TraceFilter{Status: gateway.RunFailed})
				if err == nil && len(ts) == i+1 {
					if ts[0].Error != "client disconnected" {
						t.Errorf("trace error = %q, want client disconnected", ts[0].Error)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("failed traces = %d, %v; want %d", len(ts), err, i+1)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	// The session's turn was still recorded, as failed: the question
	// without an answer. The run's trace is recorded before its turn ends
	// (RunTurn), so the turn may land a moment after the trace seen above.
	deadline := time.Now().Add(5 * time.Second)
	for {
		sess, err := e.gw.SessionOp(ctxT(t), "get", "s1", "alice", false, nil)
		if err == nil && len(sess.Messages) == 1 && sess.Messages[0].Content == "hi in s1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session s1 = %+v, %v; want the question recorded", sess.Messages, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
