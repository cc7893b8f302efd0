package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"gatehouse/actors/accounts"
	"gatehouse/actors/keys"
	"gatehouse/httpapi/listener"
)

const (
	defaultUsageDays = 7
	maxUsageDays     = 30
	msgKeyCreated    = "Save this API key now: it is shown only once and cannot be retrieved again."
	msgKeyRotated    = "Save the new API key now: it is shown only once. The old key stays valid until the grace period ends."
	msgKeyRevoked    = "API key revoked: it is no longer valid."
)

type keyRequest struct {
	Name      json.RawMessage `json:"name"`
	ExpiresAt json.RawMessage `json:"expiresAt"`
	RateLimit json.RawMessage `json:"rateLimit"`
	Services  json.RawMessage `json:"services"`
}

// createKey: POST /api/keys {name, expiresAt?, services?}. A key with
// services reaches only those; its secret is answered only once the list
// is durable (a failure deletes the key again).
func (s *Server) createKey(ctx context.Context, rc *fasthttp.RequestCtx, u accounts.User) error {
	var req keyRequest
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
	if err = checkName(name, "name"); err != nil {
		return err
	}
	exp, _, err := optTime(req.ExpiresAt, "expiresAt", s.now())
	if err != nil {
		return err
	}
	services, _, err := s.optServices(req.Services)
	if err != nil {
		return err
	}
	info, secret, err := s.keys.CreateKey(ctx, keys.NewKey{Owner: s.users.KeyOwner(u), Name: name, ExpiresAt: exp})
	if err != nil {
		return err
	}
	if len(services) > 0 {
		if err := s.ctl.SetKeyServices(ctx, info.ID, services); err != nil {
			if derr := s.keys.DeleteKey(context.WithoutCancel(ctx), info.ID); derr != nil {
				s.lg.Error("key left without its services list", "key_id", info.ID, "err", derr)
			}
			return err
		}
	}
	noStore(rc) // the full key is in this answer: no cache may keep it
	writeJSON(rc, fasthttp.StatusCreated, createdKeyBody{ID: info.ID, Key: secret, Name: info.Name, Message: msgKeyCreated})
	return nil
}

// listKeys: GET /api/keys[?viewAs=<user_id>], newest first.
func (s *Server) listKeys(ctx context.Context, rc *fasthttp.RequestCtx, u accounts.User) error {
	owner, err := viewAs(rc, u)
	if err != nil {
		return err
	}
	list, err := s.keys.ListKeys(ctx, owner)
	if err != nil {
		return err
	}
	slices.SortStableFunc(list, func(a, b keys.KeyInfo) int { return b.CreatedAt.Compare(a.CreatedAt) })
	views := make([]keyListView, len(list))
	for i, k := range list {
		views[i] = newKeyListView(k)
		views[i].Services = s.keyServices(k.ID)
	}
	writeJSON(rc, fasthttp.StatusOK, keysBody{Keys: views})
	return nil
}

// ownedKey returns the key named by the {id} path parameter if u owns it
// or is an admin. Anything else is KEY_NOT_FOUND, so that nobody learns
// whether another user's key exists.
func (s *Server) ownedKey(ctx context.Context, rc *fasthttp.RequestCtx, u accounts.User) (keys.KeyInfo, error) {
	id, ok := pathID(rc)
	if !ok {
		return keys.KeyInfo{}, errKeyNotFound
	}
	k, err := s.keys.GetKey(ctx, id)
	if err != nil {
		return keys.KeyInfo{}, err
	}
	if k.Owner != u.ID && !actsAsAdmin(rc, u) {
		return keys.KeyInfo{}, errKeyNotFound
	}
	return k, nil
}

// getKey: GET /api/keys/{id}.
func (s *Server) getKey(ctx context.Context, rc *fasthttp.RequestCtx, u accounts.User) error {
	k, err := s.ownedKey(ctx, rc, u)
	if err != nil {
		return err
	}
	writeJSON(rc, fasthttp.StatusOK, keyBody{Key: s.keyDetail(k)})
	return nil
}

// keyServices is the key's services list, nil when it reaches every
// service.
func (s *Server) keyServices(id uuid.UUID) []string {
	if s.ctl == nil {
		return nil
	}
	l, _ := s.ctl.View().KeyServices(id)
	return l
}

