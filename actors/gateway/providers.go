package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"gatehouse/actors/gateway/agentrun/llm"
	"gatehouse/actors/gateway/pricing"
)

// providerSlug is the rule for provider names.
var providerSlug = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// validateProvider checks in; create requires every field.
func validateProvider(in ProviderInput) error {
	if !providerSlug.MatchString(in.Name) {
		return fmt.Errorf("name must match %s: %w", providerSlug, ErrInvalid)
	}
	if utf8.RuneCountInString(in.DisplayName) > 100 {
		return fmt.Errorf("display_name must be at most 100 characters: %w", ErrInvalid)
	}
	if err := validateKeyPool(in.APIKeys); err != nil {
		return err
	}
	if in.ProviderType == ProviderEcho { // offline: needs no base, key or settings
		return validateSettings(in.Settings)
	}
	t, ok := llm.Lookup(in.ProviderType)
	if !ok {
		return fmt.Errorf("provider_type must be one of %s: %w", strings.Join(ProviderTypes(), ", "), ErrInvalid)
	}
	if in.APIBase != "" {
		if err := validateAPIBase(in.APIBase); err != nil {
			return err
		}
	}
	if err := validateSettings(in.Settings); err != nil {
		return err
	}
	if t.Validate != nil {
		// The type's own checks: its settings, and whether it can do
		// without api_base (bedrock with settings.region).
		if err := t.Validate(in.APIBase, in.Settings); err != nil {
			return fmt.Errorf("%v: %w", err, ErrInvalid)
		}
	} else if in.APIBase == "" && t.DefaultBase == "" {
		return fmt.Errorf("api_base is required for provider_type %s: %w", in.ProviderType, ErrInvalid)
	}
	return nil
}

// ProviderTypes lists every accepted provider_type, sorted: the types
// the provider clients register (aliases and presets included) and echo.
func ProviderTypes() []string {
	names := llm.Names()
	if !slices.Contains(names, ProviderEcho) {
		names = append(names, ProviderEcho)
		slices.Sort(names)
	}
	return names
}

// validateAPIBase checks a given api_base: an http or https URL without
// credentials, query or fragment.
func validateAPIBase(base string) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("api_base must be an http:// or https:// URL: %w", ErrInvalid)
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return fmt.Errorf("api_base must not carry credentials, a query or a fragment (the credential goes in api_key): %w", ErrInvalid)
	}
	return nil
}

// validateSettings checks that settings, when given, is a JSON object.
func validateSettings(settings json.RawMessage) error {
	if len(settings) > 0 && !bytes.Equal(bytes.TrimSpace(settings), []byte("null")) {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(settings, &obj); err != nil {
			return fmt.Errorf("settings must be a JSON object: %w", ErrInvalid)
		}
		if _, err := pricing.FromSettings(settings); err != nil { // settings.prices (docs/pricing.md)
			return fmt.Errorf("%v: %w", err, ErrInvalid)
		}
	}
	return nil
}

// validateKeyPool checks api_keys: at most MaxProviderKeys keys, each
// non-empty and at most MaxProviderKeyBytes (nil: not given).
func validateKeyPool(keys *[]string) error {
	if keys == nil {
		return nil
	}
	if len(*keys) > MaxProviderKeys {
		return fmt.Errorf("api_keys must hold at most %d keys: %w", MaxProviderKeys, ErrInvalid)
	}
	for i, k := range *keys {
		switch {
		case k == "":
			return fmt.Errorf("api_keys[%d] must not be empty: %w", i, ErrInvalid)
		case len(k) > MaxProviderKeyBytes:
			return fmt.Errorf("api_keys[%d] must be at most %d bytes: %w", i, MaxProviderKeyBytes, ErrInvalid)
		}
	}
	return nil
}

// KeyHint masks a credential: its last four characters when long enough.
func KeyHint(key string) string {
	if key == "" {
		return ""
	}
	if len(key) < 12 {
		return "****"
	}
	return "****" + key[len(key)-4:]
}

// sealedCreds are the credentials a provider change sets, sealed in the
// caller's goroutine: key nil keeps api_key, pool nil keeps api_keys.
type sealedCreds struct {
	key       *[]byte
	hint      string
	pool      *[][]byte
	poolHints []string
}

