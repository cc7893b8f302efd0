package gateway

import (
	"context"
	"encoding/json"

	"gatehouse/actors/gateway"
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

type providerReq struct {
	Name         *string `json:"name,omitempty"`
	DisplayName  *string `json:"display_name,omitempty"`
	ProviderType *string `json:"provider_type,omitempty"`
	APIBase      *string `json:"api_base,omitempty"`
	// APIKey is stored sealed (AES-256-GCM) and never returned.
	APIKey   *string         `json:"api_key,omitempty"`
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
		Enabled: cur.Enabled, Settings: cur.Settings, APIKey: q.APIKey,
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

func (s *Server) getProvider(ctx context.Context, c Caller, in idIn) (gateway.Provider, error) {
	p, err := s.d.Providers.GetProvider(ctx, in.ID)
	if err != nil {
		return gateway.Provider{}, resource(err, errProvNotFound, nil)
	}
	return shown(c, p), nil
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
