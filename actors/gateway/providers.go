package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
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
	switch in.ProviderType {
	case ProviderOpenAICompat:
		u, err := url.Parse(in.APIBase)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("api_base must be an http:// or https:// URL: %w", ErrInvalid)
		}
		if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
			return fmt.Errorf("api_base must not carry credentials, a query or a fragment (the credential goes in api_key): %w", ErrInvalid)
		}
	case ProviderEcho:
	default:
		return fmt.Errorf("provider_type must be %q or %q: %w", ProviderOpenAICompat, ProviderEcho, ErrInvalid)
	}
	if len(in.Settings) > 0 && !bytes.Equal(bytes.TrimSpace(in.Settings), []byte("null")) {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(in.Settings, &obj); err != nil {
			return fmt.Errorf("settings must be a JSON object: %w", ErrInvalid)
		}
	}
	return nil
}

// hintOf masks a credential: its last four characters when long enough.
func hintOf(key string) string {
	if key == "" {
		return ""
	}
	if len(key) < 12 {
		return "****"
	}
	return "****" + key[len(key)-4:]
}

// putProvider creates (create: the id is new) or replaces provider p, the
// caller's fields (times and credential are filled in here); sealed nil
// keeps the current credential.
func (r *registry) putProvider(p providerRec, create bool, sealed *[]byte, hint string) (Provider, error) {
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
	}
	if sealed != nil {
		p.APIKeySealed, p.APIKeyHint = *sealed, hint
	}
	verb := verbOf(create)
	au := audit{action: "provider." + verb, entityType: string(kindProvider), entityID: p.ID.String(),
		summary: fmt.Sprintf("%sd provider %q (%s)", verb, p.Name, p.ProviderType)}
	if sealed != nil {
		au.summary += ", credential set"
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
	var sealed *[]byte
	var hint string
	if in.APIKey != nil {
		var key []byte
		if *in.APIKey != "" {
			var err error
			if key, err = g.sealer.Seal([]byte(*in.APIKey), id[:]); err != nil {
				return Provider{}, err
			}
		}
		sealed, hint = &key, hintOf(*in.APIKey)
	}
	return call(ctx, g, func(r *registry) (Provider, error) { return r.putProvider(p, create, sealed, hint) })
}

// GetProvider finds a provider by id or name; ErrNotFound.
func (g *Gateway) GetProvider(ctx context.Context, ref string) (Provider, error) {
	return read(ctx, g, func(r *registry) (Provider, error) { return r.getProvider(ref) })
}

// ListProviders returns every provider by name.
func (g *Gateway) ListProviders(ctx context.Context) ([]Provider, error) {
	return read(ctx, g, func(r *registry) ([]Provider, error) { return r.listProviders(), nil })
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
