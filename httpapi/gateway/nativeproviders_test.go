package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun/llm/llmtest"
)

// nativeCase is one provider type served by its stub on loopback.
type nativeCase struct {
	typ string
	// start starts the stub and returns its script, the provider's
	// api_base, credential and settings, and the credential as the stub
	// records it.
	start func(t *testing.T) (s *llmtest.Script, base, key, settings, recorded string)
	// streamErr is the provider's error type for a mid-stream failure.
	streamErr string
}

func nativeCases() []nativeCase {
	return []nativeCase{
		{"anthropic_native", func(t *testing.T) (*llmtest.Script, string, string, string, string) {
			s := llmtest.NewAnthropic(t)
			return &s.Script, s.URL, "sk-ant-native-key-0001", `{}`, "sk-ant-native-key-0001"
		}, "overloaded_error"},
		{"gemini", func(t *testing.T) (*llmtest.Script, string, string, string, string) {
			s := llmtest.NewGemini(t)
			return &s.Script, s.URL, "gm-native-key-0000002", `{}`, "gm-native-key-0000002"
		}, "INTERNAL"},
		{"bedrock", func(t *testing.T) (*llmtest.Script, string, string, string, string) {
			s := llmtest.NewBedrock(t)
			return &s.Script, s.URL, s.Key(), `{"region":"` + llmtest.BedrockRegion + `"}`, llmtest.BedrockAccessKey
		}, "modelStreamErrorException"},
		{"azure_openai", func(t *testing.T) (*llmtest.Script, string, string, string, string) {
			s := llmtest.NewAzure(t, "2024-10-21")
			return &s.Script, s.Base(), "az-native-key-0000003", `{"api_version":"2024-10-21","deployments":{"test-model":"dep-1"}}`, "az-native-key-0000003"
		}, "server_error"},
		{"azure_openai v1", func(t *testing.T) (*llmtest.Script, string, string, string, string) {
			s := llmtest.NewAzure(t, "v1")
			return &s.Script, s.Base(), "az-native-key-0000004", `{"api_version":"v1"}`, "az-native-key-0000004"
		}, "server_error"},
		{"ollama", func(t *testing.T) (*llmtest.Script, string, string, string, string) {
			s := llmtest.NewOllama(t)
			return &s.Script, s.URL, "", `{}`, ""
		}, "model failed"},
		{"openai_compat", func(t *testing.T) (*llmtest.Script, string, string, string, string) {
			s := llmtest.NewOpenAI(t)
			return &s.Script, s.Base(), "sk-openai-native-0005", `{}`, "sk-openai-native-0005"
		}, "server_error"},
	}
}

