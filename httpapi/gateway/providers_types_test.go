package gateway

import (
	"fmt"
	"strings"
	"testing"

	"gatehouse/actors/gateway/agentrun/llm"
)

// TestProviderTypesHTTP: POST /v1/providers accepts every registered type
// with its own settings checks, stores the type as given, and refuses an
// unknown type naming the accepted ones.
func TestProviderTypesHTTP(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken, deps: fakeCalls(&providerCallsFake{})})
	tests := []struct {
		name string
		body string // without name
		want int
		msg  string // part of the error message (400)
	}{
		{"echo", `"provider_type":"echo"`, 201, ""},
		{"openai_compat", `"provider_type":"openai_compat","api_base":"http://127.0.0.1:1/v1"`, 201, ""},
		{"openai_compat without base", `"provider_type":"openai_compat"`, 400, "api_base must be an http:// or https:// URL"},
		{"openrouter preset", `"provider_type":"openrouter","api_key":"sk-or-123456789012"`, 201, ""},
		{"anthropic alias", `"provider_type":"anthropic","settings":{"thinking_budget_tokens":1024}`, 201, ""},
		{"anthropic_native bad setting", `"provider_type":"anthropic_native","settings":{"thinking_budget_tokens":"lots"}`, 400, "settings.thinking_budget_tokens"},
		{"gemini alias", `"provider_type":"gemini","api_key":"AIza-test-000000"`, 201, ""},
		{"azure", `"provider_type":"azure_openai","api_base":"https://r.openai.azure.com","settings":{"api_version":"2024-10-21"}`, 201, ""},
		{"azure without api_version", `"provider_type":"azure_openai","api_base":"https://r.openai.azure.com"`, 400, "settings.api_version is required"},
		{"bedrock with region", `"provider_type":"bedrock","settings":{"region":"eu-west-1"},"api_key":"AKIDEXAMPLE:secret"`, 201, ""},
		{"bedrock without region or base", `"provider_type":"bedrock","settings":{}`, 400, "settings.region is required"},
		{"ollama", `"provider_type":"ollama"`, 201, ""},
		{"base with credentials", `"provider_type":"ollama","api_base":"http://u:p@127.0.0.1:11434"`, 400, "must not carry credentials"},
		{"unknown", `"provider_type":"watsonx"`, 400, "provider_type must be one of anthropic, anthropic_native, azure_openai, bedrock,"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("p%d", i)
			r := e.do("POST", "/v1/providers", gwToken, `{"name":"`+name+`",`+tt.body+`}`)
			if r.status != tt.want {
				t.Fatalf("POST %s = %d %s, want %d", tt.body, r.status, r.raw, tt.want)
			}
			if tt.want != 201 {
				if r.errCode() != codeInvalid || !strings.Contains(r.errMsg(), tt.msg) {
					t.Errorf("error = %s %q, want INVALID_REQUEST with %q", r.errCode(), r.errMsg(), tt.msg)
				}
				return
			}
			typ := jsonOf(t, `{`+tt.body+`}`)["provider_type"]
			got := e.must(200, "GET", "/v1/providers/"+name, gwToken, "")
			if got.body["provider_type"] != typ {
				t.Errorf("provider_type = %v, want %v as given", got.body["provider_type"], typ)
			}
			if ks, ok := got.body["api_keys"].([]any); !ok || len(ks) != 0 {
				t.Errorf("api_keys = %v, want []", got.body["api_keys"])
			}
		})
	}
	// An update is checked by the same rules: azure loses its api_version.
	r := e.do("PUT", "/v1/providers/p7", gwToken, `{"settings":{"deployments":{"gpt-4o":"prod"}}}`)
	if r.status != 400 || !strings.Contains(r.errMsg(), "settings.api_version is required") {
		t.Errorf("PUT azure without api_version = %d %s, want 400", r.status, r.raw)
	}
	r = e.do("PUT", "/v1/providers/p0", gwToken, `{"provider_type":"nope"}`)
	for _, n := range llm.Names() {
		if !strings.Contains(r.errMsg(), n) {
			t.Errorf("PUT unknown type: message %q does not name %s", r.errMsg(), n)
		}
	}
}

