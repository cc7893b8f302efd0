package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Channel instances connect an outside messaging channel to an agent. One
// type works in this build: "webhook" (see httpapi/gateway's inbound
// route). Telegram and the other types of the seed's ecosystem are not
// shipped yet: creating one is refused with the list of known types.

// Channel types.
const ChannelWebhook = "webhook"

// ChannelTypes are the types this build runs.
var ChannelTypes = []string{ChannelWebhook}

// ChannelInstance is a channel instance as the API shows it: credentials
// are write-only, shown masked ("****" and the last four characters).
type ChannelInstance struct {
	ID          uuid.UUID         `json:"id"`
	Name        string            `json:"name"`
	DisplayName string            `json:"display_name"`
	ChannelType string            `json:"channel_type"`
	AgentID     uuid.UUID         `json:"agent_id"`
	Config      json.RawMessage   `json:"config"`
	Credentials map[string]string `json:"credentials"`
	Enabled     bool              `json:"enabled"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
}

// ChannelInput creates or replaces a channel instance. On update, nil
// fields keep their value; Credentials nil keeps the credentials.
type ChannelInput struct {
	Name        *string           `json:"name"`
	DisplayName *string           `json:"display_name"`
	ChannelType *string           `json:"channel_type"`
	Agent       *string           `json:"agent_id"` // id or agent_key
	Config      json.RawMessage   `json:"config"`
	Credentials map[string]string `json:"credentials"`
	Enabled     *bool             `json:"enabled"`
}

// WebhookConfig is a webhook instance's config.
type WebhookConfig struct {
	// Async answers the inbound request at once (202) and POSTs the reply
	// to CallbackURL, signed like inbound requests.
	Async       bool   `json:"async"`
	CallbackURL string `json:"callback_url,omitempty"`
}

// MinWebhookSecret is the shortest credentials.secret a webhook accepts.
const MinWebhookSecret = 16

// channelRec is the durable instance (kind channel_instance, data v1).
type channelRec struct {
	ID          uuid.UUID         `json:"id"`
	Name        string            `json:"name"`
	DisplayName string            `json:"display_name"`
	ChannelType string            `json:"channel_type"`
	AgentID     uuid.UUID         `json:"agent_id"`
	Config      json.RawMessage   `json:"config"`
	CredsSealed []byte            `json:"credentials_sealed,omitempty"`
	CredsHint   map[string]string `json:"credentials_hint,omitempty"`
	Enabled     bool              `json:"enabled"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
}

func (c *channelRec) ref() (kind, uuid.UUID) { return kindChannel, c.ID }

