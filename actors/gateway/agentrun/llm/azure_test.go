package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"gatehouse/actors/gateway/agentrun/llm"
	"gatehouse/actors/gateway/agentrun/llm/llmtest"
)

// azureModes are the two URL schemes: a dated api-version
// (deployments in the path) and the v1 API (the deployment as model).
var azureModes = []struct {
	name, version, settings string
	path                    string // the chat path for model gpt-4o
	bodyModel               any    // the body's model (nil: none)
}{
	{"deployments", "2024-10-21", `{"api_version":"2024-10-21","deployments":{"gpt-4o":"prod-4o"}}`, "/openai/deployments/prod-4o/chat/completions", nil},
	{"v1", "v1", `{"api_version":"v1","deployments":{"gpt-4o":"prod-4o"}}`, "/openai/v1/chat/completions", "prod-4o"},
}

func azureHello() llm.Request {
	return llm.Request{Model: "gpt-4o", Messages: []llm.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "say hello"}}}
}

// TestAzureAnswer: whole and streamed answers in both modes: the path,
// api-version, api-key (never Authorization), the deployment, and the
// stream's empty first chunk (prompt_filter_results) skipped.
func TestAzureAnswer(t *testing.T) {
	for _, mode := range azureModes {
		for _, stream := range []bool{false, true} {
			t.Run(mode.name+map[bool]string{false: "/whole", true: "/stream"}[stream], func(t *testing.T) {
				stub := llmtest.NewAzure(t, mode.version)
				stub.Push(llmtest.Reply{Text: "hello from azure", Usage: llmtest.Usage{Prompt: 11, Completion: 3, CacheRead: 4}})
				c := oaNew(t, "azure_openai", stub.Base(), "azure-key-1", mode.settings, 0)
				res, deltas, err := oaCall(t, c, azureHello(), stream)
				if err != nil {
					t.Fatal(err)
				}
				if res.Content != "hello from azure" || res.PromptTokens != 11 || res.CompletionTokens != 3 || res.CacheReadTokens != 4 || res.FinishReason != "stop" {
					t.Errorf("Complete = %+v", res)
				}
				if stream && strings.Join(deltas, "|") != "hello| from| azure" {
					t.Errorf("deltas = %q", deltas)
				}
				r := stub.Requests()[0]
				if r.Path != mode.path || r.Key != "azure-key-1" || r.Header.Get("Authorization") != "" {
					t.Errorf("request %s key %q Authorization %q, want %s with api-key", r.Path, r.Key, r.Header.Get("Authorization"), mode.path)
				}
				if mode.version != "v1" && r.Query != "api-version="+mode.version {
					t.Errorf("query = %q", r.Query)
				}
				if got := oaBody(t, r)["model"]; got != mode.bodyModel {
					t.Errorf("body model = %v, want %v", got, mode.bodyModel)
				}
			})
		}
	}
}

