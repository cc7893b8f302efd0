package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun"
	"gatehouse/actors/gateway/agentrun/llm"
)

// ProviderStore is what the providers routes need. ref is a provider's id
// or name. Safe for concurrent use.
type ProviderStore interface {
	// CreateProvider errors: ErrExists, ErrInvalid.
	CreateProvider(ctx context.Context, in gateway.ProviderInput) (gateway.Provider, error)
	// UpdateProvider replaces the fields; ErrNotFound, ErrExists, ErrInvalid.
	UpdateProvider(ctx context.Context, ref string, in gateway.ProviderInput) (gateway.Provider, error)
	// GetProvider errors: ErrNotFound.
	GetProvider(ctx context.Context, ref string) (gateway.Provider, error)
	ListProviders(ctx context.Context) ([]gateway.Provider, error)
	// DeleteProvider errors: ErrNotFound, ErrInUse (an agent uses it).
	DeleteProvider(ctx context.Context, ref string) error
}

var _ ProviderStore = (*gateway.Gateway)(nil)

// ProviderCalls is what the admin's provider routes ask of the runtime
// (GET /v1/providers/{id}/models, POST /v1/providers/{id}/verify and the
// key states of GET /v1/providers/{id}). Safe for concurrent use.
type ProviderCalls interface {
	// ProviderModels lists the models p's own API lists. Errors: a
	// *agentrun.ProviderError (the provider failed or answered an error),
	// ctx's.
	ProviderModels(ctx context.Context, p gateway.Provider) ([]llm.Model, error)
	// VerifyProvider makes p's cheapest authenticated call (disabled or
	// not) and returns how long it took. Errors as ProviderModels.
	VerifyProvider(ctx context.Context, p gateway.Provider) (time.Duration, error)
	// ProviderHealth is each of p's keys' state, masked, and p's last
	// error, as the runtime saw them; it makes no call.
	ProviderHealth(p gateway.Provider) agentrun.ProviderHealth
}

var _ ProviderCalls = (*agentrun.Runtime)(nil)

type providerReq struct {
	Name         *string `json:"name,omitempty"`
	DisplayName  *string `json:"display_name,omitempty"`
	ProviderType *string `json:"provider_type,omitempty"`
	APIBase      *string `json:"api_base,omitempty"`
	// APIKey is stored sealed (AES-256-GCM) and never returned.
	APIKey *string `json:"api_key,omitempty"`
	// APIKeys is the key pool, each key sealed like APIKey and never
	// returned: absent keeps it, [] clears it.
	APIKeys  *[]string       `json:"api_keys,omitempty"`
	Enabled  *bool           `json:"enabled,omitempty"`
	Settings json.RawMessage `json:"settings,omitempty"`
}

// providerUpdate is PUT /v1/providers/{id}: absent fields keep their value.
type providerUpdate struct {
	ID string `path:"id" json:"-"`
	providerReq
}

type providerList struct {
	Data []gateway.Provider `json:"data"`
}

// input overlays q on cur (the zero Provider when creating).
func (q providerReq) input(cur gateway.Provider) gateway.ProviderInput {
	in := gateway.ProviderInput{
		Name: cur.Name, DisplayName: cur.DisplayName, ProviderType: cur.ProviderType, APIBase: cur.APIBase,
		Enabled: cur.Enabled, Settings: cur.Settings, APIKey: q.APIKey, APIKeys: q.APIKeys,
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&in.Name, q.Name)
	set(&in.DisplayName, q.DisplayName)
	set(&in.ProviderType, q.ProviderType)
	set(&in.APIBase, q.APIBase)
	if q.Enabled != nil {
		in.Enabled = *q.Enabled
	}
	if q.Settings != nil {
		in.Settings = q.Settings
	}
	return in
}

func (s *Server) listProviders(ctx context.Context, c Caller, _ None) (providerList, error) {
	ps, err := s.d.Providers.ListProviders(ctx)
	if err != nil {
		return providerList{}, err
	}
	return providerList{Data: shownAll(c, nonNil(ps))}, nil
}