func (s *Server) keyDetail(k keys.KeyInfo) keyDetailView {
	v := newKeyDetailView(k)
	v.Services = s.keyServices(k.ID)
	return v
}

// deleteKey: DELETE /api/keys/{id}.
func (s *Server) deleteKey(ctx context.Context, rc *fasthttp.RequestCtx, u accounts.User) error {
	k, err := s.ownedKey(ctx, rc, u)
	if err != nil {
		return err
	}
	if err := s.keys.DeleteKey(ctx, k.ID); err != nil {
		return err
	}
	if s.keyServices(k.ID) != nil {
		if err := s.ctl.SetKeyServices(ctx, k.ID, nil); err != nil {
			// The key is gone: its leftover list limits nothing.
			s.lg.Warn("services list of a deleted key not removed", "key_id", k.ID, "err", err)
		}
	}
	writeJSON(rc, fasthttp.StatusOK, successBody{Success: true})
	return nil
}

// rotateKey: POST /api/keys/{id}/rotate.
func (s *Server) rotateKey(ctx context.Context, rc *fasthttp.RequestCtx, u accounts.User) error {
	k, err := s.ownedKey(ctx, rc, u)
	if err != nil {
		return err
	}
	_, secret, err := s.keys.RotateKey(ctx, k.ID)
	if err != nil {
		return err
	}
	noStore(rc)
	writeJSON(rc, fasthttp.StatusOK, rotatedKeyBody{
		Key: secret, Message: msgKeyRotated, GracePeriodHours: int64(s.cfg.GracePeriod / time.Hour),
	})
	return nil
}

// revokeKey: POST /api/keys/{id}/revoke. Revoking a revoked key succeeds.
func (s *Server) revokeKey(ctx context.Context, rc *fasthttp.RequestCtx, u accounts.User) error {
	k, err := s.ownedKey(ctx, rc, u)
	if err != nil {
		return err
	}
	if err := s.keys.RevokeKey(ctx, k.ID); err != nil {
		return err
	}
	writeJSON(rc, fasthttp.StatusOK, successBody{Success: true, Message: msgKeyRevoked})
	return nil
}

// updateKey: PATCH /api/keys/{id} (admin) {rateLimit?, name?, expiresAt?,
// services?}; expiresAt null clears the expiry, services null or [] lets
// the key reach every service. At least one field is required.
func (s *Server) updateKey(ctx context.Context, rc *fasthttp.RequestCtx, u accounts.User) error {
	k, err := s.ownedKey(ctx, rc, u)
	if err != nil {
		return err
	}
	var req keyRequest
	if err = s.decodeBody(rc, &req); err != nil {
		return err
	}
	services, setServices, err := s.optServices(req.Services)
	if err != nil {
		return err
	}
	p, err := s.keyPatch(req, setServices)
	if err != nil {
		return err
	}
	if p.RateLimit != nil && k.Owner != u.ID {
		// An admin's lower limit on a user's key caps the user's later keys
		// (deleting the key and creating another does not escape it); a
		// higher one is this key's alone (KeyRateLimitCap).
		if _, err := s.users.UpdateUser(ctx, k.Owner, accounts.UserPatch{KeyRateLimitCap: p.RateLimit}); err != nil {
			return err
		}
	}
	if p.RateLimit != nil || p.Name != nil || p.ExpiresAt != nil {
		if k, err = s.keys.UpdateKey(ctx, k.ID, p); err != nil {
			return err
		}
	}
	if setServices {
		if err := s.ctl.SetKeyServices(ctx, k.ID, services); err != nil {
			return err
		}
	}
	writeJSON(rc, fasthttp.StatusOK, keyBody{Key: s.keyDetail(k)})
	return nil
}

