package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"gatehouse/actors/accounts"
	"gatehouse/actors/control"
	"gatehouse/actors/keys"
)

// Access tokens for the management API (svc_pat_…): POST, GET
// /api/tokens and DELETE /api/tokens/{id}, and the bearer side of
// session (auth.go).

// ControlService is what the HTTP layer needs from the automation domain
// (actors/control): tokens, API-managed services, per-key service lists.
type ControlService interface {
	CreateToken(ctx context.Context, nt control.NewToken) (control.Token, string, error)
	ListTokens(ctx context.Context, user uuid.UUID) ([]control.Token, error)
	RevokeToken(ctx context.Context, id, owner uuid.UUID) error
	// CheckToken resolves a presented token for a client at ip: errors
	// control.ErrTokenInvalid, ErrTokenExpired, *control.ThrottledError.
	CheckToken(ctx context.Context, secret, ip string) (control.Token, error)
	GetService(name string) (control.Service, error)
	CreateService(ctx context.Context, name string, in control.ServiceInput) (control.Service, error)
	UpdateService(ctx context.Context, name string, in control.ServiceInput) (control.Service, error)
	DeleteService(ctx context.Context, name string) error
	SetKeyServices(ctx context.Context, key uuid.UUID, services []string) error
	// View is the current frozen view; Subscribe calls fn with every new
	// one (and the current one at once).
	View() *control.View
	Subscribe(fn func(*control.View))
}

var _ ControlService = (*control.Control)(nil)

// tokenValue is the request user value that holds the control.Token of a
// bearer request.
const tokenValue = "gatehouse.token"

// callerToken returns the access token the request authenticated with.
func callerToken(rc *fasthttp.RequestCtx) (control.Token, bool) {
	t, ok := rc.UserValue(tokenValue).(control.Token)
	return t, ok
}

// actsAsAdmin reports whether the caller may use admin powers: an admin's
// session, or an admin's token with the admin scope.
func actsAsAdmin(rc *fasthttp.RequestCtx, u accounts.User) bool {
	if u.Role != accounts.RoleAdmin {
		return false
	}
	t, ok := callerToken(rc)
	return !ok || t.Grants(control.ScopeAdmin)
}

// tokenUser resolves a bearer token to its user, its scopes capped by the
// user's role now (an admin token of a user who is no longer an admin
// grants nothing). A svc_live_ key is never a management credential.
// The token is never logged.
func (s *Server) tokenUser(ctx context.Context, rc *fasthttp.RequestCtx, tok []byte) (accounts.User, control.Token, error) {
	if s.ctl == nil {
		return accounts.User{}, control.Token{}, errTokenInvalid
	}
	isKey := bytes.HasPrefix(tok, []byte(keys.KeyPrefix+"_"))
	t, err := s.ctl.CheckToken(ctx, string(tok), rc.RemoteIP().String())
	if err != nil {
		if isKey && errors.Is(err, control.ErrTokenInvalid) {
			return accounts.User{}, control.Token{}, errKeyNotToken
		}
		return accounts.User{}, control.Token{}, err
	}
	u, err := s.users.GetUser(ctx, t.UserID)
	if errors.Is(err, accounts.ErrUserNotFound) {
		return accounts.User{}, control.Token{}, errTokenInvalid
	}
	if err != nil {
		return accounts.User{}, control.Token{}, err
	}
	if u.Role != accounts.RoleAdmin {
		t.Scopes = slices.DeleteFunc(t.Scopes, func(sc control.Scope) bool { return sc == control.ScopeAdmin })
	}
	return u, t, nil
}

type tokenRequest struct {
	Name      json.RawMessage `json:"name"`
	Scopes    json.RawMessage `json:"scopes"`
	ExpiresAt json.RawMessage `json:"expiresAt"`
	UserID    json.RawMessage `json:"userId"`
}

