package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/url"
	"strings"

	"github.com/valyala/fasthttp"

	"gatehouse/actors/accounts"
	"gatehouse/actors/control"
	"gatehouse/httpapi/listener"
)

// CookieName is the name of the session cookie.
const CookieName = "gatehouse_session"

// userHandler is a handler that runs for an authenticated user.
type userHandler func(ctx context.Context, rc *fasthttp.RequestCtx, u accounts.User) error

// session runs h for the caller at the least token scope need: the user
// of an access token (Authorization: Bearer svc_pat_…, see tokenUser),
// or else of the request's session cookie. 401 without valid
// credentials, 403 INSUFFICIENT_SCOPE for a token without need, 403
// CSRF_REJECTED for a cross-site state-changing cookie request (bearer
// requests are not subject to the cookie CSRF rules: a browser never
// adds the header by itself).
func (s *Server) session(need control.Scope, h userHandler) handlerFunc {
	return func(ctx context.Context, rc *fasthttp.RequestCtx) error {
		if tok, sent := listener.Bearer(&rc.Request.Header); sent {
			u, t, err := s.tokenUser(ctx, rc, tok)
			if err != nil {
				return err
			}
			if !t.Grants(need) {
				return &apiError{fasthttp.StatusForbidden, codeInsufficientScope, "this access token lacks the " + string(need) + " scope"}
			}
			rc.SetUserValue(tokenValue, t)
			return h(ctx, rc, u)
		}
		token := rc.Request.Header.Cookie(CookieName)
		if len(token) == 0 {
			return errUnauthorized
		}
		if err := checkCSRF(rc); err != nil {
			return err
		}
		u, err := s.users.Authenticate(ctx, string(token))
		if err != nil {
			return err
		}
		return h(ctx, rc, u)
	}
}

// admin is session restricted to admins (403 FORBIDDEN for others) and,
// for a token, to the admin scope.
func (s *Server) admin(h userHandler) handlerFunc {
	return s.session(control.ScopeAdmin, func(ctx context.Context, rc *fasthttp.RequestCtx, u accounts.User) error {
		if u.Role != accounts.RoleAdmin {
			return errForbidden
		}
		return h(ctx, rc, u)
	})
}

// checkCSRF is the CSRF rule for cookie-authenticated requests. A
// state-changing request (POST, PUT, PATCH, DELETE) is refused if its
// Origin (or, lacking one, its Referer) names another host than Host, or
// if its Content-Type is one an HTML form can send cross-site. Safe
// methods and requests without those headers pass.
func checkCSRF(rc *fasthttp.RequestCtx) error {
	if !stateChanging(rc.Method()) {
		return nil
	}
	if formContentType(rc.Request.Header.ContentType()) {
		return errCSRFForm
	}
	return checkOrigin(rc)
}

// checkOrigin is the Origin/Referer half of the rule, alone.
func checkOrigin(rc *fasthttp.RequestCtx) error {
	host := rc.Request.Header.Host()
	u := rc.Request.Header.Peek(fasthttp.HeaderOrigin)
	if len(u) == 0 {
		u = rc.Request.Header.Peek(fasthttp.HeaderReferer)
	}
	if len(u) > 0 && !sameHost(u, host) {
		return errCSRFOrigin
	}
	return nil
}

func stateChanging(method []byte) bool {
	switch string(method) {
	case fasthttp.MethodPost, fasthttp.MethodPut, fasthttp.MethodPatch, fasthttp.MethodDelete:
		return true
	}
	return false
}

// formContentType reports whether ct is a media type a cross-site HTML
// form can send without a CORS preflight.
func formContentType(ct []byte) bool {
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	mt := strings.ToLower(strings.TrimSpace(string(ct)))
	return mt == "application/x-www-form-urlencoded" || mt == "multipart/form-data" || mt == "text/plain"
}

// sameHost reports whether the URL u (an Origin or a Referer) names host.
// Default ports are ignored; "null" and unparsable URLs never match.
func sameHost(u, host []byte) bool {
	p, err := url.Parse(string(u))
	if err != nil || p.Host == "" {
		return false
	}
	want := strings.ToLower(p.Host)
	got := strings.ToLower(string(host))
	def := map[string]string{"http": ":80", "https": ":443"}[strings.ToLower(p.Scheme)]
	if def != "" {
		want = strings.TrimSuffix(want, def)
		got = strings.TrimSuffix(got, def)
	}
	return want == got
}

type loginRequest struct {
	Email    json.RawMessage `json:"email"`
	Password json.RawMessage `json:"password"`
}

// login: POST /api/auth/login {email, password}. Login has no session
// yet, so only the Origin/Referer half of the CSRF rule applies (against
// login CSRF; browsers send Origin on cross-site form posts), and plain
// `curl -d` still works.
func (s *Server) login(ctx context.Context, rc *fasthttp.RequestCtx) error {
	if err := checkOrigin(rc); err != nil {
		return err
	}
	var req loginRequest
	if err := s.decodeBody(rc, &req); err != nil {
		return err
	}
	email, err := reqString(req.Email, "email")
	if err != nil {
		return err
	}
	password, err := reqString(req.Password, "password")
	if err != nil {
		return err
	}
	u, sess, err := s.users.LoginFrom(ctx, email, password, rc.RemoteIP().String())
	if err != nil {
		return err
	}
	maxAge := int(math.Ceil(sess.ExpiresAt.Sub(s.now()).Seconds()))
	s.setSessionCookie(rc, sess.Token, max(maxAge, 1))
	writeJSON(rc, fasthttp.StatusOK, sessionUserBody{User: newSessionUserView(u)})
	return nil
}

// logoutAll: POST /api/auth/logout-all ends every session of the caller,
// this one included (after a suspected compromise).
func (s *Server) logoutAll(ctx context.Context, rc *fasthttp.RequestCtx, u accounts.User) error {
	if err := s.users.LogoutAll(ctx, u.ID); err != nil {
		return err
	}
	s.setSessionCookie(rc, "", -1)
	writeJSON(rc, fasthttp.StatusOK, successBody{Success: true})
	return nil
}

// logout: POST /api/auth/logout. It is idempotent: without a session it
// still answers 200 and clears the cookie.
func (s *Server) logout(ctx context.Context, rc *fasthttp.RequestCtx) error {
	token := rc.Request.Header.Cookie(CookieName)
	if len(token) > 0 {
		if err := checkCSRF(rc); err != nil {
			return err
		}
		if err := s.users.Logout(ctx, string(token)); err != nil && !errors.Is(err, accounts.ErrSessionInvalid) {
			return err
		}
	}
	s.setSessionCookie(rc, "", -1)
	writeJSON(rc, fasthttp.StatusOK, successBody{Success: true})
	return nil
}

// me: GET /api/auth/me.
func (s *Server) me(_ context.Context, rc *fasthttp.RequestCtx, u accounts.User) error {
	writeJSON(rc, fasthttp.StatusOK, sessionUserBody{User: newSessionUserView(u)})
	return nil
}

// setSessionCookie sets the session cookie; maxAge < 0 deletes it.
func (s *Server) setSessionCookie(rc *fasthttp.RequestCtx, token string, maxAge int) {
	c := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(c)
	c.SetKey(CookieName)
	c.SetValue(token)
	c.SetPath("/")
	c.SetHTTPOnly(true)
	c.SetSameSite(fasthttp.CookieSameSiteLaxMode)
	c.SetSecure(s.cfg.SecureCookies)
	c.SetMaxAge(maxAge)
	if maxAge < 0 {
		c.SetExpire(fasthttp.CookieExpireDelete)
	}
	rc.Response.Header.SetCookie(c)
}
