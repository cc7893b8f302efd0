package gateway

import (
	"context"
	"crypto/subtle"
	"errors"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"gatehouse/actors/gateway"
	"gatehouse/httpapi/listener"
)

// Authenticator resolves gateway API keys. Safe for concurrent use.
type Authenticator interface {
	// Authenticate returns the key's id and scopes: gateway.ErrKeyMissing,
	// gateway.ErrKeyInvalid (malformed, unknown, revoked, expired). It
	// bounds its own wait and does not retain token.
	Authenticate(ctx context.Context, token []byte) (gateway.KeyAuth, error)
}

// Limiter is the per-subject token bucket. Safe for concurrent use.
type Limiter interface {
	// Allow takes a token from subject's bucket; always true when off.
	Allow(ctx context.Context, subject string) (bool, error)
}

var (
	_ Authenticator = (*gateway.Gateway)(nil)
	_ Limiter       = (*gateway.Gateway)(nil)
)

// caller authenticates the request and reads its common headers. The
// token comes from Authorization: Bearer, or from ?token= where the route
// allows it.
func (s *Server) caller(ctx context.Context, rc *fasthttp.RequestCtx, queryToken bool) (Caller, error) {
	tok, sent := listener.Bearer(&rc.Request.Header)
	switch {
	case sent && len(tok) == 0 && s.cfg.Token == "" && emptyBearer(rc.Request.Header.Peek(fasthttp.HeaderAuthorization)):
		// Open mode: "Bearer " with nothing after it (a script's empty
		// $TOKEN) is no token, as if the header were absent.
	case sent && len(tok) == 0: // another scheme, or no token after Bearer
		return Caller{}, errTokenInvalid
	case !sent && queryToken:
		tok = rc.QueryArgs().Peek("token")
	}
	c, err := s.authenticate(ctx, tok)
	if err != nil {
		s.countAuthFailure(err)
		return c, err
	}
	if err := readHeaders(&rc.Request.Header, &c); err != nil {
		return c, err
	}
	if err := bindUser(&c, c.UserID); err != nil {
		s.authFailures.WithLabelValues("user_binding").Inc()
		return c, err
	}
	c.IP, c.Channel = rc.RemoteIP().String(), "http" // never IP:port
	return c, nil
}

// bindUser sets the user c acts for from the user the request asks for
// (X-Gateway-User-Id, or the WebSocket connect's user_id). A trusted
// backend (the gateway token, open mode, an operator.admin key) acts for
// the user it asks for, else for its key's user if it has one. Any other
// key acts for the user it was created for and nobody else: asking for
// another is errUserBinding (403), and a key from before keys were bound
// to users acts for no user (routes that need one answer 400).
func bindUser(c *Caller, asked string) error {
	switch {
	case c.Trusted() && asked != "":
		c.UserID = asked
	case c.Trusted():
		c.UserID = c.KeyUser
	case asked != "" && asked != c.KeyUser:
		return errUserBinding
	default:
		c.UserID = c.KeyUser
	}
	return nil
}

// authenticate resolves the token a transport received (HTTP: per
// request; the WebSocket RPC: at the handshake and again before each
// request) into a Caller's
// credential: the gateway token (constant-time compare) or an API key.
// No token is admin in open mode (an empty Config.Token, which cmd allows
// on loopback only) and errTokenMissing otherwise.
func (s *Server) authenticate(ctx context.Context, tok []byte) (Caller, error) {
	var c Caller
	switch {
	case len(tok) == 0 && s.cfg.Token == "":
		c.Admin, c.Open = true, true
	case len(tok) == 0:
		return c, errTokenMissing
	case len(s.token) > 0 && subtle.ConstantTimeCompare(tok, s.token) == 1:
		c.Admin = true
	default:
		auth, err := s.d.Auth.Authenticate(ctx, tok)
		if errors.Is(err, gateway.ErrKeyMissing) || errors.Is(err, gateway.ErrKeyInvalid) {
			return c, errTokenInvalid
		}
		if err != nil {
			return c, err
		}
		c.KeyID, c.Scopes, c.KeyUser = auth.ID, auth.Scopes, auth.UserID
	}
	return c, nil
}

var slugRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// readHeaders reads X-Gateway-User-Id, -Agent-Id and -Tenant-Id into c.
func readHeaders(h *fasthttp.RequestHeader, c *Caller) error {
	c.UserID = string(h.Peek("X-Gateway-User-Id"))
	if !printable(c.UserID, 255) {
		return errBadHeader("X-Gateway-User-Id")
	}
	c.AgentID = string(h.Peek("X-Gateway-Agent-Id"))
	if !printable(c.AgentID, 255) {
		return errBadHeader("X-Gateway-Agent-Id")
	}
	c.TenantID = string(h.Peek("X-Gateway-Tenant-Id"))
	if c.TenantID != "" {
		if _, err := uuid.Parse(c.TenantID); err != nil && !slugRE.MatchString(c.TenantID) {
			return errBadHeader("X-Gateway-Tenant-Id")
		}
	}
	return nil
}

func printable(v string, maxLen int) bool {
	if len(v) > maxLen || !utf8.ValidString(v) {
		return false
	}
	for _, c := range v {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// admit runs the checks every transport runs once the caller is known,
// in this order: the rate limit, the scope, the user header. Public
// routes skip them.
func (s *Server) admit(ctx context.Context, rt *Route, c Caller) error {
	if rt.Public {
		return nil
	}
	if err := s.limit(ctx, c); err != nil {
		return err
	}
	if !c.Grants(rt.Scope) {
		s.authFailures.WithLabelValues("scope").Inc()
		return errScope(rt.Scope)
	}
	if rt.NeedUser && c.UserID == "" {
		return errUserRequired
	}
	return nil
}

// limit takes a token from the bucket of the caller's subject: the
// credential and the user it acts for (never a header alone, so a key
// cannot spend another's budget nor escape its own by naming users), and
// the client IP only when there is no credential (open mode).
func (s *Server) limit(ctx context.Context, c Caller) error {
	var subject string
	switch {
	case c.KeyID != uuid.Nil:
		subject = "key:" + c.KeyID.String() + "|user:" + c.UserID
	case c.Console:
		subject = "console|user:" + c.UserID
	case !c.Open:
		subject = "token|user:" + c.UserID
	default:
		subject = "ip:" + c.IP
	}
	ok, err := s.d.Limiter.Allow(ctx, subject)
	if err != nil {
		return err
	}
	if !ok {
		return errRateLimited
	}
	return nil
}

// countAuthFailure counts a refused credential by reason (metrics only:
// failed attempts are not written to the activity log per request).
func (s *Server) countAuthFailure(err error) {
	switch {
	case errors.Is(err, errTokenMissing):
		s.authFailures.WithLabelValues("missing").Inc()
	case errors.Is(err, errTokenInvalid):
		s.authFailures.WithLabelValues("invalid").Inc()
	}
}

// emptyBearer reports whether an Authorization value is the Bearer scheme
// with no token.
func emptyBearer(v []byte) bool { return strings.EqualFold(strings.TrimSpace(string(v)), "bearer") }