// TestAzureModelAsDeployment: a model without a deployments entry is
// its own deployment; an unknown one is Azure's 404.
func TestAzureModelAsDeployment(t *testing.T) {
	stub := llmtest.NewAzure(t, "2024-10-21")
	stub.Deployments = []string{"gpt-4o-mini"}
	c := oaNew(t, "azure_openai", stub.Base(), "k", `{"api_version":"2024-10-21"}`, 0)
	if _, _, err := oaCall(t, c, llm.Request{Model: "gpt-4o-mini", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, false); err != nil {
		t.Fatal(err)
	}
	if p := stub.Requests()[0].Path; p != "/openai/deployments/gpt-4o-mini/chat/completions" {
		t.Errorf("path = %s", p)
	}
	_, _, err := oaCall(t, c, llm.Request{Model: "nope", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, false)
	if e := oaErr(t, err); e.Status != 404 || e.Type != "DeploymentNotFound" || e.Retryable() {
		t.Errorf("unknown deployment: %+v", e)
	}
}

// TestAzureOldVersionNoStreamOptions: an api-version older than
// 2024-08-01 refuses stream_options, so none is sent (and the stream
// carries no usage).
func TestAzureOldVersionNoStreamOptions(t *testing.T) {
	stub := llmtest.NewAzure(t, "2024-02-01")
	c := oaNew(t, "azure_openai", stub.Base(), "k", `{"api_version":"2024-02-01"}`, 0)
	res, _, err := oaCall(t, c, azureHello(), true)
	if err != nil || res.Content != "stub: say hello" {
		t.Fatalf("Complete = %+v, %v", res, err)
	}
	if _, ok := oaBody(t, stub.Requests()[0])["stream_options"]; ok {
		t.Errorf("stream_options sent to api-version 2024-02-01")
	}
}

// TestAzureToolLoop: two iterations in both modes; the stub checks the
// tool results' placement and ids.
func TestAzureToolLoop(t *testing.T) {
	for _, mode := range azureModes {
		t.Run(mode.name, func(t *testing.T) {
			stub := llmtest.NewAzure(t, mode.version)
			stub.Push(llmtest.Reply{ToolCalls: []llmtest.Call{{ID: "call_z", Name: "lookup", Args: `{"q":"x"}`}}}, llmtest.Reply{Text: "found it"})
			c := oaNew(t, "azure_openai", stub.Base(), "k", mode.settings, 0)
			req := azureHello()
			req.Tools = []llm.ToolSpec{{Type: "function", Function: llm.ToolSpecFunc{Name: "lookup", Parameters: json.RawMessage(`{"type":"object"}`)}}}
			res, _, err := oaCall(t, c, req, true)
			if err != nil || len(res.ToolCalls) != 1 || res.ToolCalls[0].Function.Arguments != `{"q":"x"}` || res.FinishReason != "tool_calls" {
				t.Fatalf("first = %+v, %v", res, err)
			}
			req.Messages = append(req.Messages, llm.Message{Role: "assistant", ToolCalls: res.ToolCalls}, llm.Message{Role: "tool", ToolCallID: "call_z", Content: "x is y"})
			res, _, err = oaCall(t, c, req, false)
			if err != nil || res.Content != "found it" {
				t.Fatalf("second = %+v, %v", res, err)
			}
			m := oaBody(t, stub.Requests()[1])["messages"].([]any)[2].(map[string]any)
			if m["role"] != "assistant" || m["content"] != nil {
				t.Errorf("assistant message = %v, want null content with its calls", m)
			}
		})
	}
}

// TestAzureErrors: statuses in Azure's shape ({"error": {"code",
// "message"}}), retry-after-ms, a mid-stream error.
func TestAzureErrors(t *testing.T) {
	stub := llmtest.NewAzure(t, "2024-10-21")
	stub.Push(
		llmtest.Reply{Status: 429, ErrorMessage: "Requests have exceeded the call rate limit. Please retry after 2 seconds.", Headers: map[string]string{"retry-after": "2", "retry-after-ms": "1800"}},
		llmtest.Reply{Status: 401, ErrorMessage: "Access denied due to invalid subscription key or wrong API endpoint."},
		llmtest.Reply{Status: 500, ErrorType: "InternalServerError", ErrorMessage: "boom"},
		llmtest.Reply{Text: "a b c", StreamErrorAfter: 1, ErrorType: "server_error", ErrorMessage: "stream broke"},
	)
	c := oaNew(t, "azure_openai", stub.Base(), "k", `{"api_version":"2024-10-21"}`, 0)
	_, _, err := oaCall(t, c, azureHello(), false)
	if e := oaErr(t, err); e.Status != 429 || e.Type != "429" || e.RetryAfter != 1800*time.Millisecond || !e.RateLimited() || !strings.Contains(e.Message, "retry after") {
		t.Errorf("429: %+v", e)
	}
	_, _, err = oaCall(t, c, azureHello(), true)
	if e := oaErr(t, err); !e.KeyRejected() || e.Retryable() {
		t.Errorf("401: %+v", e)
	}
	_, _, err = oaCall(t, c, azureHello(), false)
	if e := oaErr(t, err); e.Status != 500 || e.Type != "InternalServerError" || !e.Retryable() {
		t.Errorf("500: %+v", e)
	}
	_, deltas, err := oaCall(t, c, azureHello(), true)
	if e := oaErr(t, err); e.Kind != llm.KindStream || e.Message != "stream broke" || len(deltas) != 1 {
		t.Errorf("mid-stream: %+v after %q", e, deltas)
	}
}

// TestAzureCancel: a cancelled stream returns ctx's error at once.
func TestAzureCancel(t *testing.T) {
	stub := llmtest.NewAzure(t, "v1")
	stub.Push(llmtest.Reply{Text: "one two", Hang: true})
	c := oaNew(t, "azure_openai", stub.Base(), "k", `{"api_version":"v1"}`, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	_, err := c.Complete(ctx, azureHello(), func(string) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Errorf("Complete = %v after %v, want context.Canceled at once", err, time.Since(start))
	}
}

// TestAzureModels: the model list in both modes, Verify, and a revoked
// key.
func TestAzureModels(t *testing.T) {
	for _, mode := range azureModes {
		t.Run(mode.name, func(t *testing.T) {
			stub := llmtest.NewAzure(t, mode.version)
			stub.OnKey("revoked", llmtest.Reply{Status: 401})
			c := oaNew(t, "azure_openai", stub.Base(), "good", mode.settings, 0)
			ms, err := c.Models(context.Background())
			if err != nil || len(ms) != 2 {
				t.Fatalf("Models = %v, %v", ms, err)
			}
			if err := c.Verify(context.Background()); err != nil {
				t.Errorf("Verify = %v", err)
			}
			bad := oaNew(t, "azure_openai", stub.Base(), "revoked", mode.settings, 0)
			if e := oaErr(t, bad.Verify(context.Background())); !e.KeyRejected() {
				t.Errorf("Verify(revoked) = %+v", e)
			}
		})
	}
}

// TestAzureValidate: api_base and api_version are required; deployments
// is an object of strings.
func TestAzureValidate(t *testing.T) {
	ti, ok := llm.Lookup("azure_openai")
	if !ok || !ti.NeedsKey || ti.DefaultBase != "" {
		t.Fatalf("azure_openai = %+v, %v", ti, ok)
	}
	const base = "https://res.openai.azure.com"
	tests := []struct {
		base, settings, want string
	}{
		{base, `{"api_version":"2024-10-21"}`, ""},
		{base, `{"api_version":"v1","deployments":{"gpt-4o":"prod"}}`, ""},
		{"", `{"api_version":"v1"}`, "api_base"},
		{"res.openai.azure.com", `{"api_version":"v1"}`, "api_base"},
		{base, ``, "settings.api_version is required"},
		{base, `{"api_version":20241021}`, "settings.api_version must be a string"},
		{base, `{"api_version":"x&y=1"}`, "settings.api_version"},
		{base, `{"api_version":"v1","deployments":["a"]}`, "settings.deployments"},
		{base, `{"api_version":"v1","deployments":{"a":1}}`, "settings.deployments"},
		{base, `{"api_version":"v1","deployments":{"a":"b/c"}}`, "settings.deployments[a]"},
		{base, `{"api_version":"v1","max_tokens":-1}`, "settings.max_tokens"},
	}
	for _, tt := range tests {
		err := ti.Validate(tt.base, json.RawMessage(tt.settings))
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Validate(%q, %s) = %v, want %q", tt.base, tt.settings, err, tt.want)
		}
	}
}
