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

// putProvider creates (create: the id is new) or replaces a provider.
// sealed nil keeps the current credential.
type putProvider struct {
	p      providerRec // the caller's fields; times and credential filled in by the registry
	create bool
	sealed *[]byte
	hint   string
	reply  chan provReply
}

type getProvider struct {
	ref   string
	reply chan provReply
}

type listProviders struct{ reply chan provReply }

type delProvider struct {
	ref   string
	reply chan provReply
}

func (r *registry) putProvider(m putProvider) provReply {
	p := m.p
	cur, exists := r.part.providers.rows[p.ID]
	switch {
	case m.create && exists:
		return provReply{err: ErrExists}
	case !m.create && !exists:
		return provReply{err: ErrNotFound}
	}
	if o, ok := r.part.providers.named(p.Name); ok && o.ID != p.ID {
		return provReply{err: fmt.Errorf("provider name %q: %w", p.Name, ErrExists)}
	}
	now := r.clock.Now().UTC()
	p.CreatedAt, p.UpdatedAt = now, now
	if exists {
		p.CreatedAt = cur.CreatedAt
		p.APIKeySealed, p.APIKeyHint = cur.APIKeySealed, cur.APIKeyHint
	}
	if m.sealed != nil {
		p.APIKeySealed, p.APIKeyHint = *m.sealed, m.hint
	}
	verb := verbOf(m.create)
	au := audit{action: "provider." + verb, entityType: string(kindProvider), entityID: p.ID.String(),
		summary: fmt.Sprintf("%sd provider %q (%s)", verb, p.Name, p.ProviderType)}
	if m.sealed != nil {
		au.summary += ", credential set"
	}
	if err := r.commit(au, entitySaved{&p}); err != nil {
		return provReply{err: fmt.Errorf("log provider: %w", err)}
	}
	return provReply{p: p.view()}
}

func (r *registry) delProvider(ref string) provReply {
	p, ok := r.part.providers.get(ref)
	if !ok {
		return provReply{err: ErrNotFound}
	}
	if r.part.agentsOn[p.ID] > 0 {
		return provReply{err: fmt.Errorf("provider %s is used by agent %s: %w", p.Name, r.firstAgentOn(p.ID), ErrInUse)}
	}
	au := audit{action: "provider.delete", entityType: string(kindProvider), entityID: p.ID.String(), summary: fmt.Sprintf("deleted provider %q", p.Name)}
	if err := r.commit(au, entityDeleted{kind: kindProvider, id: p.ID}); err != nil {
		return provReply{err: fmt.Errorf("log provider delete: %w", err)}
	}
	return provReply{}
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
	m := putProvider{create: create, reply: make(chan provReply, 1), p: providerRec{
		ID: id, Name: in.Name, DisplayName: in.DisplayName, ProviderType: in.ProviderType,
		APIBase: strings.TrimRight(in.APIBase, "/"), Enabled: in.Enabled,
	}}
	if m.p.DisplayName == "" {
		m.p.DisplayName = in.Name
	}
	if len(in.Settings) > 0 {
		// The bytes a record decodes to (compact, HTML-escaped), so the
		// live provider equals the replayed one.
		m.p.Settings = mustJSON(in.Settings)
	}
	if in.APIKey != nil {
		var sealed []byte
		if *in.APIKey != "" {
			var err error
			if sealed, err = g.sealer.Seal([]byte(*in.APIKey), id[:]); err != nil {
				return Provider{}, err
			}
		}
		m.sealed, m.hint = &sealed, hintOf(*in.APIKey)
	}
	r, err := ask(ctx, g, m, m.reply)
	if err != nil {
		return Provider{}, err
	}
	return r.p, nil
}

// GetProvider finds a provider by id or name; ErrNotFound.
func (g *Gateway) GetProvider(ctx context.Context, ref string) (Provider, error) {
	reply := make(chan provReply, 1)
	r, err := ask(ctx, g, getProvider{ref: ref, reply: reply}, reply)
	return r.p, err
}

// ListProviders returns every provider by name.
func (g *Gateway) ListProviders(ctx context.Context) ([]Provider, error) {
	reply := make(chan provReply, 1)
	r, err := ask(ctx, g, listProviders{reply: reply}, reply)
	return r.ps, err
}

// DeleteProvider removes a provider; ErrNotFound, ErrInUse while an agent
// uses it.
func (g *Gateway) DeleteProvider(ctx context.Context, ref string) error {
	reply := make(chan provReply, 1)
	_, err := ask(ctx, g, delProvider{ref: ref, reply: reply}, reply)
	return err
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
