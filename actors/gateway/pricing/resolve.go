package pricing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// Resolver finds a model's price: a provider's settings.prices, then the
// config's pricing.models, then the built-in table (see Price). It is safe
// for concurrent use.
type Resolver struct {
	config       Table // keys lower-cased
	builtin      Table
	requireKnown bool

	mu       sync.RWMutex
	settings map[string]Table // parsed settings.prices by settings text
}

// maxCachedSettings bounds the parsed settings kept (one per provider
// settings text; emptied when full).
const maxCachedSettings = 1024

// NewResolver is the resolver of the config's pricing section: models
// (pricing.models, validated: the error names the model) and
// requireKnown (pricing.require_known).
func NewResolver(models Table, requireKnown bool) (*Resolver, error) {
	if err := models.Validate(); err != nil {
		return nil, fmt.Errorf("pricing.models: %w", err)
	}
	return &Resolver{config: lowerKeys(models), builtin: lowerKeys(builtin), requireKnown: requireKnown,
		settings: map[string]Table{}}, nil
}

// RequireKnown reports pricing.require_known: a call to a model without a
// price is refused.
func (r *Resolver) RequireKnown() bool { return r != nil && r.requireKnown }

// Local provider types: their models run on the operator's hardware and
// cost 0 (known) unless the provider's settings.prices price them.
var localTypes = map[string]bool{"echo": true, "ollama": true}

// Price is model's price on a provider of type providerType with
// providerSettings; false when it has none (it then costs 0). In order:
//
//  1. the provider's settings.prices: the model exactly, else the longest
//     key that prefixes it at a boundary (below);
//  2. a local provider type (echo, ollama): free;
//  3. the config's pricing.models, then the built-in table, exactly;
//  4. the longest key of either that prefixes the model at a boundary
//     (a config key wins a tie).
//
// Names compare without case. A key prefixes a model at a boundary when
// the model continues with '-', '.', ':', '@' or '/' after it: the dated
// snapshot claude-sonnet-4-5-20250929 and the Vertex name
// claude-sonnet-4-5@20250929 are claude-sonnet-4-5. Each step tries the
// model as named, then without its vendor prefix: "models/" (Gemini), a
// Bedrock region ("us.", "eu.", "apac.", "global.", …) and vendor
// ("anthropic.", "meta.", …), or a "vendor/" path (meta-llama/…,
// openai/…): anthropic.claude-sonnet-4-5-20250929-v1:0 is
// claude-sonnet-4-5.
func (r *Resolver) Price(providerType string, providerSettings json.RawMessage, model string) (Price, bool) {
	var buf [4]string
	names := candidates(buf[:0], model)
	if t := r.providerTable(providerSettings); len(t) > 0 {
		if p, ok := exact(names, t); ok {
			return p, true
		}
		if p, n := longest(names, t); n > 0 {
			return p, true
		}
	}
	if localTypes[providerType] {
		return Price{}, true
	}
	if r == nil {
		return lookup(names, nil, builtinLower)
	}
	return lookup(names, r.config, r.builtin)
}

// builtinLower is the built-in table, lower-cased, for a nil Resolver.
var builtinLower = lowerKeys(builtin)

func lookup(names []string, config, builtin Table) (Price, bool) {
	if p, ok := exact(names, config); ok {
		return p, true
	}
	if p, ok := exact(names, builtin); ok {
		return p, true
	}
	pc, nc := longest(names, config)
	pb, nb := longest(names, builtin)
	switch {
	case nc > 0 && nc >= nb:
		return pc, true
	case nb > 0:
		return pb, true
	}
	return Price{}, false
}

// providerTable is settings.prices of a provider, lower-cased (nil: none,
// or invalid: settings are validated when saved).
func (r *Resolver) providerTable(settings json.RawMessage) Table {
	if len(settings) == 0 || !bytes.Contains(settings, []byte(`"prices"`)) {
		return nil
	}
	if r == nil {
		t, _ := FromSettings(settings)
		return lowerKeys(t)
	}
	r.mu.RLock()
	t, ok := r.settings[string(settings)] // no copy of settings to look it up
	r.mu.RUnlock()
	if ok {
		return t
	}
	t, _ = FromSettings(settings)
	t = lowerKeys(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.settings) >= maxCachedSettings {
		clear(r.settings)
	}
	r.settings[string(settings)] = t
	return t
}

func lowerKeys(t Table) Table {
	if t == nil {
		return nil
	}
	out := make(Table, len(t))
	for k, v := range t {
		out[strings.ToLower(k)] = v
	}
	return out
}

func exact(names []string, t Table) (Price, bool) {
	for _, n := range names {
		if p, ok := t[n]; ok {
			return p, true
		}
	}
	return Price{}, false
}

// longest is the price of the longest key of t that prefixes one of names
// at a boundary, and that key's length (0: none).
func longest(names []string, t Table) (Price, int) {
	var best Price
	bestLen := 0
	for _, n := range names {
		for i := len(n) - 1; i > bestLen-1 && i > 0; i-- {
			if !boundary(n[i]) {
				continue
			}
			if p, ok := t[n[:i]]; ok && i > bestLen {
				best, bestLen = p, i
				break
			}
		}
	}
	return best, bestLen
}

func boundary(c byte) bool {
	return c == '-' || c == '.' || c == ':' || c == '@' || c == '/'
}

// bedrockRegions are the cross-region inference prefixes of Bedrock
// model ids.
var bedrockRegions = []string{"us.", "eu.", "apac.", "global.", "jp.", "au.", "ca.", "us-gov."}

// vendors are the Bedrock vendor prefixes of model ids.
var vendors = []string{"anthropic.", "meta.", "mistral.", "amazon.", "cohere.", "deepseek.", "openai.", "ai21.", "qwen.", "writer.", "xai."}

// candidates appends to out the model's name lower-cased, then without
// its vendor prefixes (each form once, most specific first).
func candidates(out []string, model string) []string {
	n := strings.ToLower(strings.TrimSpace(model))
	out = append(out, n)
	s := strings.TrimPrefix(n, "models/")
	out = addName(out, s)
	for _, p := range bedrockRegions {
		if strings.HasPrefix(s, p) {
			s = s[len(p):]
			break
		}
	}
	for _, p := range vendors {
		if strings.HasPrefix(s, p) {
			s = s[len(p):]
			break
		}
	}
	out = addName(out, s)
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		out = addName(out, s[i+1:])
	}
	return out
}

// addName appends s to names unless it is empty or the last one.
func addName(names []string, s string) []string {
	if s == "" || s == names[len(names)-1] {
		return names
	}
	return append(names, s)
}