// putProvider creates (create: the id is new) or replaces provider p, the
// caller's fields (times and credentials are filled in here).
func (r *registry) putProvider(p providerRec, create bool, cr sealedCreds) (Provider, error) {
	cur, exists := r.part.providers.rows[p.ID]
	switch {
	case create && exists:
		return Provider{}, ErrExists
	case !create && !exists:
		return Provider{}, ErrNotFound
	}
	if o, ok := r.part.providers.named(p.Name); ok && o.ID != p.ID {
		return Provider{}, fmt.Errorf("provider name %q: %w", p.Name, ErrExists)
	}
	now := r.clock.Now().UTC()
	p.CreatedAt, p.UpdatedAt = now, now
	if exists {
		p.CreatedAt = cur.CreatedAt
		p.APIKeySealed, p.APIKeyHint = cur.APIKeySealed, cur.APIKeyHint
		p.APIKeysSealed, p.APIKeysHint = cur.APIKeysSealed, cur.APIKeysHint
	}
	if cr.key != nil {
		p.APIKeySealed, p.APIKeyHint = *cr.key, cr.hint
	}
	if cr.pool != nil {
		p.APIKeysSealed, p.APIKeysHint = *cr.pool, cr.poolHints
	}
	verb := verbOf(create)
	au := audit{action: "provider." + verb, entityType: string(kindProvider), entityID: p.ID.String(),
		summary: fmt.Sprintf("%sd provider %q (%s)", verb, p.Name, p.ProviderType)}
	if cr.key != nil {
		au.summary += ", credential set"
	}
	if cr.pool != nil {
		au.summary += fmt.Sprintf(", %d keys set", len(*cr.pool))
	}
	if err := r.commit(au, entitySaved{&p}); err != nil {
		return Provider{}, fmt.Errorf("log provider: %w", err)
	}
	return p.view(), nil
}

func (r *registry) delProvider(ref string) error {
	p, ok := r.part.providers.get(ref)
	if !ok {
		return ErrNotFound
	}
	if r.part.agentsOn[p.ID] > 0 {
		return fmt.Errorf("provider %s is used by agent %s: %w", p.Name, r.firstAgentOn(p.ID), ErrInUse)
	}
	if a := r.firstFallbackOn(p.ID); a != "" {
		return fmt.Errorf("provider %s is a fallback of agent %s: %w", p.Name, a, ErrInUse)
	}
	au := audit{action: "provider.delete", entityType: string(kindProvider), entityID: p.ID.String(), summary: fmt.Sprintf("deleted provider %q", p.Name)}
	if err := r.commit(au, entityDeleted{kind: kindProvider, id: p.ID}); err != nil {
		return fmt.Errorf("log provider delete: %w", err)
	}
	return nil
}

// firstAgentOn names the first agent (by agent_key) using provider id.
func (r *registry) firstAgentOn(id uuid.UUID) string {
	first := ""
	for _, a := range r.part.agents.rows {
		if a.ProviderID == id && (first == "" || a.AgentKey < first) {
			first = a.AgentKey
		}
	}
	return first
}

// firstFallbackOn names the first agent (by agent_key) with provider id
// among its fallbacks ("" when none has).
func (r *registry) firstFallbackOn(id uuid.UUID) string {
	first := ""
	for _, a := range r.part.agents.rows {
		if (first == "" || a.AgentKey < first) && slices.ContainsFunc(a.Fallbacks, func(f fallbackRec) bool { return f.ProviderID == id }) {
			first = a.AgentKey
		}
	}
	return first
}

// CreateProvider validates in, seals its credential and stores it.
func (g *Gateway) CreateProvider(ctx context.Context, in ProviderInput) (Provider, error) {
	return g.putProvider(ctx, g.newID(kindProvider), in, true)
}

// UpdateProvider replaces the provider's fields (by id or name); a nil
// APIKey keeps the credential. ErrNotFound, ErrExists, ErrInvalid.
func (g *Gateway) UpdateProvider(ctx context.Context, ref string, in ProviderInput) (Provider, error) {
	cur, err := g.GetProvider(ctx, ref)
	if err != nil {
		return Provider{}, err
	}
	return g.putProvider(ctx, cur.ID, in, false)
}

