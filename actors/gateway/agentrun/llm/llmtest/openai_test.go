package llmtest

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// oaTB records the stub's failures instead of failing the test.
type oaTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (f *oaTB) Helper() {}

func (f *oaTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

func (f *oaTB) failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.errs) > 0
}

// oaPost sends body to url with headers h and returns the status.
func oaPost(t *testing.T, url, body string, h map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestOpenAIStubChecks: the OpenAI and Azure stubs refuse (and fail the
// test on) what the APIs refuse, and accept a well-formed tool loop.
func TestOpenAIStubChecks(t *testing.T) {
	const user = `{"role":"user","content":"hi"}`
	const calls = `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
	bearer := map[string]string{"Authorization": "Bearer k"}
	tests := []struct {
		name, body string
		azure      string // "" : OpenAI; else the api-version
		path       string
		h          map[string]string
		ok         bool
	}{
		{"tool loop", `{"model":"m","messages":[` + user + `,` + calls + `,{"role":"tool","tool_call_id":"c1","content":"42"}]}`, "", "", bearer, true},
		{"orphan tool message", `{"model":"m","messages":[` + user + `,{"role":"tool","tool_call_id":"c1","content":"42"}]}`, "", "", bearer, false},
		{"unanswered call", `{"model":"m","messages":[` + user + `,` + calls + `,` + user + `]}`, "", "", bearer, false},
		{"wrong id", `{"model":"m","messages":[` + user + `,` + calls + `,{"role":"tool","tool_call_id":"c2","content":"42"}]}`, "", "", bearer, false},
		{"object arguments", `{"model":"m","messages":[` + user + `,{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{}}}]},{"role":"tool","tool_call_id":"c1","content":"4"}]}`, "", "", bearer, false},
		{"no model", `{"messages":[` + user + `]}`, "", "", bearer, false},
		{"stream_options without stream", `{"model":"m","messages":[` + user + `],"stream_options":{"include_usage":true}}`, "", "", bearer, false},
		{"bad tool name", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"a b"}}]}`, "", "", bearer, false},
		{"azure", `{"messages":[` + user + `]}`, "2024-10-21", "/openai/deployments/d/chat/completions?api-version=2024-10-21", map[string]string{"api-key": "k"}, true},
		{"azure Authorization", `{"messages":[` + user + `]}`, "2024-10-21", "/openai/deployments/d/chat/completions?api-version=2024-10-21", map[string]string{"api-key": "k", "Authorization": "Bearer k"}, false},
		{"azure api-version", `{"messages":[` + user + `]}`, "2024-10-21", "/openai/deployments/d/chat/completions?api-version=2023-05-15", map[string]string{"api-key": "k"}, false},
		{"azure v1 model", `{"messages":[` + user + `]}`, "v1", "/openai/v1/chat/completions", map[string]string{"api-key": "k"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ft := &oaTB{TB: t}
			var s *OpenAI
			url := ""
			if tt.azure == "" {
				s = NewOpenAI(ft)
				url = s.Base() + "/chat/completions"
			} else {
				s = NewAzure(ft, tt.azure)
				url = s.URL + tt.path
			}
			status := oaPost(t, url, tt.body, tt.h)
			if tt.ok != (status == 200 && !ft.failed()) {
				t.Errorf("status %d, failures %v; want ok %v", status, ft.errs, tt.ok)
			}
		})
	}
}

// TestOllamaStubChecks: the Ollama stub refuses a request without
// "stream", tool results not naming a call, arguments as strings.
func TestOllamaStubChecks(t *testing.T) {
	const calls = `{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]}`
	tests := []struct {
		name, body string
		ok         bool
	}{
		{"tool loop", `{"model":"m","stream":false,"messages":[` + calls + `,{"role":"tool","content":"1","tool_name":"f"}]}`, true},
		{"no stream", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, false},
		{"no tool_name", `{"model":"m","stream":true,"messages":[` + calls + `,{"role":"tool","content":"1"}]}`, false},
		{"wrong tool_name", `{"model":"m","stream":true,"messages":[` + calls + `,{"role":"tool","content":"1","tool_name":"g"}]}`, false},
		{"string arguments", `{"model":"m","stream":false,"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"1","tool_name":"f"}]}`, false},
		{"orphan tool", `{"model":"m","stream":false,"messages":[{"role":"user","content":"x"},{"role":"tool","content":"1","tool_name":"f"}]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ft := &oaTB{TB: t}
			s := NewOllama(ft)
			status := oaPost(t, s.URL+"/api/chat", tt.body, nil)
			if tt.ok != (status == 200 && !ft.failed()) {
				t.Errorf("status %d, failures %v; want ok %v", status, ft.errs, tt.ok)
			}
		})
	}
}