// TestProviderKeyPoolHTTP: api_keys are write-only, shown masked (to
// admins only), kept when absent, cleared by [], bounded, and counted in
// the audit log without their values.
func TestProviderKeyPoolHTTP(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken, deps: fakeCalls(&providerCallsFake{})})
	secrets := []string{"sk-ant-main-credential-0001", "sk-ant-pool-credential-0002", "sk-ant-pool-credential-0003"}
	r := e.must(201, "POST", "/v1/providers", gwToken, `{"name":"claude","provider_type":"anthropic_native","api_key":"`+secrets[0]+`",`+
		`"api_keys":["`+secrets[1]+`","`+secrets[2]+`"]}`)
	if r.body["api_key"] != "****0001" || fmt.Sprint(r.body["api_keys"]) != "[****0002 ****0003]" {
		t.Errorf("created: api_key %v, api_keys %v; want ****0001, [****0002 ****0003]", r.body["api_key"], r.body["api_keys"])
	}
	reader := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"r","scopes":["operator.read"],"user_id":"u1"}`).body["key"].(string)
	for _, tok := range []string{gwToken, reader} {
		for _, path := range []string{"/v1/providers/claude", "/v1/providers"} {
			got := e.must(200, "GET", path, tok, "")
			for _, s := range secrets {
				if strings.Contains(got.raw, s) {
					t.Errorf("GET %s shows a key in clear", path)
				}
			}
		}
	}
	if got := e.must(200, "GET", "/v1/providers/claude", reader, ""); fmt.Sprint(got.body["api_keys"]) != "[]" || got.body["key_states"] != nil {
		t.Errorf("reader sees api_keys %v, key_states %v; want [] and none", got.body["api_keys"], got.body["key_states"])
	}
	// Absent keeps the pool.
	if r := e.must(200, "PUT", "/v1/providers/claude", gwToken, `{"display_name":"Claude"}`); fmt.Sprint(r.body["api_keys"]) != "[****0002 ****0003]" {
		t.Errorf("PUT without api_keys: api_keys = %v, want kept", r.body["api_keys"])
	}
	p, err := e.gw.GetProvider(ctxT(t), "claude")
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := e.gw.ProviderKeys(p); err != nil || strings.Join(keys, ",") != strings.Join(secrets, ",") {
		t.Errorf("ProviderKeys = %d keys, %v; want the 3 in order", len(keys), err)
	}
	for _, bad := range []struct{ body, msg string }{
		{`{"api_keys":["a",""]}`, "api_keys[1] must not be empty"},
		{`{"api_keys":[` + strings.TrimSuffix(strings.Repeat(`"k",`, 17), ",") + `]}`, "at most 16 keys"},
		{`{"api_keys":["` + strings.Repeat("k", 8193) + `"]}`, "api_keys[0] must be at most 8192 bytes"},
		{`{"api_keys":"sk-one"}`, ""},
	} {
		if r := e.do("PUT", "/v1/providers/claude", gwToken, bad.body); r.status != 400 || !strings.Contains(r.errMsg(), bad.msg) {
			t.Errorf("PUT %.40s = %d %s, want 400 with %q", bad.body, r.status, r.errMsg(), bad.msg)
		}
	}
	if r := e.must(200, "PUT", "/v1/providers/claude", gwToken, `{"api_keys":[]}`); fmt.Sprint(r.body["api_keys"]) != "[]" || r.body["api_key"] != "****0001" {
		t.Errorf("PUT api_keys []: api_keys %v, api_key %v; want [] and api_key kept", r.body["api_keys"], r.body["api_key"])
	}
	act := e.must(200, "GET", "/v1/activity?entity_type=provider", gwToken, "")
	if !strings.Contains(act.raw, "credential set, 2 keys set") || !strings.Contains(act.raw, "0 keys set") {
		t.Errorf("activity = %s, want the key counts", act.raw)
	}
	for _, s := range secrets {
		if strings.Contains(act.raw, s) {
			t.Errorf("activity shows a key in clear")
		}
	}
}
