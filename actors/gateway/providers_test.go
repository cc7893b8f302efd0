package gateway

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"gatehouse/actors/gateway/agentrun/llm"
	"gatehouse/wal"
)

// TestProviderTypes: every type the provider clients register is
// accepted with its own checks; the type is stored as given.
func TestProviderTypes(t *testing.T) {
	gw := start(newNode(t, DefaultConfig(), nil))
	tests := []struct {
		name, typ, base, settings string
		wantErr                   string // a part of the ErrInvalid message; "" for success
	}{
		{"echo", ProviderEcho, "", ``, ""},
		{"echo ignores base", ProviderEcho, "not a url", `{"delay_ms":5}`, ""},
		{"openai_compat", ProviderOpenAICompat, "http://127.0.0.1:1/v1", ``, ""},
		{"openai_compat without base", ProviderOpenAICompat, "", ``, "api_base must be an http:// or https:// URL"},
		{"openai_compat base with query", ProviderOpenAICompat, "http://127.0.0.1:1/v1?key=x", ``, "must not carry credentials"},
		{"openai preset", "openai", "", ``, ""},
		{"groq preset", "groq", "", `{"max_tokens":100}`, ""},
		{"anthropic alias", "anthropic", "", `{"thinking_budget_tokens":2048,"prompt_caching":false}`, ""},
		{"anthropic_native", "anthropic_native", "http://127.0.0.1:2", ``, ""},
		{"anthropic bad setting", "anthropic_native", "", `{"prompt_caching":"yes"}`, "settings.prompt_caching"},
		{"anthropic bad base", "anthropic_native", "ftp://x", ``, "api_base must be an http:// or https:// URL"},
		{"gemini alias", "gemini", "", ``, ""},
		{"gemini_native", "gemini_native", "http://127.0.0.1:3", ``, ""},
		{"azure", "azure_openai", "https://x.openai.azure.com", `{"api_version":"2024-10-21","deployments":{"gpt-4o":"prod"}}`, ""},
		{"azure without api_version", "azure_openai", "https://x.openai.azure.com", `{}`, "settings.api_version is required"},
		{"azure without base", "azure_openai", "", `{"api_version":"v1"}`, "api_base"},
		{"bedrock with region", "bedrock", "", `{"region":"us-east-1"}`, ""},
		{"bedrock with base", "bedrock", "http://127.0.0.1:4", ``, ""},
		{"bedrock without region or base", "bedrock", "", `{}`, "settings.region is required"},
		{"bedrock bad region", "bedrock", "", `{"region":"moon"}`, "settings.region"},
		{"ollama default base", "ollama", "", ``, ""},
		{"settings not an object", "ollama", "", `[1]`, "settings must be a JSON object"},
		{"unknown type", "llama_cpp", "http://127.0.0.1:5", ``, "provider_type must be one of "},
		{"empty type", "", "", ``, "provider_type must be one of "},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := llm.Lookup(tt.typ); !ok && tt.typ != ProviderEcho && tt.wantErr == "" {
				t.Fatalf("type %q is not registered by package llm", tt.typ)
			}
			in := ProviderInput{Name: "p" + string(rune('a'+i)), ProviderType: tt.typ, APIBase: tt.base, Enabled: true}
			if tt.settings != "" {
				in.Settings = []byte(tt.settings)
			}
			p, err := gw.CreateProvider(ctx(t), in)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("CreateProvider(%s) = %v, want ErrInvalid with %q", tt.typ, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("CreateProvider(%s) = %v", tt.typ, err)
			}
			if p.ProviderType != tt.typ {
				t.Errorf("provider_type = %q, want %q as given", p.ProviderType, tt.typ)
			}
			// An update checks the same rules.
			in.Settings = []byte(`"x"`)
			if _, err := gw.UpdateProvider(ctx(t), p.Name, in); !errors.Is(err, ErrInvalid) {
				t.Errorf("UpdateProvider(settings \"x\") = %v, want ErrInvalid", err)
			}
		})
	}
	// The unknown type's message names every accepted type.
	_, err := gw.CreateProvider(ctx(t), ProviderInput{Name: "zz", ProviderType: "nope"})
	for _, n := range append(llm.Names(), ProviderEcho) {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("unknown type error %q does not name %s", err, n)
		}
	}
}

