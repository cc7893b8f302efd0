package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
)

func TestChatCompletionsResolution(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("default", `{"delay_ms":0}`, "")
	e.seedAgent("other", `{"delay_ms":0}`, `,"system_prompt":"x y z"`)
	body := func(model string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"hello world"}]}`
	}
	tests := []struct {
		name, model string
		hdr         []string
		want        int
		prompt      float64 // prompt tokens tell which agent's system prompt was used
	}{
		{"gateway prefix", "gateway:other", nil, 200, 5},
		{"agent prefix", "agent:other", nil, 200, 5},
		{"header", "gpt-4o", []string{"X-Gateway-Agent-Id", "other"}, 200, 5},
		{"prefix beats header", "agent:default", []string{"X-Gateway-Agent-Id", "other"}, 200, 4},
		{"default", "", nil, 200, 4},
		{"missing agent", "gateway:ghost", nil, 404, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("POST", "/v1/chat/completions", gwToken, body(tt.model), tt.hdr...)
			if r.status != tt.want {
				t.Fatalf("= %d %s, want %d", r.status, r.raw, tt.want)
			}
			if tt.want == 404 {
				if r.errCode() != codeNotFound {
					t.Errorf("code = %s", r.errCode())
				}
				return
			}
			id, _ := r.body["id"].(string)
			msg := r.body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
			usage := r.body["usage"].(map[string]any)
			if !strings.HasPrefix(id, "chatcmpl-") || r.body["object"] != "chat.completion" || msg["content"] != "echo: hello world" || msg["role"] != "assistant" {
				t.Errorf("answer = %s", r.raw)
			}
			if usage["prompt_tokens"] != tt.prompt || usage["completion_tokens"] != float64(3) || usage["total_tokens"] != tt.prompt+3 {
				t.Errorf("usage = %v, want prompt %v completion 3", usage, tt.prompt)
			}
		})
	}
}

func TestChatCompletionsStreaming(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("default", `{"delay_ms":5}`, "")
	for _, includeUsage := range []bool{false, true} {
		t.Run(fmt.Sprint("include_usage=", includeUsage), func(t *testing.T) {
			body := fmt.Sprintf(`{"model":"gateway:default","stream":true,"stream_options":{"include_usage":%v},"messages":[{"role":"user","content":"one two three"}]}`, includeUsage)
			req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+gwToken)
			resp, err := e.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Fatalf("Content-Type = %q", ct)
			}
			evs := readEvents(t, resp.Body)
			if len(evs) == 0 || evs[len(evs)-1].data != "[DONE]" {
				t.Fatalf("events = %v, want [DONE] last", evs)
			}
			var content strings.Builder
			deltas := 0
			var usage map[string]any
			for _, ev := range evs[:len(evs)-1] {
				ch := jsonOf(t, ev.data)
				if ch["object"] != "chat.completion.chunk" || !strings.HasPrefix(ch["id"].(string), "chatcmpl-") {
					t.Errorf("chunk = %s", ev.data)
				}
				if u, ok := ch["usage"].(map[string]any); ok {
					usage = u
				}
				for _, c := range ch["choices"].([]any) {
					d := c.(map[string]any)["delta"].(map[string]any)
					if s, _ := d["content"].(string); s != "" {
						content.WriteString(s)
						deltas++
					}
				}
			}
			if content.String() != "echo: one two three" || deltas != 4 {
				t.Errorf("streamed %q in %d deltas, want 4 word deltas", content.String(), deltas)
			}
			if includeUsage != (usage != nil) || usage != nil && usage["completion_tokens"] != float64(4) {
				t.Errorf("usage chunk = %v, include_usage %v", usage, includeUsage)
			}
		})
	}
}

// stub is an OpenAI-compatible upstream for openai_compat providers.
type stub struct {
	mu        sync.Mutex
	bodies    []map[string]any
	auth      []string
	release   chan struct{} // streaming: closed by the test to let the rest through
	cancelled chan struct{} // closed when a streaming request's context ends early
	arrived   chan struct{} // a hanging request has arrived (capacity 1)
	hang      time.Duration
}

func newStub(t *testing.T) (*stub, *httptest.Server) {
	st := &stub{release: make(chan struct{}), cancelled: make(chan struct{}, 1), arrived: make(chan struct{}, 1)}
	srv := httptest.NewServer(http.HandlerFunc(st.serve))
	t.Cleanup(srv.Close)
	return st, srv
}

func (st *stub) serve(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	st.mu.Lock()
	st.bodies = append(st.bodies, body)
	st.auth = append(st.auth, r.Header.Get("Authorization"))
	hang := st.hang
	st.mu.Unlock()
	if hang > 0 {
		select {
		case st.arrived <- struct{}{}:
		default:
		}
		select {
		case <-time.After(hang):
		case <-r.Context().Done():
			select { // seen by the disconnect tests
			case st.cancelled <- struct{}{}:
			default:
			}
		}
		return
	}
	if body["stream"] != true {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"stub says hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	chunk := func(s string) {
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", s)
		fl.Flush()
	}
	chunk("first")
	select {
	case <-st.release:
	case <-r.Context().Done():
		st.cancelled <- struct{}{}
		return
	case <-time.After(10 * time.Second):
		return
	}
	chunk(" second")
	fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
	fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2}}\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

func seedStubAgent(e *gwEnv, url string, timeout int) {
	e.tb.Helper()
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"stub","provider_type":"openai_compat","api_base":"`+url+`/v1","api_key":"sk-upstream-secret-1"}`)
	e.must(201, "POST", "/v1/agents", gwToken, fmt.Sprintf(`{"agent_key":"default","provider":"stub","model":"up-model","system_prompt":"You are terse.","timeout_seconds":%d}`, timeout), "X-Gateway-User-Id", "alice")
}

