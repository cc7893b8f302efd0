package llm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"gatehouse/actors/gateway/agentrun/llm/llmtest"
)

func TestBedrockModelsVerify(t *testing.T) {
	stub := llmtest.NewBedrock(t)
	c := newBedrockClient(t, stub, nil)
	models, err := c.Models(context.Background())
	if err != nil {
		t.Fatalf("Models = %v", err)
	}
	var ids []string
	for _, m := range models {
		ids = append(ids, m.ID)
	}
	if diff := cmp.Diff(llmtest.BedrockModels, ids); diff != "" {
		t.Errorf("Models ids (-want +got):\n%s", diff)
	}
	if models[0].DisplayName == "" {
		t.Errorf("Models[0].DisplayName is empty")
	}
	if err := c.Verify(context.Background()); err != nil {
		t.Errorf("Verify = %v", err)
	}
	stub.ModelsReply = &llmtest.Reply{Status: 403, ErrorMessage: "not authorized to perform bedrock:ListFoundationModels"}
	err = c.Verify(context.Background())
	var e *Error
	if !errors.As(err, &e) || e.Status != 403 || e.Type != "AccessDeniedException" || !e.KeyRejected() {
		t.Errorf("Verify = %v, want 403 AccessDeniedException", err)
	}
	// models_endpoint overrides api_base for the control plane.
	other := llmtest.NewBedrock(t)
	c2 := newBedrockClient(t, stub, func(cfg *Config) {
		cfg.Settings = json.RawMessage(`{"region":"us-east-1","models_endpoint":"` + other.URL + `"}`)
	})
	if _, err := c2.Models(context.Background()); err != nil {
		t.Errorf("Models via models_endpoint = %v", err)
	}
}

func TestBedrockValidate(t *testing.T) {
	ti, ok := Lookup("bedrock")
	if !ok {
		t.Fatal("bedrock is not registered")
	}
	tests := []struct {
		base, settings, wantErr string
	}{
		{"", `{"region":"us-east-1"}`, ""},
		{"", `{"region":"us-gov-west-1","max_tokens":100}`, ""},
		{"http://127.0.0.1:9", `{}`, ""},
		{"", `{}`, "settings.region"},
		{"", `{"region":"Mars"}`, "settings.region"},
		{"", `{"region":7}`, "settings"},
		{"", `{"region":"eu-west-1","max_tokens":-1}`, "settings.max_tokens"},
		{"ftp://x", `{"region":"eu-west-1"}`, "api_base"},
		{"", `{"region":"eu-west-1","models_endpoint":"nope"}`, "settings.models_endpoint"},
	}
	for _, tt := range tests {
		err := ti.Validate(tt.base, json.RawMessage(tt.settings))
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("Validate(%q, %s) = %v, want error naming %q", tt.base, tt.settings, err, tt.wantErr)
		}
	}
	for _, key := range []string{"", "onlyid", "id:", ":secret", "id:secret:"} {
		_, err := New(Config{Type: "bedrock", Key: key, Settings: json.RawMessage(`{"region":"us-east-1"}`)})
		if err == nil || !strings.Contains(err.Error(), "ACCESS_KEY_ID:SECRET_ACCESS_KEY") {
			t.Errorf("New(key %q) = %v, want the key format error", key, err)
		}
		if key != "" && err != nil && strings.Contains(err.Error(), key) {
			t.Errorf("New error %q holds the key", err)
		}
	}
}

// TestBedrockDefaultEndpoint: with no api_base the SDK's endpoint is
// bedrock-runtime.{region}.amazonaws.com and the model list's is
// bedrock.{region}.amazonaws.com (seen through a transport that answers
// nothing).
func TestBedrockDefaultEndpoint(t *testing.T) {
	var hosts []string
	rt := bedrockRT(func(r *http.Request) (*http.Response, error) {
		hosts = append(hosts, r.URL.Host+r.URL.EscapedPath())
		return nil, errors.New("offline")
	})
	c, err := New(Config{Type: "bedrock", Key: "AKID:SECRET", Settings: json.RawMessage(`{"region":"eu-central-1"}`), HTTP: &http.Client{Transport: rt}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Complete(context.Background(), Request{Model: "a:b/c", Messages: []Message{{Role: "user", Content: "x"}}}, nil)
	_, _ = c.Models(context.Background())
	want := []string{"bedrock-runtime.eu-central-1.amazonaws.com/model/a%3Ab%2Fc/converse", "bedrock.eu-central-1.amazonaws.com/foundation-models"}
	if diff := cmp.Diff(want, hosts); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
}

type bedrockRT func(*http.Request) (*http.Response, error)

func (f bedrockRT) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