func (s *Server) keyPatch(req keyRequest, services bool) (keys.KeyPatch, error) {
	var p keys.KeyPatch
	if n, ok, err := optRateLimit(req.RateLimit, "rateLimit"); err != nil {
		return p, err
	} else if ok {
		p.RateLimit = &n
	}
	if len(req.Name) > 0 {
		name, ok, err := optString(req.Name, "name")
		if err != nil {
			return p, err
		}
		if !ok {
			return p, invalidField("name", "must be a string")
		}
		if err := checkName(name, "name"); err != nil {
			return p, err
		}
		p.Name = &name
	}
	if exp, set, err := optTime(req.ExpiresAt, "expiresAt", s.now()); err != nil {
		return p, err
	} else if set {
		p.ExpiresAt = &exp
	}
	if p.RateLimit == nil && p.Name == nil && p.ExpiresAt == nil && !services {
		return p, invalidField("body", "must set at least one of rateLimit, name, expiresAt, services")
	}
	return p, nil
}

// keyUsage: GET /api/keys/{id}/usage?days=N, N in 1..30, default 7.
func (s *Server) keyUsage(ctx context.Context, rc *fasthttp.RequestCtx, u accounts.User) error {
	days := defaultUsageDays
	if len(rc.QueryArgs().PeekMulti("days")) > 1 {
		return invalidField("days", "must be given once")
	}
	if rc.QueryArgs().Has("days") {
		n, err := strconv.Atoi(string(rc.QueryArgs().Peek("days")))
		if err != nil || n < 1 || n > maxUsageDays {
			return invalidField("days", "must be an integer between 1 and %d", maxUsageDays)
		}
		days = n
	}
	k, err := s.ownedKey(ctx, rc, u)
	if err != nil {
		return err
	}
	usage, err := s.keys.KeyUsage(ctx, k.ID, days)
	if err != nil {
		return err
	}
	writeJSON(rc, fasthttp.StatusOK, newUsageBody(usage))
	return nil
}

// validateKey: POST /api/keys/validate. It does not consume the limit. A
// key that is valid but at its limit is still valid.
func (s *Server) validateKey(ctx context.Context, rc *fasthttp.RequestCtx) error {
	secret := apiKey(&rc.Request.Header)
	if len(secret) == 0 {
		s.writeValidateError(rc, keys.ErrKeyMissing)
		return nil
	}
	res := s.keys.Validate(ctx, secret)
	if res.Err != nil && !errors.Is(res.Err, keys.ErrRateLimited) {
		s.writeValidateError(rc, res.Err)
		return nil
	}
	writeValidOK(rc, res.UserID, res.Limit.Limit, res.IsActive)
	return nil
}

// writeValidOK writes validate's 200 body by hand: this endpoint is a hot
// path for callers that check keys themselves, and json.Marshal of
// validateBody cost a reflection walk and three allocations per call. The
// output is byte-for-byte what json.Marshal writes, and the newline every
// JSON answer ends with (TestWriteValidOK).
func writeValidOK(rc *fasthttp.RequestCtx, userID uuid.UUID, limit int64, active bool) {
	var buf [128]byte
	b := append(buf[:0], `{"valid":true,"userId":"`...)
	b = appendUUID(b, userID)
	b = append(b, `","rateLimit":`...)
	b = strconv.AppendInt(b, limit, 10)
	b = append(b, `,"isActive":`...)
	b = strconv.AppendBool(b, active)
	b = append(b, "}\n"...)
	rc.SetStatusCode(fasthttp.StatusOK)
	rc.SetContentType("application/json")
	rc.SetBody(b)
}

// apiKey returns the key of a request: X-API-Key, else the token of
// Authorization: Bearer (scheme case-insensitive). The result aliases the
// request's memory: use it only inside the handler.
func apiKey(h *fasthttp.RequestHeader) []byte {
	if k := bytes.TrimSpace(h.Peek("X-API-Key")); len(k) > 0 {
		return k
	}
	tok, _ := listener.Bearer(h)
	return tok
}

func asciiEqualFold(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		ca, cb := a[i], b[i]
		if 'A' <= ca && ca <= 'Z' {
			ca += 'a' - 'A'
		}
		if 'A' <= cb && cb <= 'Z' {
			cb += 'a' - 'A'
		}
		if ca != cb {
			return false
		}
	}
	return true
}

// noStore marks an answer that carries a secret as not to be cached.
func noStore(rc *fasthttp.RequestCtx) {
	rc.Response.Header.Set("Cache-Control", "no-store")
	rc.Response.Header.Set("Pragma", "no-cache")
}
