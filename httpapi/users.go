package httpapi

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"gatehouse/actors/accounts"
)

type userRequest struct {
	Email         json.RawMessage `json:"email"`
	Password      json.RawMessage `json:"password"`
	Role          json.RawMessage `json:"role"`
	Plan          json.RawMessage `json:"plan"`
	LicenseActive json.RawMessage `json:"licenseActive"`
	KeyRateLimit  json.RawMessage `json:"keyRateLimit"`
}

// createUser: POST /api/users (admin). role defaults to "user", plan to
// "standard", licenseActive to false.
func (s *Server) createUser(ctx context.Context, rc *fasthttp.RequestCtx, _ accounts.User) error {
	var req userRequest
	if err := s.decodeBody(rc, &req); err != nil {
		return err
	}
	nu := accounts.NewUser{Role: accounts.RoleUser, Plan: accounts.PlanStandard}
	var err error
	if nu.Email, err = reqString(req.Email, "email"); err != nil {
		return err
	}
	if nu.Password, err = reqString(req.Password, "password"); err != nil {
		return err
	}
	role, plan, license, err := userFields(req)
	if err != nil {
		return err
	}
	if role != nil {
		nu.Role = *role
	}
	if plan != nil {
		nu.Plan = *plan
	}
	if license != nil {
		nu.LicenseActive = *license
	}
	u, err := s.users.CreateUser(ctx, nu)
	if err != nil {
		return err
	}
	writeJSON(rc, fasthttp.StatusCreated, newUserView(u))
	return nil
}

// userFields decodes the optional role, plan and licenseActive fields;
// nil means absent.
func userFields(req userRequest) (*accounts.Role, *accounts.Plan, *bool, error) {
	var (
		role    *accounts.Role
		plan    *accounts.Plan
		license *bool
	)
	if v, ok, err := optString(req.Role, "role"); err != nil {
		return nil, nil, nil, err
	} else if ok {
		r := accounts.Role(v)
		if !r.Valid() {
			return nil, nil, nil, invalidField("role", `must be "user" or "admin"`)
		}
		role = &r
	}
	if v, ok, err := optString(req.Plan, "plan"); err != nil {
		return nil, nil, nil, err
	} else if ok {
		p := accounts.Plan(v)
		if !p.Valid() {
			return nil, nil, nil, invalidField("plan", `must be "standard" or "premium"`)
		}
		plan = &p
	}
	if v, ok, err := optBool(req.LicenseActive, "licenseActive"); err != nil {
		return nil, nil, nil, err
	} else if ok {
		license = &v
	}
	return role, plan, license, nil
}

// listUsers: GET /api/users (admin).
func (s *Server) listUsers(ctx context.Context, rc *fasthttp.RequestCtx, _ accounts.User) error {
	users, err := s.users.ListUsers(ctx)
	if err != nil {
		return err
	}
	views := make([]userView, len(users))
	for i, u := range users {
		views[i] = newUserView(u)
	}
	writeJSON(rc, fasthttp.StatusOK, usersBody{Users: views})
	return nil
}

// updateUser: PATCH /api/users/{id} (admin) {plan?, licenseActive?, role?,
// password?}. An unknown or malformed id is 404 NOT_FOUND.
func (s *Server) updateUser(ctx context.Context, rc *fasthttp.RequestCtx, _ accounts.User) error {
	id, ok := pathID(rc)
	if !ok {
		return errNotFound
	}
	var req userRequest
	if err := s.decodeBody(rc, &req); err != nil {
		return err
	}
	if len(req.Email) > 0 {
		return invalidField("email", "cannot be changed")
	}
	var p accounts.UserPatch
	var err error
	if p.Role, p.Plan, p.LicenseActive, err = userFields(req); err != nil {
		return err
	}
	pw, ok, err := optString(req.Password, "password")
	if err != nil {
		return err
	}
	if ok {
		p.Password = &pw
	}
	if n, ok, err := optKeyLimit(req.KeyRateLimit); err != nil {
		return err
	} else if ok {
		p.KeyRateLimit = &n
	}
	u, err := s.users.UpdateUser(ctx, id, p)
	if err != nil {
		return err
	}
	writeJSON(rc, fasthttp.StatusOK, newUserView(u))
	return nil
}

// optKeyLimit decodes keyRateLimit: an integer in 1..maxRateLimit, or null
// (or 0) for the plan's limit again.
func optKeyLimit(raw json.RawMessage) (int64, bool, error) {
	switch {
	case len(raw) == 0:
		return 0, false, nil
	case absent(raw), string(bytes.TrimSpace(raw)) == "0":
		return 0, true, nil
	}
	n, ok, err := optRateLimit(raw, "keyRateLimit")
	return n, ok, err
}

// pathID parses the {id} path parameter. Only the canonical 36-character
// form is accepted.
func pathID(rc *fasthttp.RequestCtx) (uuid.UUID, bool) {
	s, _ := rc.UserValue("id").(string)
	return parseID(s)
}

func parseID(s string) (uuid.UUID, bool) {
	if len(s) != 36 {
		return uuid.UUID{}, false
	}
	id, err := uuid.Parse(s)
	return id, err == nil
}