// createToken: POST /api/tokens {name, scopes, expiresAt?, userId?}. The
// scopes may not exceed the user's role, nor, for a request made with a
// token, that token's own scopes; nor may its expiry exceed that token's
// (absent: the same), and revoking that token revokes this one too.
// userId (another user) needs admin.
func (s *Server) createToken(ctx context.Context, rc *fasthttp.RequestCtx, u accounts.User) error {
	if s.ctl == nil {
		return errNoControl
	}
	var req tokenRequest
	if err := s.decodeBody(rc, &req); err != nil {
		return err
	}
	name, ok, err := optString(req.Name, "name")
	if err != nil {
		return err
	}
	if !ok {
		return invalidField("name", "is required")
	}
	if err := checkName(name, "name"); err != nil {
		return err
	}
	var scopes []control.Scope
	if absent(req.Scopes) || json.Unmarshal(req.Scopes, &scopes) != nil || len(scopes) == 0 {
		return invalidField("scopes", `must be a non-empty array of "read", "write", "admin"`)
	}
	for _, sc := range scopes {
		if !sc.Valid() {
			return invalidField("scopes", `must be a non-empty array of "read", "write", "admin"`)
		}
	}
	exp, _, err := optTime(req.ExpiresAt, "expiresAt", s.now())
	if err != nil {
		return err
	}
	owner := u
	if uid, ok, err := optString(req.UserID, "userId"); err != nil {
		return err
	} else if ok && uid != u.ID.String() {
		if !actsAsAdmin(rc, u) {
			return &apiError{fasthttp.StatusForbidden, codeForbidden, "userId (a token for another user) requires the admin role"}
		}
		id, valid := parseID(uid)
		if !valid {
			return invalidField("userId", "must be a user id (UUID)")
		}
		if owner, err = s.users.GetUser(ctx, id); err != nil {
			return err
		}
	}
	caller, viaToken := callerToken(rc)
	for _, sc := range scopes {
		if sc == control.ScopeAdmin && owner.Role != accounts.RoleAdmin {
			return invalidField("scopes", `"admin" is only for admin users`)
		}
		if viaToken && !caller.Grants(sc) {
			return &apiError{fasthttp.StatusForbidden, codeInsufficientScope, "a token cannot create a token with more scopes than its own"}
		}
	}
	nt := control.NewToken{UserID: owner.ID, Name: name, Scopes: scopes, ExpiresAt: exp}
	if viaToken {
		nt.Parent = caller.ID // expires no later than the caller's token, dies with it
	}
	t, secret, err := s.ctl.CreateToken(ctx, nt)
	if err != nil {
		return err
	}
	noStore(rc)
	writeJSON(rc, fasthttp.StatusCreated, tokenCreatedBody{
		ID: t.ID, Token: secret, Name: t.Name, Scopes: t.Scopes, UserID: t.UserID,
		ExpiresAt: isoTime(t.ExpiresAt), CreatedAt: isoTime(t.CreatedAt),
	})
	return nil
}

// listTokens: GET /api/tokens[?viewAs=<user_id>] (viewAs: admin).
func (s *Server) listTokens(ctx context.Context, rc *fasthttp.RequestCtx, u accounts.User) error {
	if s.ctl == nil {
		return errNoControl
	}
	owner, err := viewAs(rc, u)
	if err != nil {
		return err
	}
	ts, err := s.ctl.ListTokens(ctx, owner)
	if err != nil {
		return err
	}
	views := make([]tokenView, len(ts))
	for i, t := range ts {
		views[i] = newTokenView(t)
	}
	writeJSON(rc, fasthttp.StatusOK, tokensBody{Tokens: views})
	return nil
}

// revokeToken: DELETE /api/tokens/{id}: the caller's own token, or any
// for an admin. Anything else is TOKEN_NOT_FOUND.
func (s *Server) revokeToken(ctx context.Context, rc *fasthttp.RequestCtx, u accounts.User) error {
	if s.ctl == nil {
		return errNoControl
	}
	id, ok := pathID(rc)
	if !ok {
		return errTokenNotFound
	}
	owner := u.ID
	if actsAsAdmin(rc, u) {
		owner = uuid.Nil
	}
	if err := s.ctl.RevokeToken(ctx, id, owner); err != nil {
		return err
	}
	writeJSON(rc, fasthttp.StatusOK, successBody{Success: true, Message: "access token revoked"})
	return nil
}

// viewAs is the owner a list is for: the caller, or ?viewAs=<user_id>
// for an admin.
func viewAs(rc *fasthttp.RequestCtx, u accounts.User) (uuid.UUID, error) {
	if !rc.QueryArgs().Has("viewAs") {
		return u.ID, nil
	}
	if !actsAsAdmin(rc, u) {
		return uuid.Nil, &apiError{fasthttp.StatusForbidden, codeForbidden, "viewAs requires the admin role"}
	}
	id, ok := parseID(string(rc.QueryArgs().Peek("viewAs")))
	if !ok {
		return uuid.Nil, invalidField("viewAs", "must be a user id (UUID)")
	}
	return id, nil
}

// tokenView is one entry of GET /api/tokens.
type tokenView struct {
	ID         uuid.UUID       `json:"id"`
	Name       string          `json:"name"`
	Scopes     []control.Scope `json:"scopes"`
	UserID     uuid.UUID       `json:"userId"`
	CreatedAt  isoTime         `json:"createdAt"`
	LastUsedAt isoTime         `json:"lastUsedAt"`
	ExpiresAt  isoTime         `json:"expiresAt"`
}

func newTokenView(t control.Token) tokenView {
	return tokenView{
		ID: t.ID, Name: t.Name, Scopes: t.Scopes, UserID: t.UserID, CreatedAt: isoTime(t.CreatedAt),
		LastUsedAt: isoTime(t.LastUsedAt), ExpiresAt: isoTime(t.ExpiresAt),
	}
}

type tokensBody struct {
	Tokens []tokenView `json:"tokens"`
}

// tokenCreatedBody is the answer of POST /api/tokens: the only time the
// token is shown.
type tokenCreatedBody struct {
	ID        uuid.UUID       `json:"id"`
	Token     string          `json:"token"`
	Name      string          `json:"name"`
	Scopes    []control.Scope `json:"scopes"`
	UserID    uuid.UUID       `json:"userId"`
	ExpiresAt isoTime         `json:"expiresAt"`
	CreatedAt isoTime         `json:"createdAt"`
}