func (g *Gateway) putProvider(ctx context.Context, id uuid.UUID, in ProviderInput, create bool) (Provider, error) {
	if err := validateProvider(in); err != nil {
		return Provider{}, err
	}
	p := providerRec{
		ID: id, Name: in.Name, DisplayName: in.DisplayName, ProviderType: in.ProviderType,
		APIBase: strings.TrimRight(in.APIBase, "/"), Enabled: in.Enabled,
	}
	if p.DisplayName == "" {
		p.DisplayName = in.Name
	}
	if len(in.Settings) > 0 {
		// The bytes a record decodes to (compact, HTML-escaped), so the
		// live provider equals the replayed one.
		p.Settings = mustJSON(in.Settings)
	}
	cr, err := g.sealProviderCreds(id, in)
	if err != nil {
		return Provider{}, err
	}
	return call(ctx, g, func(r *registry) (Provider, error) { return r.putProvider(p, create, cr) })
}

// sealProviderCreds seals the credentials in sets for provider id, each bound to
// the id. An empty pool is nil, as a record decodes it.
func (g *Gateway) sealProviderCreds(id uuid.UUID, in ProviderInput) (sealedCreds, error) {
	var cr sealedCreds
	if in.APIKey != nil {
		var key []byte
		if *in.APIKey != "" {
			var err error
			if key, err = g.sealer.Seal([]byte(*in.APIKey), id[:]); err != nil {
				return cr, fmt.Errorf("seal api_key: %w", err)
			}
		}
		cr.key, cr.hint = &key, KeyHint(*in.APIKey)
	}
	if in.APIKeys != nil {
		var pool [][]byte
		for i, k := range *in.APIKeys {
			b, err := g.sealer.Seal([]byte(k), id[:])
			if err != nil {
				return cr, fmt.Errorf("seal api_keys[%d]: %w", i, err)
			}
			pool = append(pool, b)
			cr.poolHints = append(cr.poolHints, KeyHint(k))
		}
		cr.pool = &pool
	}
	return cr, nil
}

// GetProvider finds a provider by id or name; ErrNotFound.
func (g *Gateway) GetProvider(ctx context.Context, ref string) (Provider, error) {
	return read(ctx, g, func(r regView) (Provider, error) { return r.getProvider(ref) })
}

// ListProviders returns every provider by name.
func (g *Gateway) ListProviders(ctx context.Context) ([]Provider, error) {
	return read(ctx, g, func(r regView) ([]Provider, error) { return r.listProviders(), nil })
}

// DeleteProvider removes a provider; ErrNotFound, ErrInUse while an agent
// uses it.
func (g *Gateway) DeleteProvider(ctx context.Context, ref string) error {
	return do(ctx, g, func(r *registry) error { return r.delProvider(ref) })
}

// ProviderKey opens p's sealed credential ("" when it has none). Call it
// only to call out; never log the result.
func (g *Gateway) ProviderKey(p Provider) (string, error) {
	if len(p.APIKeySealed) == 0 {
		return "", nil
	}
	b, err := g.sealer.Open(p.APIKeySealed, p.ID[:])
	return string(b), err
}

// ProviderKeys opens every credential of p: api_key first (when it has
// one), then api_keys in order. Call it only to call out; never log the
// result.
func (g *Gateway) ProviderKeys(p Provider) ([]string, error) {
	out := make([]string, 0, 1+len(p.APIKeysSealed))
	key, err := g.ProviderKey(p)
	if err != nil {
		return nil, fmt.Errorf("open api_key of provider %s: %w", p.Name, err)
	}
	if key != "" {
		out = append(out, key)
	}
	for i, s := range p.APIKeysSealed {
		b, err := g.sealer.Open(s, p.ID[:])
		if err != nil {
			return nil, fmt.Errorf("open api_keys[%d] of provider %s: %w", i, p.Name, err)
		}
		out = append(out, string(b))
	}
	return out, nil
}
