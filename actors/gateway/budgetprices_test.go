package gateway

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestBudgetPricesTiers: the worst case budgets reserve is at the
// long-context tier's rates once its input count may exceed the tier's
// threshold, and at the base rates up to it; a call is settled at the
// rates its reported prompt falls in; a provider's settings.prices tier is
// validated when the provider is saved, the error naming the field.
func TestBudgetPricesTiers(t *testing.T) {
	gw := start(newNode(t, DefaultConfig(), nil))
	prov := Provider{ProviderType: "openai", Settings: json.RawMessage(
		`{"prices": {"long": {"input": 1, "output": 2, "above": {"tokens": 1000, "input": 3, "output": 5}}}}`)}
	sonnet := Provider{ProviderType: "anthropic_native"}
	for _, tc := range []struct {
		name                       string
		p                          Provider
		model                      string
		bytes                      int64
		messages                   int
		maxTokens                  int64
		want                       int64
		prompt, completion, settle int64 // a usage and its cost
	}{
		// 984 bytes + 2×8 = 1000 tokens: not above 1000, base rates (1000, 2000 nano per token).
		{"provider tier, at the threshold", prov, "long", 984, 2, 10, 1000*1000 + 10*2000, 1000, 10, 1000*1000 + 10*2000},
		// 1001 tokens may exceed it: the tier's rates (3000, 5000).
		{"provider tier, above", prov, "long", 985, 2, 10, 1001*3000 + 10*5000, 1001, 10, 1001*3000 + 10*5000},
		// reserved above, settled below: the prompt was shorter than its bytes.
		{"provider tier, settled below", prov, "long", 985, 2, 10, 1001*3000 + 10*5000, 600, 10, 600*1000 + 10*2000},
		// the built-in Sonnet 4.5: 3.75 (cache write) and 15 up to 200K, 7.5 and 22.5 above.
		{"built-in sonnet below", sonnet, "claude-sonnet-4-5-20250929", 200_000, 0, 1000, 200_000*3750 + 1000*15000, 200_000, 1000, 200_000*3000 + 1000*15000},
		{"built-in sonnet above", sonnet, "claude-sonnet-4-5-20250929", 300_000, 0, 1000, 300_000*7500 + 1000*22500, 300_000, 1000, 300_000*6000 + 1000*22500},
	} {
		got, ok := gw.WorstCaseNano(tc.p, tc.model, tc.bytes, tc.messages, tc.maxTokens)
		if !ok || got != tc.want {
			t.Errorf("%s: WorstCaseNano = %d %v, want %d", tc.name, got, ok, tc.want)
		}
		cost := gw.CostNano(tc.p, tc.model, tc.prompt, tc.completion, 0, 0)
		if cost != tc.settle || cost > got {
			t.Errorf("%s: CostNano(%d, %d) = %d, want %d (at most the worst case %d)", tc.name, tc.prompt, tc.completion, cost, tc.settle, got)
		}
	}
	for _, tc := range []struct{ settings, bad string }{
		{`{"prices": {"t1": {"input": 1, "output": 2, "above": {"tokens": 100, "input": 2, "output": 1}}}}`, `"t1": above.output`},
		{`{"prices": {"t2": {"input": 1, "output": 2, "above": {"tokens": -1, "input": 2, "output": 3}}}}`, `"t2": above.tokens`},
		{`{"prices": {"t3": {"input": 1, "output": 2, "above": {"input": 2, "output": 3}}}}`, `"t3"`},
	} {
		_, err := gw.CreateProvider(ctx(t), ProviderInput{Name: "p" + uuid.NewString()[:8], ProviderType: ProviderEcho, Enabled: true,
			Settings: json.RawMessage(tc.settings)})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.bad) {
			t.Errorf("%s: %v, want ErrInvalid naming %s", tc.settings, err, tc.bad)
		}
	}
}
