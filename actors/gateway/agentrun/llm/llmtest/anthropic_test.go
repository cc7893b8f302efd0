package llmtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// failTB records the stub's failures instead of failing the test.
type failTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (f *failTB) Helper() {}

func (f *failTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

func (f *failTB) failures() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.errs, "\n")
}

// anthropicPost sends body to the stub's /v1/messages with headers h.
func anthropicPost(t *testing.T, a *Anthropic, body string, h map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, a.URL+"/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := a.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

var anthropicHeaders = map[string]string{"x-api-key": "k", "anthropic-version": AnthropicVersion}

// TestAnthropicStubRefuses: each rule the stub checks fails the test and
// answers the API's error, so a client that breaks it cannot pass.
func TestAnthropicStubRefuses(t *testing.T) {
	const user = `{"role":"user","content":"hi"}`
	toolUse := `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]}`
	tests := []struct {
		name, body string
		headers    map[string]string
		status     int
		want       string
	}{
		{"no key", `{"model":"m","max_tokens":5,"messages":[` + user + `]}`, map[string]string{"anthropic-version": AnthropicVersion}, 401, "without x-api-key"},
		{"version", `{"model":"m","max_tokens":5,"messages":[` + user + `]}`, map[string]string{"x-api-key": "k", "anthropic-version": "2026-10-21"}, 400, "anthropic-version"},
		{"no max_tokens", `{"model":"m","messages":[` + user + `]}`, nil, 400, "max_tokens: Field required"},
		{"budget over max_tokens", `{"model":"m","max_tokens":1024,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[` + user + `]}`, nil, 400, "greater than thinking.budget_tokens"},
		{"two user turns", `{"model":"m","max_tokens":5,"messages":[` + user + `,` + user + `]}`, nil, 400, "roles must alternate"},
		{"assistant first", `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":"x"}]}`, nil, 400, "roles must alternate"},
		{"empty text", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":" "}]}`, nil, 400, "non-whitespace"},
		{"unknown field", `{"model":"m","max_tokens":5,"foo":1,"messages":[` + user + `]}`, nil, 400, "Extra inputs"},
		{"tool_use unanswered at the end", `{"model":"m","max_tokens":5,"messages":[` + user + `,` + toolUse + `]}`, nil, 400, "without tool_result"},
		{"tool_use unanswered", `{"model":"m","max_tokens":5,"messages":[` + user + `,` + toolUse + `,` + user + `]}`, nil, 400, "has no tool_result"},
		{"tool_result after text", `{"model":"m","max_tokens":5,"messages":[` + user + `,` + toolUse + `,{"role":"user","content":[{"type":"text","text":"x"},{"type":"tool_result","tool_use_id":"toolu_1","content":"r"}]}]}`, nil, 400, "must come first"},
		{"tool_result wrong id", `{"model":"m","max_tokens":5,"messages":[` + user + `,` + toolUse + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":"r"}]}]}`, nil, 400, "unexpected tool_use_id"},
		{"forged signature", `{"model":"m","max_tokens":5,"messages":[` + user + `,{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"forged"},{"type":"text","text":"x"}]},` + user + `]}`, nil, 400, "Invalid `signature`"},
		{"thinking missing in tool loop", `{"model":"m","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[` + user + `,` + toolUse + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"r"}]}]}`, nil, 400, "must start with a thinking block"},
		{"thinking in final assistant, thinking off", `{"model":"m","max_tokens":5,"messages":[` + user + `,{"role":"assistant","content":[{"type":"redacted_thinking","data":"d"},{"type":"text","text":"x"}]}]}`, nil, 400, "cannot contain `thinking`"},
		{"five breakpoints", `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}},{"type":"text","text":"c","cache_control":{"type":"ephemeral"}}],"tools":[{"name":"f","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}},{"name":"g","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],"messages":[` + user + `]}`, nil, 400, "maximum of 4"},
		{"schema not an object", `{"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":{"type":"string"}}],"messages":[` + user + `]}`, nil, 400, "input_schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ftb := &failTB{TB: t}
			a := NewAnthropic(ftb)
			h := tt.headers
			if h == nil {
				h = anthropicHeaders
			}
			resp := anthropicPost(t, a, tt.body, h)
			var e struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			_ = json.NewDecoder(resp.Body).Decode(&e)
			if resp.StatusCode != tt.status || e.Type != "error" || e.Error.Type != anthropicErrorTypes[tt.status] {
				t.Errorf("answer %d %+v, want %d with the API's error shape", resp.StatusCode, e, tt.status)
			}
			if got := ftb.failures(); !strings.Contains(got, tt.want) {
				t.Errorf("stub failures = %q, want one with %q", got, tt.want)
			}
		})
	}
}

// TestAnthropicStubAnswers: a valid request (Bearer key) gets the API's
// SSE, event by event, and its key is recorded with the header it came in.
func TestAnthropicStubAnswers(t *testing.T) {
	a := NewAnthropic(t)
	a.Push(Reply{Text: "a b", ToolCalls: []Call{{ID: "toolu_9", Name: "f", Args: `{"x":1}`}}})
	body := `{"model":"m","max_tokens":5,"stream":true,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}]}`
	resp := anthropicPost(t, a, body, map[string]string{"Authorization": "Bearer tok", "anthropic-version": AnthropicVersion})
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("answer %d %q", resp.StatusCode, ct)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			events = append(events, ev)
		}
	}
	want := "message_start ping content_block_start content_block_delta content_block_delta content_block_stop " +
		"content_block_start content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(events, " "); got != want {
		t.Errorf("events = %s\nwant %s", got, want)
	}
	if r := a.Requests(); len(r) != 1 || r[0].Key != "tok" {
		t.Errorf("recorded %+v, want the Bearer token as Key", r)
	}
	if d := a.Last(); d.KeyHeader != "authorization" || len(d.CacheBreakpoints) != 1 || d.CacheBreakpoints[0] != "system[0]" {
		t.Errorf("decoded key header %q, breakpoints %q", d.KeyHeader, d.CacheBreakpoints)
	}
}