// seedNative creates provider "up" of typ and agent "default" on it for
// alice.
func seedNative(e *gwEnv, typ, base, key, settings string) {
	e.tb.Helper()
	body := map[string]any{"name": "up", "provider_type": strings.Fields(typ)[0], "api_base": base, "settings": json.RawMessage(settings)}
	if key != "" {
		body["api_key"] = key
	}
	b, _ := json.Marshal(body)
	e.must(201, "POST", "/v1/providers", gwToken, string(b))
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"default","provider":"up","model":"test-model","system_prompt":"You are terse.","timeout_seconds":30}`, "X-Gateway-User-Id", "alice")
}

func chatBody(msg string, stream bool) string {
	m, _ := json.Marshal(msg)
	return fmt.Sprintf(`{"model":"gateway:default","stream":%v,"messages":[{"role":"user","content":%s}]}`, stream, m)
}

// streamedText joins a chat stream's content deltas and returns the
// error event's data, if any.
func streamedText(t *testing.T, evs []sseEvent) (text, errData string) {
	t.Helper()
	var b strings.Builder
	for _, ev := range evs {
		if ev.data == "[DONE]" {
			continue
		}
		if strings.Contains(ev.data, `"error"`) {
			errData = ev.data
			continue
		}
		var c chatChunk
		if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
			t.Fatalf("chunk %q: %v", ev.data, err)
		}
		for _, ch := range c.Choices {
			b.WriteString(ch.Delta.Content)
		}
	}
	return b.String(), errData
}

// TestNativeProviders runs every provider type through the whole
// gateway against its stub: chat completions whole and streamed,
// /v1/responses, the WebSocket, a tool loop of two iterations, a
// provider error mid-stream, a malformed answer, and a client that
// leaves mid-stream. The stubs check every request they receive
// (headers, credentials, roles, tool result placement).
func TestNativeProviders(t *testing.T) {
	for _, tc := range nativeCases() {
		t.Run(tc.typ, func(t *testing.T) {
			script, base, key, settings, recorded := tc.start(t)
			e := newGWEnv(t, gwOpts{token: gwToken})
			seedNative(e, tc.typ, base, key, settings)
			alice := []string{"X-Gateway-User-Id", "alice"}

			r := e.must(200, "POST", "/v1/chat/completions", gwToken, chatBody("hello there", false), alice...)
			msg := r.body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
			if msg["content"] != "stub: hello there" {
				t.Errorf("answer = %v", r.raw)
			}
			if u := r.body["usage"].(map[string]any); u["prompt_tokens"] != float64(10) || u["completion_tokens"] != float64(3) {
				t.Errorf("usage = %v", u)
			}
			if reqs := script.Requests(); len(reqs) != 1 || reqs[0].Key != recorded {
				t.Errorf("upstream requests = %d, credential %q; want 1 with %q", len(reqs), reqs[0].Key, recorded)
			}

			text, errData := streamedText(t, e.stream("/v1/chat/completions", chatBody("one two three", true), alice...))
			if text != "stub: one two three" || errData != "" {
				t.Errorf("streamed %q (error %s)", text, errData)
			}

			r = e.must(200, "POST", "/v1/responses", gwToken, `{"model":"agent:default","input":"via responses"}`, alice...)
			out := r.body["output"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)
			if out["text"] != "stub: via responses" {
				t.Errorf("responses = %s", r.raw)
			}

			ws := dialWS(t, e)
			ws.mustOK("connect", map[string]any{"token": gwToken, "user_id": "alice"})
			res, events := ws.call("chat.completions", map[string]any{"model": "gateway:default", "stream": true,
				"messages": []map[string]string{{"role": "user", "content": "over the socket"}}})
			var wsText strings.Builder
			for _, ev := range events {
				var c chatChunk
				if json.Unmarshal(ev.Payload, &c) == nil && len(c.Choices) > 0 {
					wsText.WriteString(c.Choices[0].Delta.Content)
				}
			}
			if !res.OK || wsText.String() != "stub: over the socket" {
				t.Errorf("ws chat = %+v, text %q", res, wsText.String())
			}

			// A tool loop of two iterations: save a note, search it, answer.
			script.Push(
				llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "memory_save", Args: `{"content":"alice likes green tea"}`}}},
				llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "memory_search", Args: `{"query":"tea"}`}}},
				llmtest.Reply{Text: "you like green tea"},
			)
			for _, stream := range []bool{false, true} {
				if stream {
					script.Push(
						llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "memory_save", Args: `{"content":"alice likes oolong"}`}}},
						llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "memory_search", Args: `{"query":"oolong"}`}}},
						llmtest.Reply{Text: "you like green tea"},
					)
					text, errData := streamedText(t, e.stream("/v1/chat/completions", chatBody("what do I like?", true), alice...))
					if text != "you like green tea" || errData != "" {
						t.Errorf("streamed tool loop = %q (error %s)", text, errData)
					}
					continue
				}
				r = e.must(200, "POST", "/v1/chat/completions", gwToken, chatBody("what do I like?", false), alice...)
				if c := r.body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]; c != "you like green tea" {
					t.Errorf("tool loop answer = %s", r.raw)
				}
			}
			if n := script.Pending(); n != 0 {
				t.Errorf("%d scripted replies left", n)
			}
			tr := lastTrace(t, e)
			var kinds []string
			for _, sp := range tr.Spans {
				kinds = append(kinds, sp.Kind+":"+sp.Provider+sp.Name[len(sp.Kind):])
			}
			if len(tr.Spans) != 5 || tr.Spans[1].Name != "tool memory_save" || tr.Spans[3].Name != "tool memory_search" ||
				tr.Spans[4].ProviderType != strings.Fields(tc.typ)[0] || tr.ProviderType != strings.Fields(tc.typ)[0] {
				t.Errorf("tool loop spans = %v, provider type %q", kinds, tr.ProviderType)
			}

			// A provider error mid-stream reaches the client as an error,
			// after the text that came before it.
			script.Push(llmtest.Reply{Text: "half of an answer here", StreamErrorAfter: 2, ErrorType: tc.streamErr, ErrorMessage: "it broke"})
			text, errData = streamedText(t, e.stream("/v1/chat/completions", chatBody("break", true), alice...))
			if !strings.Contains(errData, `"code":"UNAVAILABLE"`) || !strings.HasPrefix("half of an answer here", text) {
				t.Errorf("mid-stream error: text %q, error event %q", text, errData)
			}

			// A malformed answer is a clean 502 envelope.
			script.Push(llmtest.Reply{Raw: `{"this is": not json`})
			if r := e.do("POST", "/v1/chat/completions", gwToken, chatBody("garbage", false), alice...); r.status != 502 || r.errCode() != codeUnavailable {
				t.Errorf("malformed answer = %d %s", r.status, r.raw)
			}

			// A client that leaves mid-stream ends the upstream call: the
			// run is recorded as such long before the agent's time limit.
			script.Push(llmtest.Reply{Text: "never finished", Hang: true})
			req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", strings.NewReader(chatBody("hang", true)))
			req.Header.Set("Authorization", "Bearer "+gwToken)
			resp, err := e.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 512)
			if _, err := resp.Body.Read(buf); err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			deadline := time.Now().Add(10 * time.Second)
			for {
				ts, _ := e.gw.Traces(ctxT(t), gateway.TraceFilter{Status: gateway.RunFailed})
				if len(ts) > 0 && ts[0].Error == "client disconnected" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no run ended by the client leaving: %+v", ts)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// lastTrace waits for the newest run's trace.
func lastTrace(t *testing.T, e *gwEnv) gateway.Trace {
	t.Helper()
	time.Sleep(50 * time.Millisecond) // runs are recorded after the answer
	ts, err := e.gw.Traces(ctxT(t), gateway.TraceFilter{})
	if err != nil || len(ts) == 0 {
		t.Fatalf("traces: %v", err)
	}
	return ts[0]
}

// TestProviderFallbackAndKeyPool: an agent whose Anthropic provider is
// overloaded (529, then 500) answers from its Gemini fallback within the
// same turn, streaming unchanged, with every attempt a span; a provider
// with a pool of three keys, one revoked and one rate-limited, keeps
// answering on the third, and its detail shows each key's state; its
// model list and verification go through the real runtime.
func TestProviderFallbackAndKeyPool(t *testing.T) {
	ant, gem, oa := llmtest.NewAnthropic(t), llmtest.NewGemini(t), llmtest.NewOpenAI(t)
	ant.Default = &llmtest.Reply{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "Overloaded"}
	ant.Push(llmtest.Reply{Status: 500, ErrorType: "api_error", ErrorMessage: "Internal"})
	e := newGWEnv(t, gwOpts{token: gwToken})
	alice := []string{"X-Gateway-User-Id", "alice"}
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"claude","provider_type":"anthropic","api_base":"`+ant.URL+`","api_key":"sk-ant-fallback-0001","settings":{"max_retries":1}}`)
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"gem","provider_type":"gemini_native","api_base":"`+gem.URL+`","api_key":"gm-fallback-key-0002"}`)
	r := e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"default","provider":"claude","model":"claude-x","fallbacks":[{"provider":"gem","model":"gemini-y"}]}`, alice...)
	if fb := r.body["fallbacks"].([]any); len(fb) != 1 || fb[0].(map[string]any)["provider"] != "gem" {
		t.Fatalf("agent fallbacks = %s", r.raw)
	}
	text, errData := streamedText(t, e.stream("/v1/chat/completions", chatBody("fall back please", true), alice...))
	if text != "stub: fall back please" || errData != "" {
		t.Fatalf("streamed through the fallback: %q (error %s)", text, errData)
	}
	tr := lastTrace(t, e)
	var got []string
	for _, sp := range tr.Spans {
		got = append(got, fmt.Sprintf("%s/%s/%d/%s", sp.Provider, sp.Model, sp.Attempt, sp.Status))
	}
	want := "claude/claude-x/1/failed claude/claude-x/2/failed gem/gemini-y/3/ok"
	if strings.Join(got, " ") != want || tr.Provider != "gem" || tr.Model != "gemini-y" || tr.ProviderType != "gemini_native" {
		t.Errorf("spans %v, answered by %s/%s (%s); want %s", got, tr.Provider, tr.Model, tr.ProviderType, want)
	}
	if !strings.Contains(tr.Spans[0].Error, "status 500") || !strings.Contains(tr.Spans[1].Error, "overloaded_error") {
		t.Errorf("attempt errors %q, %q", tr.Spans[0].Error, tr.Spans[1].Error)
	}

	// The key pool.
	const revoked, limited, good = "sk-pool-revoked-1111", "sk-pool-limited-2222", "sk-pool-good-33333"
	oa.OnKey(revoked, llmtest.Reply{Status: 401, ErrorType: "invalid_api_key", ErrorMessage: "Incorrect API key"})
	oa.OnKey(limited, llmtest.Reply{Status: 429, ErrorType: "rate_limit_exceeded", ErrorMessage: "slow down", Headers: map[string]string{"Retry-After": "3600"}})
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"pool","provider_type":"openai_compat","api_base":"`+oa.Base()+`","api_keys":["`+revoked+`","`+limited+`","`+good+`"]}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"pooled","provider":"pool","model":"gpt-4o"}`, alice...)
	for i := range 3 {
		r := e.must(200, "POST", "/v1/chat/completions", gwToken, `{"model":"gateway:pooled","messages":[{"role":"user","content":"n`+fmt.Sprint(i)+`"}]}`, alice...)
		if !strings.Contains(r.raw, "stub: n"+fmt.Sprint(i)) {
			t.Errorf("pooled answer %d = %s", i, r.raw)
		}
	}
	byKey := map[string]int{}
	for _, rq := range oa.Requests() {
		byKey[rq.Key]++
	}
	if byKey[revoked] != 1 || byKey[limited] != 1 || byKey[good] != 3 {
		t.Errorf("upstream calls by key = %v; want the revoked and limited keys once each", byKey)
	}
	d := e.must(200, "GET", "/v1/providers/pool", gwToken, "")
	if strings.Contains(d.raw, "pool-revoked") || strings.Contains(d.raw, "pool-good") {
		t.Fatalf("a key shown in clear: %s", d.raw)
	}
	states := map[string]string{}
	for _, k := range d.body["key_states"].([]any) {
		m := k.(map[string]any)
		states[m["key"].(string)] = m["state"].(string)
	}
	if states["****1111"] != "rejected" || states["****2222"] != "cooling_down" || states["****3333"] != "ready" || d.body["last_error"] == "" {
		t.Errorf("key states = %v, last_error %v", states, d.body["last_error"])
	}

	// Models and verify, through the runtime and the stubs.
	m := e.must(200, "GET", "/v1/providers/pool/models", gwToken, "")
	if ms := m.body["data"].([]any); len(ms) == 0 || ms[0].(map[string]any)["id"] == "" {
		t.Errorf("models = %s", m.raw)
	}
	v := e.must(200, "POST", "/v1/providers/gem/verify", gwToken, "")
	if v.body["ok"] != true {
		t.Errorf("verify = %s", v.raw)
	}
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"badkey","provider_type":"openai_compat","api_base":"`+oa.Base()+`","api_key":"`+revoked+`"}`)
	v = e.must(200, "POST", "/v1/providers/badkey/verify", gwToken, "")
	if v.body["ok"] != false || !strings.Contains(fmt.Sprint(v.body["error"]), "401") {
		t.Errorf("verify with a revoked key = %s", v.raw)
	}
}