func (s *Server) createProvider(ctx context.Context, _ Caller, req providerReq) (gateway.Provider, error) {
	if req.Name == nil || req.ProviderType == nil {
		return gateway.Provider{}, errInvalid("name and provider_type are required")
	}
	p, err := s.d.Providers.CreateProvider(ctx, req.input(gateway.Provider{Enabled: true}))
	if err != nil {
		return gateway.Provider{}, resource(err, nil, errProviderExists)
	}
	return p, nil
}

// providerDetail is GET /v1/providers/{id}: the provider, and for an
// admin what the runtime saw of its calls (each key's state, masked, and
// the last error).
type providerDetail struct {
	gateway.Provider
	KeyStates   *[]agentrun.KeyHealth `json:"key_states,omitempty"`
	LastError   string                `json:"last_error,omitempty"`
	LastErrorAt *time.Time            `json:"last_error_at,omitempty"`
}

func (s *Server) getProvider(ctx context.Context, c Caller, in idIn) (providerDetail, error) {
	p, err := s.d.Providers.GetProvider(ctx, in.ID)
	if err != nil {
		return providerDetail{}, resource(err, errProvNotFound, nil)
	}
	out := providerDetail{Provider: shown(c, p)}
	if c.Trusted() {
		h := s.d.ProviderCalls.ProviderHealth(p)
		keys := nonNil(h.Keys)
		out.KeyStates, out.LastError, out.LastErrorAt = &keys, h.LastError, h.LastErrorAt
	}
	return out, nil
}

// providerModelList is GET /v1/providers/{id}/models.
type providerModelList struct {
	Data []llm.Model `json:"data"`
}

// providerModels lists the provider's models from its own API; a failed
// or refused upstream call is a 502.
func (s *Server) providerModels(ctx context.Context, _ Caller, in idIn) (providerModelList, error) {
	p, err := s.d.Providers.GetProvider(ctx, in.ID)
	if err != nil {
		return providerModelList{}, resource(err, errProvNotFound, nil)
	}
	ms, err := s.d.ProviderCalls.ProviderModels(ctx, p)
	if pe := (*agentrun.ProviderError)(nil); errors.As(err, &pe) {
		return providerModelList{}, newError(fasthttp.StatusBadGateway, codeUnavailable, msgUpstreamFailed, pe.Detail)
	}
	if err != nil {
		return providerModelList{}, err
	}
	return providerModelList{Data: nonNil(ms)}, nil
}

// verifyOut is POST /v1/providers/{id}/verify.
type verifyOut struct {
	OK        bool   `json:"ok"`
	LatencyMs int64  `json:"latency_ms"`
	Error     string `json:"error,omitempty"`
}

// verifyProvider makes the provider's cheapest authenticated call, even
// when it is disabled; the outcome is the answer (200), not an error.
func (s *Server) verifyProvider(ctx context.Context, _ Caller, in idIn) (verifyOut, error) {
	p, err := s.d.Providers.GetProvider(ctx, in.ID)
	if err != nil {
		return verifyOut{}, resource(err, errProvNotFound, nil)
	}
	took, err := s.d.ProviderCalls.VerifyProvider(ctx, p)
	out := verifyOut{OK: err == nil, LatencyMs: took.Milliseconds()}
	var pe *agentrun.ProviderError
	switch {
	case err == nil:
	case errors.As(err, &pe):
		out.Error = pe.Detail
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		out.Error = "no answer within the request timeout"
	default:
		return verifyOut{}, err
	}
	return out, nil
}

func (s *Server) updateProvider(ctx context.Context, _ Caller, in providerUpdate) (gateway.Provider, error) {
	cur, err := s.d.Providers.GetProvider(ctx, in.ID)
	if err != nil {
		return gateway.Provider{}, resource(err, errProvNotFound, nil)
	}
	p, err := s.d.Providers.UpdateProvider(ctx, cur.ID.String(), in.input(cur))
	if err != nil {
		return gateway.Provider{}, resource(err, errProvNotFound, errProviderExists)
	}
	return p, nil
}

func (s *Server) deleteProvider(ctx context.Context, _ Caller, in idIn) (None, error) {
	return None{}, resource(s.d.Providers.DeleteProvider(ctx, in.ID), errProvNotFound, nil)
}