func TestChatCompletionsOpenAICompat(t *testing.T) {
	st, up := newStub(t)
	e := newGWEnv(t, gwOpts{token: gwToken})
	seedStubAgent(e, up.URL, 30)
	r := e.must(200, "POST", "/v1/chat/completions", gwToken, `{"model":"gateway:default","messages":[{"role":"system","content":"ctx"},{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":[{"type":"text","text":"c"}]}]}`)
	if c := r.body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]; c != "stub says hi" {
		t.Errorf("content = %v", c)
	}
	if u := r.body["usage"].(map[string]any); u["total_tokens"] != float64(10) {
		t.Errorf("usage = %v", u)
	}
	st.mu.Lock()
	got, auth := st.bodies[0], st.auth[0]
	st.mu.Unlock()
	b, _ := json.Marshal(got["messages"])
	want := `[{"content":"You are terse.","role":"system"},{"content":"ctx","role":"system"},{"content":"a","role":"user"},{"content":"b","role":"assistant"},{"content":"c","role":"user"}]`
	if string(b) != want || got["model"] != "up-model" || auth != "Bearer sk-upstream-secret-1" {
		t.Errorf("upstream got model %v messages %s auth %q, want %s", got["model"], b, auth, want)
	}

	// Streaming passes each upstream delta on as it arrives: the first
	// reaches the client while the upstream still holds the second.
	req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", strings.NewReader(`{"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"go"}]}`))
	req.Header.Set("Authorization", "Bearer "+gwToken)
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	var seen strings.Builder
	for !strings.Contains(seen.String(), `"first"`) {
		n, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatalf("read before release: %v (%q)", err, seen.String())
		}
		seen.Write(buf[:n])
	}
	close(st.release)
	rest, _ := io.ReadAll(resp.Body)
	all := seen.String() + string(rest)
	if !strings.Contains(all, `" second"`) || !strings.HasSuffix(strings.TrimSpace(all), "data: [DONE]") || !strings.Contains(all, `"total_tokens":9`) {
		t.Errorf("stream = %s", all)
	}
}

func TestChatCompletionsDisconnectCancelsUpstream(t *testing.T) {
	st, up := newStub(t)
	e := newGWEnv(t, gwOpts{token: gwToken})
	seedStubAgent(e, up.URL, 30)
	req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", strings.NewReader(`{"stream":true,"messages":[{"role":"user","content":"go"}]}`))
	req.Header.Set("Authorization", "Bearer "+gwToken)
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var seen strings.Builder
	for !strings.Contains(seen.String(), `"first"`) {
		n, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		seen.Write(buf[:n])
	}
	resp.Body.Close() // the client goes away mid-stream
	// The gateway notices at its next write (the stub's second delta is
	// held back, so nudge it with a heartbeat-free wait: the gateway's
	// upstream context must end on its own within the agent limit).
	select {
	case <-st.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("upstream request was not cancelled after the client disconnected")
	}
}

func TestAgentTimeout(t *testing.T) {
	st, up := newStub(t)
	st.hang = 10 * time.Second
	e := newGWEnv(t, gwOpts{token: gwToken})
	seedStubAgent(e, up.URL, 1)
	start := time.Now()
	r := e.do("POST", "/v1/chat/completions", gwToken, `{"messages":[{"role":"user","content":"hi"}]}`)
	if r.status != 504 || r.errCode() != codeAgentTimeout || time.Since(start) > 5*time.Second {
		t.Errorf("= %d %s after %v, want 504 AGENT_TIMEOUT after ~1s", r.status, r.raw, time.Since(start))
	}
	// A chat stream reports it as an error event, then [DONE].
	evs := e.stream("/v1/chat/completions", `{"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "Accept-Language", "zh")
	if n := len(evs); n < 2 || evs[n-1].data != "[DONE]" || !strings.Contains(evs[n-2].data, `"code":"AGENT_TIMEOUT"`) || !strings.Contains(evs[n-2].data, "时限") {
		t.Errorf("chat stream events = %v", evs)
	}
	// Streaming responses report the failure in response.done.
	resp := e.stream("/v1/responses", `{"input":"hi","stream":true}`)
	last := resp[len(resp)-1]
	ev := jsonOf(t, last.data)
	rr := ev["response"].(map[string]any)
	if last.event != "response.done" || rr["status"] != "failed" || rr["error"].(map[string]any)["code"] != codeAgentTimeout {
		t.Errorf("last event = %s %s", last.event, last.data)
	}
	// Each timed-out run is recorded as such.
	deadline := time.Now().Add(5 * time.Second)
	for {
		ts, err := e.gw.Traces(ctxT(t), gateway.TraceFilter{Status: gateway.RunTimeout})
		if err == nil && len(ts) == 3 {
			if sp := ts[0].Spans[0]; sp.Kind != "llm" || sp.Status != gateway.RunTimeout || sp.DurationMs < 900 {
				t.Errorf("span = %+v", sp)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timeout traces = %d, %v, want 3", len(ts), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *gwEnv) stream(path, body string, hdr ...string) []sseEvent {
	e.tb.Helper()
	req, _ := http.NewRequest("POST", e.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+gwToken)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.http.Do(req)
	if err != nil {
		e.tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		e.tb.Fatalf("POST %s = %d %s", path, resp.StatusCode, b)
	}
	return readEvents(e.tb, resp.Body)
}

func TestResponses(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("default", `{"delay_ms":2}`, "")
	r := e.must(200, "POST", "/v1/responses", gwToken, `{"model":"agent:default","input":"hi there"}`)
	out := r.body["output"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)
	if r.body["object"] != "response" || r.body["status"] != "completed" || out["text"] != "echo: hi there" || !strings.HasPrefix(r.body["id"].(string), "resp_") {
		t.Errorf("response = %s", r.raw)
	}
	if u := r.body["usage"].(map[string]any); u["output_tokens"] != float64(3) {
		t.Errorf("usage = %v", u)
	}
	evs := e.stream("/v1/responses", `{"input":[{"role":"user","content":"a b"}],"stream":true}`)
	var kinds []string
	var text strings.Builder
	for _, ev := range evs {
		m := jsonOf(t, ev.data)
		if m["type"] != ev.event {
			t.Errorf("event %s has type %v", ev.event, m["type"])
		}
		kinds = append(kinds, ev.event)
		if ev.event == "response.delta" {
			text.WriteString(m["delta"].(string))
		}
	}
	want := "response.started response.delta response.delta response.delta response.done"
	if strings.Join(kinds, " ") != want || text.String() != "echo: a b" {
		t.Errorf("events %v text %q, want %s", kinds, text.String(), want)
	}
	done := jsonOf(t, evs[len(evs)-1].data)["response"].(map[string]any)
	if done["status"] != "completed" || done["usage"].(map[string]any)["total_tokens"] != float64(7) {
		t.Errorf("done = %v", done)
	}
	if r := e.do("POST", "/v1/responses", gwToken, `{"input":[]}`); r.status != 400 {
		t.Errorf("empty input = %d", r.status)
	}
}

func TestWakeAndRunRecords(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("helper", `{"delay_ms":0}`, "")
	alice := []string{"X-Gateway-User-Id", "alice"}
	r := e.must(200, "POST", "/v1/agents/helper/wake", gwToken, `{"message":"ping pong"}`, alice...)
	if r.body["content"] != "echo: ping pong" || r.body["run_id"] == "" || r.body["usage"].(map[string]any)["completion_tokens"] != float64(3) {
		t.Errorf("wake = %s", r.raw)
	}
	e.must(404, "POST", "/v1/agents/helper/wake", gwToken, `{"message":"x"}`, "X-Gateway-User-Id", "mallory")
	e.must(400, "POST", "/v1/agents/helper/wake", gwToken, `{"message":""}`, alice...)
	e.must(200, "POST", "/v1/chat/completions", gwToken, `{"model":"agent:helper","messages":[{"role":"user","content":"x"}]}`, alice...)
	a, err := e.gw.GetAgent(ctxT(t), "alice", "helper")
	if err != nil {
		t.Fatal(err)
	}
	var us []gateway.UsageRow
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if us, _ = e.gw.Usage(ctxT(t), a.ID, "alice"); len(us) == 1 && us[0].Runs == 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(us) != 1 || us[0].Runs != 2 || us[0].CompletionTokens != 5 || us[0].PromptTokens != 4+3 {
		t.Fatalf("usage = %+v, want 2 runs, 5 completion and 7 prompt tokens", us)
	}
	tr, err := e.gw.Trace(ctxT(t), r.body["run_id"].(string))
	if err != nil || tr.AgentID != a.ID || len(tr.Spans) != 1 || tr.Spans[0].Kind != "llm" || tr.Spans[0].CompletionTokens != 3 || tr.Status != gateway.RunOK {
		t.Errorf("trace = %+v, %v", tr, err)
	}
	if a.ID == uuid.Nil {
		t.Fatal("no agent id")
	}
}
