package gateway

import (
	"context"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
)

// APIKeyStore is what the api-keys routes need. Safe for concurrent use.
type APIKeyStore interface {
	// CreateAPIKey returns the key and its raw form, shown only once.
	CreateAPIKey(ctx context.Context, n gateway.NewAPIKey) (gateway.APIKey, string, error)
	ListAPIKeys(ctx context.Context) ([]gateway.APIKey, error)
	// RevokeAPIKey takes effect on the key's next request; ErrNotFound.
	RevokeAPIKey(ctx context.Context, id uuid.UUID) error
}

var _ APIKeyStore = (*gateway.Gateway)(nil)

type apiKeyCreateReq struct {
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
	// ExpiresIn is a lifetime in seconds; absent or null: never expires.
	ExpiresIn *int64 `json:"expires_in,omitempty"`
	// UserID is the user the key acts for: required for read and write
	// keys; for an admin key, the user it acts for when a request names
	// none.
	UserID string `json:"user_id,omitempty"`
}

type apiKeyView struct {
	ID        uuid.UUID  `json:"id"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	Scopes    []string   `json:"scopes"`
	UserID    string     `json:"user_id"`
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

// idIn is the input of the routes that take only an {id}.
type idIn struct {
	ID string `path:"id" json:"-"`
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
		ID: k.ID, Name: k.Name, Prefix: k.Preview, Scopes: sc, UserID: k.UserID, CreatedAt: k.CreatedAt,
		ExpiresAt: timePtr(k.ExpiresAt), Revoked: !k.RevokedAt.IsZero(), RevokedAt: timePtr(k.RevokedAt),
	}
}

func (s *Server) listAPIKeys(ctx context.Context, _ Caller, _ None) (apiKeyList, error) {
	ks, err := s.d.APIKeys.ListAPIKeys(ctx)
	if err != nil {
		return apiKeyList{}, err
	}
	out := apiKeyList{Data: make([]apiKeyView, 0, len(ks))}
	for _, k := range ks {
		out.Data = append(out.Data, viewAPIKey(k))
	}
	return out, nil
}

func (s *Server) createAPIKey(ctx context.Context, _ Caller, req apiKeyCreateReq) (apiKeyCreated, error) {
	n := gateway.NewAPIKey{Name: req.Name, UserID: req.UserID}
	for _, sc := range req.Scopes {
		n.Scopes = append(n.Scopes, gateway.Scope(sc))
	}
	if req.ExpiresIn != nil {
		if *req.ExpiresIn < 1 || *req.ExpiresIn > 10*365*24*3600 {
			return apiKeyCreated{}, errInvalid("expires_in must be a number of seconds in 1..315360000")
		}
		n.ExpiresIn = time.Duration(*req.ExpiresIn) * time.Second
	}
	k, raw, err := s.d.APIKeys.CreateAPIKey(ctx, n)
	if err != nil {
		return apiKeyCreated{}, err
	}
	return apiKeyCreated{apiKeyView: viewAPIKey(k), Key: raw}, nil
}

func (s *Server) revokeAPIKey(ctx context.Context, _ Caller, in idIn) (None, error) {
	id, err := uuid.Parse(in.ID)
	if err != nil {
		return None{}, errKeyNotFound
	}
	return None{}, resource(s.d.APIKeys.RevokeAPIKey(ctx, id), errKeyNotFound, nil)
}