func (c *channelRec) view() ChannelInstance {
	hint := c.CredsHint
	if hint == nil {
		hint = map[string]string{}
	}
	return ChannelInstance{ID: c.ID, Name: c.Name, DisplayName: c.DisplayName, ChannelType: c.ChannelType, AgentID: c.AgentID,
		Config: c.Config, Credentials: hint, Enabled: c.Enabled, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
}

var channelNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// validChannel checks a type's config and credentials and returns the
// config in its canonical bytes. Errors name the field.
func validChannel(typ string, config json.RawMessage, creds map[string]string, create bool) (json.RawMessage, error) {
	switch typ {
	case ChannelWebhook:
	default:
		return nil, fmt.Errorf("channel_type: %q is not supported (supported: %s): %w", typ, strings.Join(ChannelTypes, ", "), ErrInvalid)
	}
	if len(config) == 0 || string(config) == "null" {
		config = json.RawMessage("{}")
	}
	var wc WebhookConfig
	dec := json.NewDecoder(bytes.NewReader(config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&wc); err != nil {
		return nil, fmt.Errorf("config: %s: %w", strings.TrimPrefix(err.Error(), "json: "), ErrInvalid)
	}
	if wc.Async && wc.CallbackURL == "" {
		return nil, fmt.Errorf("config.callback_url: required when config.async is true: %w", ErrInvalid)
	}
	if wc.CallbackURL != "" {
		u, err := url.Parse(wc.CallbackURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
			return nil, fmt.Errorf("config.callback_url: must be an http(s) URL without credentials or fragment: %w", ErrInvalid)
		}
	}
	if creds != nil || create {
		for k := range creds {
			if k != "secret" {
				return nil, fmt.Errorf("credentials.%s: unknown for a webhook (it takes secret): %w", k, ErrInvalid)
			}
		}
		if len(creds["secret"]) < MinWebhookSecret {
			return nil, fmt.Errorf("credentials.secret: at least %d characters, shared with the sender for HMAC-SHA256: %w", MinWebhookSecret, ErrInvalid)
		}
	}
	return mustJSON(wc), nil
}

// WebhookConfigOf decodes an instance's webhook config.
func WebhookConfigOf(c ChannelInstance) WebhookConfig {
	var wc WebhookConfig
	_ = json.Unmarshal(c.Config, &wc)
	return wc
}

// putChannel creates channel id (create) or replaces it; sealed nil keeps
// the credentials.
func (r *registry) putChannel(id uuid.UUID, create bool, in ChannelInput, sealed *[]byte, hint map[string]string) (ChannelInstance, error) {
	now := r.clock.Now().UTC()
	var c channelRec
	if create {
		c = channelRec{ID: id, Enabled: true, CreatedAt: now}
	} else {
		cur, ok := r.part.channels.get(id.String())
		if !ok {
			return ChannelInstance{}, ErrNotFound
		}
		c = *cur
	}
	if in.Name != nil {
		c.Name = *in.Name
	}
	if in.DisplayName != nil {
		c.DisplayName = *in.DisplayName
	}
	if in.ChannelType != nil {
		c.ChannelType = *in.ChannelType
	}
	if in.Enabled != nil {
		c.Enabled = *in.Enabled
	}
	switch {
	case !channelNameRE.MatchString(c.Name):
		return ChannelInstance{}, fmt.Errorf("name: lowercase letters, digits, - and _, at most 64: %w", ErrInvalid)
	case c.ChannelType == "":
		return ChannelInstance{}, fmt.Errorf("channel_type: required: %w", ErrInvalid)
	case create && in.Agent == nil:
		return ChannelInstance{}, fmt.Errorf("agent_id: required: %w", ErrInvalid)
	}
	if o, ok := r.part.channels.named(c.Name); ok && o.ID != c.ID {
		return ChannelInstance{}, fmt.Errorf("channel instance %q: %w", c.Name, ErrExists)
	}
	if in.Agent != nil {
		a, ok := r.part.agents.get(*in.Agent)
		if !ok {
			return ChannelInstance{}, fmt.Errorf("agent_id: agent %q: %w", *in.Agent, ErrNotFound)
		}
		c.AgentID = a.ID
	}
	config := c.Config
	if in.Config != nil {
		config = in.Config
	}
	canon, err := validChannel(c.ChannelType, config, in.Credentials, create)
	if err != nil {
		return ChannelInstance{}, err
	}
	c.Config = canon
	if c.DisplayName == "" {
		c.DisplayName = c.Name
	}
	if sealed != nil {
		c.CredsSealed, c.CredsHint = *sealed, hint
	}
	c.UpdatedAt = now
	verb := verbOf(create)
	au := audit{action: "channel_instance." + verb, entityType: string(kindChannel), entityID: c.ID.String(),
		summary: fmt.Sprintf("%sd %s channel instance %q for agent %s", verb, c.ChannelType, c.Name, c.AgentID)}
	if err := r.commit(au, entitySaved{&c}); err != nil {
		return ChannelInstance{}, fmt.Errorf("log channel instance: %w", err)
	}
	return c.view(), nil
}

func (r regView) getChannel(ref string) (*channelRec, error) {
	c, ok := r.part.channels.get(ref)
	if !ok {
		return nil, ErrNotFound
	}
	return c, nil
}

func (r *registry) delChannel(ref string) error {
	c, ok := r.part.channels.get(ref)
	if !ok {
		return ErrNotFound
	}
	au := audit{action: "channel_instance.delete", entityType: string(kindChannel), entityID: c.ID.String(), summary: fmt.Sprintf("deleted channel instance %q", c.Name)}
	if err := r.commit(au, entityDeleted{kind: kindChannel, id: c.ID}); err != nil {
		return fmt.Errorf("log channel instance delete: %w", err)
	}
	return nil
}

func (r regView) listChannels() []ChannelInstance {
	out := make([]ChannelInstance, 0, len(r.part.channels.rows))
	for _, c := range r.part.channels.rows {
		out = append(out, c.view())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// sealCreds seals an instance's credentials (bound to its id) and masks
// them for display.
func (g *Gateway) sealCreds(id uuid.UUID, creds map[string]string) (*[]byte, map[string]string, error) {
	if creds == nil {
		return nil, nil, nil
	}
	sealed, err := g.sealer.Seal(mustJSON(creds), id[:])
	if err != nil {
		return nil, nil, err
	}
	hint := make(map[string]string, len(creds))
	for k, v := range creds {
		hint[k] = KeyHint(v)
	}
	return &sealed, hint, nil
}

// openJSON opens sealed (bound to id) into v; v stays as it is when
// nothing is sealed.
func (g *Gateway) openJSON(sealed []byte, id uuid.UUID, v any) error {
	if len(sealed) == 0 {
		return nil
	}
	b, err := g.sealer.Open(sealed, id[:])
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// CreateChannel creates a channel instance. ErrInvalid (naming the
// field), ErrExists, ErrNotFound (the agent).
func (g *Gateway) CreateChannel(ctx context.Context, in ChannelInput) (ChannelInstance, error) {
	return g.channelCmd(ctx, g.newID(kindChannel), in, true)
}

// UpdateChannel changes the instance ref (id or name).
func (g *Gateway) UpdateChannel(ctx context.Context, ref string, in ChannelInput) (ChannelInstance, error) {
	cur, err := g.GetChannel(ctx, ref)
	if err != nil {
		return ChannelInstance{}, err
	}
	return g.channelCmd(ctx, cur.ID, in, false)
}

func (g *Gateway) channelCmd(ctx context.Context, id uuid.UUID, in ChannelInput, create bool) (ChannelInstance, error) {
	sealed, hint, err := g.sealCreds(id, in.Credentials)
	if err != nil {
		return ChannelInstance{}, err
	}
	return call(ctx, g, func(r *registry) (ChannelInstance, error) { return r.putChannel(id, create, in, sealed, hint) })
}

// GetChannel finds an instance by id or name; ErrNotFound.
func (g *Gateway) GetChannel(ctx context.Context, ref string) (ChannelInstance, error) {
	c, _, err := g.channel(ctx, ref)
	return c, err
}

func (g *Gateway) channel(ctx context.Context, ref string) (ChannelInstance, *channelRec, error) {
	c, err := read(ctx, g, func(r regView) (*channelRec, error) { return r.getChannel(ref) })
	if err != nil {
		return ChannelInstance{}, nil, err
	}
	return c.view(), c, nil
}

// ListChannels returns every instance, by name.
func (g *Gateway) ListChannels(ctx context.Context) ([]ChannelInstance, error) {
	return read(ctx, g, func(r regView) ([]ChannelInstance, error) { return r.listChannels(), nil })
}

// DeleteChannel removes an instance; ErrNotFound.
func (g *Gateway) DeleteChannel(ctx context.Context, ref string) error {
	return do(ctx, g, func(r *registry) error { return r.delChannel(ref) })
}

// ChannelCredentials opens the instance's credentials, to verify or sign
// its traffic only. ErrNotFound.
func (g *Gateway) ChannelCredentials(ctx context.Context, ref string) (ChannelInstance, map[string]string, error) {
	c, rec, err := g.channel(ctx, ref)
	if err != nil {
		return c, nil, err
	}
	creds := map[string]string{}
	if err := g.openJSON(rec.CredsSealed, rec.ID, &creds); err != nil {
		return c, nil, fmt.Errorf("channel %s credentials: %w", rec.ID, err)
	}
	return c, creds, nil
}
