package httpapi

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"gatehouse/actors/gateway"
)

// API keys.

type apiKeyCreateReq struct {
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
	// ExpiresIn is a lifetime in seconds; absent or null: never expires.
	ExpiresIn *int64 `json:"expires_in,omitempty"`
}

type apiKeyView struct {
	ID        uuid.UUID  `json:"id"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	Scopes    []string   `json:"scopes"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
	Revoked   bool       `json:"revoked"`
	RevokedAt *time.Time `json:"revoked_at"`
}

type apiKeyCreated struct {
	apiKeyView
	// Key is the raw key, shown only in this answer.
	Key string `json:"key"`
}

type apiKeyList struct {
	Data []apiKeyView `json:"data"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func viewAPIKey(k gateway.APIKey) apiKeyView {
	sc := make([]string, len(k.Scopes))
	for i, s := range k.Scopes {
		sc[i] = string(s)
	}
	return apiKeyView{
		ID: k.ID, Name: k.Name, Prefix: k.Preview, Scopes: sc, CreatedAt: k.CreatedAt,
		ExpiresAt: timePtr(k.ExpiresAt), Revoked: !k.RevokedAt.IsZero(), RevokedAt: timePtr(k.RevokedAt),
	}
}

func (s *GatewayServer) listAPIKeys(r *gwReq) error {
	ks, err := s.svc.ListAPIKeys(r.ctx)
	if err != nil {
		return err
	}
	out := apiKeyList{Data: make([]apiKeyView, 0, len(ks))}
	for _, k := range ks {
		out.Data = append(out.Data, viewAPIKey(k))
	}
	writeJSON(r.rc, fasthttp.StatusOK, out)
	return nil
}

func (s *GatewayServer) createAPIKey(r *gwReq) error {
	var req apiKeyCreateReq
	if err := decode(r, &req); err != nil {
		return err
	}
	n := gateway.NewAPIKey{Name: req.Name}
	for _, sc := range req.Scopes {
		n.Scopes = append(n.Scopes, gateway.Scope(sc))
	}
	if req.ExpiresIn != nil {
		if *req.ExpiresIn < 1 || *req.ExpiresIn > 10*365*24*3600 {
			return errGWInvalid("expires_in must be a number of seconds in 1..315360000")
		}
		n.ExpiresIn = time.Duration(*req.ExpiresIn) * time.Second
	}
	k, raw, err := s.svc.CreateAPIKey(r.ctx, n)
	if err != nil {
		return err
	}
	writeJSON(r.rc, fasthttp.StatusCreated, apiKeyCreated{apiKeyView: viewAPIKey(k), Key: raw})
	return nil
}

func (s *GatewayServer) revokeAPIKey(r *gwReq) error {
	id, err := uuid.Parse(param(r, "id"))
	if err != nil {
		return errGWKeyNotFound
	}
	if err := s.svc.RevokeAPIKey(r.ctx, id); err != nil {
		return resource(err, errGWKeyNotFound, nil)
	}
	r.rc.SetStatusCode(fasthttp.StatusNoContent)
	return nil
}

// Providers.

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

type providerView struct {
	ID           uuid.UUID `json:"id"`
	Name         string    `json:"name"`
	DisplayName  string    `json:"display_name"`
	ProviderType string    `json:"provider_type"`
	APIBase      string    `json:"api_base"`
	// APIKey is masked: "****" and the last four characters, or "".
	APIKey    string          `json:"api_key"`
	Enabled   bool            `json:"enabled"`
	Settings  json.RawMessage `json:"settings"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

type providerList struct {
	Data []providerView `json:"data"`
}

func viewProvider(p gateway.Provider) providerView {
	settings := p.Settings
	if len(settings) == 0 || string(settings) == "null" {
		settings = json.RawMessage("{}")
	}
	return providerView{
		ID: p.ID, Name: p.Name, DisplayName: p.DisplayName, ProviderType: p.ProviderType, APIBase: p.APIBase,
		APIKey: p.APIKeyHint, Enabled: p.Enabled, Settings: settings, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
	}
}

func (s *GatewayServer) listProviders(r *gwReq) error {
	ps, err := s.svc.ListProviders(r.ctx)
	if err != nil {
		return err
	}
	out := providerList{Data: make([]providerView, 0, len(ps))}
	for _, p := range ps {
		out.Data = append(out.Data, viewProvider(p))
	}
	writeJSON(r.rc, fasthttp.StatusOK, out)
	return nil
}

// providerInput overlays req on cur (the zero Provider when creating).
func providerInput(req providerReq, cur gateway.Provider) gateway.ProviderInput {
	in := gateway.ProviderInput{
		Name: cur.Name, DisplayName: cur.DisplayName, ProviderType: cur.ProviderType, APIBase: cur.APIBase,
		Enabled: cur.Enabled, Settings: cur.Settings, APIKey: req.APIKey,
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&in.Name, req.Name)
	set(&in.DisplayName, req.DisplayName)
	set(&in.ProviderType, req.ProviderType)
	set(&in.APIBase, req.APIBase)
	if req.Enabled != nil {
		in.Enabled = *req.Enabled
	}
	if req.Settings != nil {
		in.Settings = req.Settings
	}
	return in
}

func (s *GatewayServer) createProvider(r *gwReq) error {
	var req providerReq
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Name == nil || req.ProviderType == nil {
		return errGWInvalid("name and provider_type are required")
	}
	in := providerInput(req, gateway.Provider{Enabled: true})
	p, err := s.svc.CreateProvider(r.ctx, in)
	if err != nil {
		return resource(err, nil, errGWProviderExists)
	}
	writeJSON(r.rc, fasthttp.StatusCreated, viewProvider(p))
	return nil
}

func (s *GatewayServer) getProvider(r *gwReq) error {
	p, err := s.svc.GetProvider(r.ctx, param(r, "id"))
	if err != nil {
		return resource(err, errGWProvNotFound, nil)
	}
	writeJSON(r.rc, fasthttp.StatusOK, viewProvider(p))
	return nil
}

func (s *GatewayServer) updateProvider(r *gwReq) error {
	var req providerReq
	if err := decode(r, &req); err != nil {
		return err
	}
	cur, err := s.svc.GetProvider(r.ctx, param(r, "id"))
	if err != nil {
		return resource(err, errGWProvNotFound, nil)
	}
	p, err := s.svc.UpdateProvider(r.ctx, cur.ID.String(), providerInput(req, cur))
	if err != nil {
		return resource(err, errGWProvNotFound, errGWProviderExists)
	}
	writeJSON(r.rc, fasthttp.StatusOK, viewProvider(p))
	return nil
}

func (s *GatewayServer) deleteProvider(r *gwReq) error {
	if err := s.svc.DeleteProvider(r.ctx, param(r, "id")); err != nil {
		return resource(err, errGWProvNotFound, nil)
	}
	r.rc.SetStatusCode(fasthttp.StatusNoContent)
	return nil
}

// Agents.

type agentReq struct {
	AgentKey    *string `json:"agent_key,omitempty"`
	DisplayName *string `json:"display_name,omitempty"`
	// Provider is the provider's name or id.
	Provider       *string   `json:"provider,omitempty"`
	Model          *string   `json:"model,omitempty"`
	SystemPrompt   *string   `json:"system_prompt,omitempty"`
	Status         *string   `json:"status,omitempty"`
	TimeoutSeconds *int      `json:"timeout_seconds,omitempty"`
	SharedWith     *[]string `json:"shared_with,omitempty"`
}

type agentView struct {
	ID             uuid.UUID `json:"id"`
	AgentKey       string    `json:"agent_key"`
	DisplayName    string    `json:"display_name"`
	OwnerID        string    `json:"owner_id"`
	ProviderID     uuid.UUID `json:"provider_id"`
	Model          string    `json:"model"`
	SystemPrompt   string    `json:"system_prompt"`
	Status         string    `json:"status"`
	TimeoutSeconds int       `json:"timeout_seconds"`
	SharedWith     []string  `json:"shared_with"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

type agentList struct {
	Data []agentView `json:"data"`
}

func viewAgent(a gateway.Agent) agentView {
	sw := a.SharedWith
	if sw == nil {
		sw = []string{}
	}
	return agentView{
		ID: a.ID, AgentKey: a.AgentKey, DisplayName: a.DisplayName, OwnerID: a.OwnerID, ProviderID: a.ProviderID,
		Model: a.Model, SystemPrompt: a.SystemPrompt, Status: a.Status, TimeoutSeconds: a.TimeoutSeconds,
		SharedWith: sw, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt,
	}
}

func (q agentReq) input() gateway.AgentInput {
	return gateway.AgentInput{
		AgentKey: q.AgentKey, DisplayName: q.DisplayName, Provider: q.Provider, Model: q.Model,
		SystemPrompt: q.SystemPrompt, Status: q.Status, TimeoutSeconds: q.TimeoutSeconds, SharedWith: q.SharedWith,
	}
}

func (s *GatewayServer) listAgents(r *gwReq) error {
	as, err := s.svc.ListAgents(r.ctx, r.userID)
	if err != nil {
		return err
	}
	out := agentList{Data: make([]agentView, 0, len(as))}
	for _, a := range as {
		out.Data = append(out.Data, viewAgent(a))
	}
	writeJSON(r.rc, fasthttp.StatusOK, out)
	return nil
}

func (s *GatewayServer) createAgent(r *gwReq) error {
	var req agentReq
	if err := decode(r, &req); err != nil {
		return err
	}
	a, err := s.svc.CreateAgent(r.ctx, r.userID, req.input())
	if err != nil {
		return resource(err, nil, errGWAgentExists)
	}
	writeJSON(r.rc, fasthttp.StatusCreated, viewAgent(a))
	return nil
}

func (s *GatewayServer) getAgent(r *gwReq) error {
	a, err := s.svc.GetAgent(r.ctx, r.userID, param(r, "id"))
	if err != nil {
		return resource(err, errGWAgentNotFound, nil)
	}
	writeJSON(r.rc, fasthttp.StatusOK, viewAgent(a))
	return nil
}

func (s *GatewayServer) updateAgent(r *gwReq) error {
	var req agentReq
	if err := decode(r, &req); err != nil {
		return err
	}
	a, err := s.svc.UpdateAgent(r.ctx, r.userID, param(r, "id"), req.input())
	if err != nil {
		return resource(err, errGWAgentNotFound, errGWAgentExists)
	}
	writeJSON(r.rc, fasthttp.StatusOK, viewAgent(a))
	return nil
}

func (s *GatewayServer) deleteAgent(r *gwReq) error {
	if err := s.svc.DeleteAgent(r.ctx, r.userID, param(r, "id")); err != nil {
		return resource(err, errGWAgentNotFound, nil)
	}
	r.rc.SetStatusCode(fasthttp.StatusNoContent)
	return nil
}

func (s *GatewayServer) metrics(r *gwReq) error {
	s.prom(r.rc)
	return nil
}

func newPromHandler(g prometheus.Gatherer) fasthttp.RequestHandler {
	return fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
}