// TestProviderUsageKinds: the cache and reasoning tokens a provider
// reports reach the chat answer (OpenAI's *_details), the responses
// answer, the run's spans and /v1/usage; nothing is estimated.
func TestProviderUsageKinds(t *testing.T) {
	ant := llmtest.NewAnthropic(t)
	ant.Default = &llmtest.Reply{Text: "cached answer", Usage: llmtest.Usage{Prompt: 100, CacheRead: 60, CacheWrite: 20, Completion: 12}}
	e := newGWEnv(t, gwOpts{token: gwToken})
	alice := []string{"X-Gateway-User-Id", "alice"}
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"claude","provider_type":"anthropic_native","api_base":"`+ant.URL+`","api_key":"sk-ant-usage-000001"}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"default","provider":"claude","model":"claude-x"}`, alice...)
	r := e.must(200, "POST", "/v1/chat/completions", gwToken, chatBody("hi", false), alice...)
	u := r.body["usage"].(map[string]any)
	pd, _ := u["prompt_tokens_details"].(map[string]any)
	if u["prompt_tokens"] != float64(100) || u["completion_tokens"] != float64(12) || pd["cached_tokens"] != float64(60) || pd["cache_write_tokens"] != float64(20) {
		t.Errorf("chat usage = %v", u)
	}
	r = e.must(200, "POST", "/v1/responses", gwToken, `{"model":"agent:default","input":"hi"}`, alice...)
	ru := r.body["usage"].(map[string]any)
	if id, _ := ru["input_tokens_details"].(map[string]any); ru["input_tokens"] != float64(100) || id["cached_tokens"] != float64(60) {
		t.Errorf("responses usage = %v", ru)
	}
	tr := lastTrace(t, e)
	if sp := tr.Spans[0]; sp.CacheReadTokens != 60 || sp.CacheWriteTokens != 20 || sp.PromptTokens != 100 || sp.ProviderType != "anthropic_native" {
		t.Errorf("span = %+v", sp)
	}
	us := e.must(200, "GET", "/v1/usage", gwToken, "")
	if !strings.Contains(us.raw, `"cache_read_tokens":120`) || !strings.Contains(us.raw, `"cache_write_tokens":40`) {
		t.Errorf("usage = %s", us.raw)
	}
}