// TestProviderKeyPool: api_keys are sealed, masked, opened in order after
// api_key, kept when absent, cleared by [], bounded, and replayed.
func TestProviderKeyPool(t *testing.T) {
	n := newNode(t, DefaultConfig(), nil)
	gw := start(n)
	admin := WithActor(ctx(t), Actor{Type: ActorToken, ID: "admin", IP: "127.0.0.1"})
	keys := []string{"sk-pool-first-key-0001", "short", "sk-pool-third-key-0003"}
	p, err := gw.CreateProvider(admin, ProviderInput{Name: "pool", ProviderType: "anthropic", APIKey: ptr("sk-main-key-123456"), APIKeys: &keys, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"****0001", "****", "****0003"}; !cmp.Equal(p.APIKeysHint, want) || p.APIKeyHint != "****3456" {
		t.Errorf("hints = %q, %q; want ****3456, %q", p.APIKeyHint, p.APIKeysHint, want)
	}
	got, err := gw.ProviderKeys(p)
	if want := append([]string{"sk-main-key-123456"}, keys...); err != nil || !cmp.Equal(got, want) {
		t.Errorf("ProviderKeys = %q, %v; want %q", got, err, want)
	}
	// Nil keeps the pool; api_key cleared leaves the pool alone.
	p, err = gw.UpdateProvider(ctx(t), "pool", ProviderInput{Name: "pool", ProviderType: "anthropic", APIKey: ptr(""), Enabled: true})
	if err != nil || len(p.APIKeysSealed) != 3 || p.APIKeyHint != "" {
		t.Fatalf("update without api_keys = %+v, %v; want the 3 keys kept, api_key cleared", p, err)
	}
	if got, _ := gw.ProviderKeys(p); !cmp.Equal(got, keys) {
		t.Errorf("ProviderKeys without api_key = %q, want %q", got, keys)
	}
	live, _ := gw.GetProvider(ctx(t), "pool")
	n.Crash()
	gw = start(n)
	replayed, err := gw.GetProvider(ctx(t), "pool")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(live, replayed); diff != "" {
		t.Errorf("replayed provider differs from live (-live +replayed):\n%s", diff)
	}
	if got, _ := gw.ProviderKeys(replayed); !cmp.Equal(got, keys) {
		t.Errorf("replayed ProviderKeys = %q, want %q", got, keys)
	}
	p, err = gw.UpdateProvider(WithActor(ctx(t), Actor{Type: ActorToken, ID: "admin"}), "pool", ProviderInput{Name: "pool", ProviderType: "anthropic", APIKeys: &[]string{}, Enabled: true})
	if err != nil || p.APIKeysSealed != nil || p.APIKeysHint == nil || len(p.APIKeysHint) != 0 {
		t.Fatalf("update with api_keys [] = %+v, %v; want the pool cleared, hints []", p, err)
	}
	tooMany := make([]string, MaxProviderKeys+1)
	for i := range tooMany {
		tooMany[i] = "k"
	}
	for _, bad := range []struct {
		keys []string
		want string
	}{
		{tooMany, "at most 16 keys"},
		{[]string{"a", ""}, "api_keys[1] must not be empty"},
		{[]string{strings.Repeat("k", MaxProviderKeyBytes+1)}, "api_keys[0] must be at most 8192 bytes"},
	} {
		_, err := gw.UpdateProvider(ctx(t), "pool", ProviderInput{Name: "pool", ProviderType: "anthropic", APIKeys: &bad.keys})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("api_keys of %d keys = %v, want ErrInvalid with %q", len(bad.keys), err, bad.want)
		}
	}
	// The audit entry counts the keys and shows none.
	acts, _, err := gw.Activity(ctx(t), ActivityFilter{EntityType: string(kindProvider)})
	if err != nil {
		t.Fatal(err)
	}
	var sums []string
	for _, a := range acts {
		sums = append(sums, a.Summary)
		if strings.Contains(a.Summary, "sk-") {
			t.Errorf("audit summary %q shows a key", a.Summary)
		}
	}
	if !strings.Contains(strings.Join(sums, "\n"), "credential set, 3 keys set") || !strings.Contains(strings.Join(sums, "\n"), ", 0 keys set") {
		t.Errorf("audit summaries = %q, want one with \"credential set, 3 keys set\" and one with \"0 keys set\"", sums)
	}
}

// TestPreviousLayoutsDecode: provider, agent and run records written
// before key pools, fallbacks and the new token kinds decode unchanged and
// show an empty pool, no fallbacks and zero counts.
func TestPreviousLayoutsDecode(t *testing.T) {
	decode := func(file string, typ wal.Type) event {
		t.Helper()
		ev, err := decodeEvent(wal.Record{Type: typ, Data: readGolden(t, filepath.Join("testdata", file+".golden"))})
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		return ev
	}
	for _, f := range []struct {
		file string
		typ  wal.Type
	}{{"legacy_065_provider_put", recLegacyProviderPut}, {"070_entity_saved_provider", recEntitySaved}} {
		p := decode(f.file, f.typ).(entitySaved).ent.(*providerRec).view()
		if p.APIKeysSealed != nil || p.APIKeysHint == nil || len(p.APIKeysHint) != 0 || p.APIKeyHint != "****3456" {
			t.Errorf("%s: provider = %+v, want no pool (api_keys []) and its api_key", f.file, p)
		}
		if b, _ := json.Marshal(p); !strings.Contains(string(b), `"api_keys":[]`) {
			t.Errorf("%s: provider JSON %s lacks \"api_keys\":[]", f.file, b)
		}
	}
	providers := newTable(func(p *providerRec) string { return p.Name })
	for _, f := range []struct {
		file string
		typ  wal.Type
	}{{"legacy_067_agent_put", recLegacyAgentPut}, {"070_entity_saved_agent", recEntitySaved}} {
		a := decode(f.file, f.typ).(entitySaved).ent.(*agentRec).view(&providers)
		if a.Fallbacks == nil || len(a.Fallbacks) != 0 || a.OtherConfig.MaxTokens != 0 || a.Model != "gpt-x" {
			t.Errorf("%s: agent = %+v, want fallbacks [] and max_tokens 0", f.file, a)
		}
	}
	run := decode("legacy_069_run_recorded", recLegacyRunRecorded).(runRecorded).run.view(true)
	if c := run.TokenCounts(); c != (TokenCounts{Prompt: 12, Completion: 7}) || run.ProviderType != "" || run.Spans[0].Attempt != 0 {
		t.Errorf("legacy run = %+v, counts %+v; want 12 prompt, 7 completion, nothing else", run, c)
	}
}
