package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"gatehouse/actors/control"
	"gatehouse/actors/keys"
	"gatehouse/actors/ratelimit"
	"gatehouse/httpapi/relay"
)

// upstream is one proxied service with its keep-alive client, built once.
type upstream struct {
	name     string
	host     string
	hostB    []byte
	basePath []byte
	headers  [][2][]byte // injected headers, canonical name then value
	timeout  time.Duration
	pool     *relay.Pool  // HTTP/1.1 keep-alive connections (httpapi/relay)
	lastWarn atomic.Int64 // Unix second of the last upstream failure logged
	disabled bool         // an API service switched off: 503 SERVICE_DISABLED
}

// warnDue reports whether an upstream failure should be logged now: at
// most one line per second per service, so an outage cannot flood the log.
func (up *upstream) warnDue(now time.Time) bool {
	sec := now.Unix()
	last := up.lastWarn.Load()
	return sec != last && up.lastWarn.CompareAndSwap(last, sec)
}

func newUpstream(name string, svc Service) (*upstream, error) {
	u, err := parseUpstream(svc.Upstream)
	if err != nil { // Validate checked it already
		return nil, err
	}
	timeout := svc.Timeout
	if timeout == 0 {
		timeout = DefaultUpstreamTimeout
	}
	up := &upstream{name: name, host: u.host, hostB: []byte(u.host), basePath: []byte(u.basePath), timeout: timeout}
	for k, v := range svc.Headers {
		up.headers = append(up.headers, [2][]byte{[]byte(textproto.CanonicalMIMEHeaderKey(k)), []byte(v)})
	}
	tlsName := ""
	if u.tls {
		tlsName, _, _ = net.SplitHostPort(u.addr)
		tlsName = strings.Trim(tlsName, "[]")
	}
	up.pool = relay.New(relay.Config{
		// net.Dialer: connections are kept alive, so dials (and lookups)
		// are rare. The service's timeout bounds the dial, and the wheel
		// each exchange (proxydeadline.go).
		Dial: func() (net.Conn, error) {
			c, err := dialUpstream(u.addr, timeout, svc.noLinkLocal)
			if err != nil {
				return nil, err
			}
			wc := net.Conn(newWheelConn(c, upstreamWheel, timeout))
			if u.tls {
				wc = tls.Client(wc, &tls.Config{ServerName: tlsName, MinVersion: tls.VersionTLS12})
			}
			return wc, nil
		},
		MaxConns:    svc.MaxConns,
		MaxConnWait: timeout,
	})
	return up, nil
}

// injects reports whether the service sets a header named k (canonical):
// the client's copies are dropped, so only the service's value arrives.
func (up *upstream) injects(k []byte) bool {
	for _, kv := range up.headers {
		if string(kv[0]) == string(k) {
			return true
		}
	}
	return false
}

// dialUpstream dials addr; noLinkLocal refuses link-local addresses,
// whatever name they came from (linklocal.go).
func dialUpstream(addr string, timeout time.Duration, noLinkLocal bool) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if noLinkLocal {
		d.Control = refuseLinkLocal
	}
	return d.Dial("tcp", addr)
}

// proxy: ANY /api/proxy/{service}/v1/{rest}. It runs under wrapHot: ctx
// has no deadline (Authorize bounds its own wait) and the upstream
// exchange is bounded by Service.Timeout.
func (s *Server) proxy(ctx context.Context, rc *fasthttp.RequestCtx) error {
	up, suffix, res, err := s.admit(ctx, rc)
	if err != nil {
		settleUnreadBody(rc)
		return err
	}
	return s.forward(rc, up, suffix, res)
}

// admit is the auth+limit path of the proxy. The checks run in the order
// path (400), service (404, 503 disabled), body size (413), key (401),
// limit (429), the key's services (403), so only a request of a valid
// key for a live service costs quota (one refused by the key's services
// list was authorized, and counts). suffix aliases the request's path.
// It allocates nothing: the service table and the key's service list are
// frozen values behind atomic pointers.
func (s *Server) admit(ctx context.Context, rc *fasthttp.RequestCtx) (up *upstream, suffix []byte, res keys.AuthResult, err error) {
	name, suffix, ok := parseProxyPath(rc.Request.URI().PathOriginal())
	if !ok {
		return nil, nil, res, errInvalidPath
	}
	tbl := s.table.Load()
	if up = tbl.byName[string(name)]; up == nil {
		return nil, nil, res, tbl.errUnknown
	}
	if up.disabled {
		return nil, nil, res, errServiceDisabled
	}
	if proxyBodyTooLarge(rc, s.cfg.MaxProxyBodyBytes) {
		return nil, nil, res, errTooLarge
	}
	res, err = s.authorize(ctx, rc)
	if err == nil && s.ctl != nil {
		// A key limited to some services: refused before anything is sent
		// upstream (the request was authorized, so it counts).
		if l, limited := s.ctl.View().KeyServices(res.KeyID); limited && !control.Allowed(l, name) {
			s.setLimitHeaders(&rc.Response.Header, res.Limit)
			return up, suffix, res, errServiceNotAllowed
		}
	}
	return up, suffix, res, err
}

// authorize checks the request's key and consumes one request of its
// limit. It sets the rate-limit headers of a refused request; forward
// sets those of an admitted one, once the upstream's headers are in. It
// allocates nothing (the key bytes are passed as they are: Authorize does
// not retain them).
func (s *Server) authorize(ctx context.Context, rc *fasthttp.RequestCtx) (keys.AuthResult, error) {
	secret := apiKey(&rc.Request.Header)
	if len(secret) == 0 {
		return keys.AuthResult{}, keys.ErrKeyMissing
	}
	res := s.keys.Authorize(ctx, secret)
	if res.Err == nil {
		return res, nil
	}
	if errors.Is(res.Err, keys.ErrRateLimited) {
		s.setLimitHeaders(&rc.Response.Header, res.Limit)
		return res, &rateLimitedError{d: res.Limit}
	}
	return res, res.Err
}

var (
	hdrLimit       = []byte("X-RateLimit-Limit")
	hdrRemaining   = []byte("X-RateLimit-Remaining")
	hdrReset       = []byte("X-RateLimit-Reset")
	hdrRateLimit   = []byte("RateLimit")
	hdrRatePolicy  = []byte("RateLimit-Policy")
	policyPrefix   = []byte(`"hourly";q=`)
	policyWindow   = []byte(`;w=3600`)
	limitRemaining = []byte(`"hourly";r=`)
	limitReset     = []byte(`;t=`)
)

// setLimitHeaders writes the rate-limit headers of d without allocating:
// X-RateLimit-Limit, -Remaining and -Reset (Unix seconds), and the IETF
// draft (draft-ietf-httpapi-ratelimit-headers) RateLimit-Policy
// `"hourly";q=LIMIT;w=3600` and RateLimit `"hourly";r=REMAINING;t=SECONDS`
// where SECONDS is Reset minus now (on a 429, equal to Retry-After).
//
// The limit and the remaining count are formatted once each, inside the
// draft header's value, and the X- headers take their digits from there.
func (s *Server) setLimitHeaders(h *fasthttp.ResponseHeader, d ratelimit.Decision) {
	var pbuf, rbuf, buf [64]byte
	policy := strconv.AppendInt(append(pbuf[:0], policyPrefix...), d.Limit, 10)
	h.SetCanonical(hdrLimit, policy[len(policyPrefix):])
	rl := strconv.AppendInt(append(rbuf[:0], limitRemaining...), d.Remaining, 10)
	h.SetCanonical(hdrRemaining, rl[len(limitRemaining):])
	h.SetCanonical(hdrReset, strconv.AppendInt(buf[:0], d.Reset, 10))

	h.SetCanonical(hdrRatePolicy, append(policy, policyWindow...))
	t := d.RetryAfter
	if t == 0 {
		t = max(0, d.Reset-s.now().Unix())
	}
	h.SetCanonical(hdrRateLimit, strconv.AppendInt(append(rl, limitReset...), t, 10))
}

// forward sends the request to up and answers rc with the upstream's
// answer. The request body is buffered or streamed (see attachBody), and
// so is the answer (see relayBody). The request was admitted: it counts
// in usage even if the upstream then fails.
func (s *Server) forward(rc *fasthttp.RequestCtx, up *upstream, suffix []byte, res keys.AuthResult) error {
	ex := exchangePool.Get().(*exchange)
	ex.head = appendUpstreamHead(ex.head[:0], rc, up, suffix, res)
	ex.req = relay.Request{Head: ex.head}
	body, err := attachBody(ex, rc, s.cfg.MaxProxyBodyBytes)
	if err != nil {
		ex.release()
		rc.SetConnectionClose()
		s.setLimitHeaders(&rc.Response.Header, res.Limit)
		return err
	}
	m := rc.Request.Header.Method()
	ex.req.IsHead = string(m) == fasthttp.MethodHead
	ex.req.Idempotent = ex.req.IsHead || string(m) == fasthttp.MethodGet || string(m) == fasthttp.MethodPut
	ex.req.SendLength = !ex.req.IsHead && string(m) != fasthttp.MethodGet
	err = up.pool.Do(&ex.req, &ex.resp) // timed by the wheel (proxydeadline.go)
	unread, clientErr := body.release()
	if unread {
		// The rest of the client's body is still on the wire, where the
		// next request would be read: this connection carries no other.
		defer rc.SetConnectionClose()
	}
	if err != nil {
		ex.release()
		return s.upstreamFailed(rc, up, res, clientErr, err)
	}
	copyResponseHeader(rc, &ex.resp.Head)
	s.setLimitHeaders(&rc.Response.Header, res.Limit)
	if err := relayBody(rc, ex); err != nil {
		return s.upstreamFailed(rc, up, res, nil, err)
	}
	return nil
}

// upstreamFailed resets the answer to rc after a failed exchange and
// returns the error for writeError. If reading the client's streamed
// body failed (clientErr), the exchange failed because of the client:
// 413 for a body over MaxProxyBodyBytes, 400 for a malformed or cut one,
// 408 for one that stopped coming, none of them an upstream failure.
// Otherwise 502 or 504. The rate-limit headers stay.
func (s *Server) upstreamFailed(rc *fasthttp.RequestCtx, up *upstream, res keys.AuthResult, clientErr, err error) error {
	rc.Response.Reset()
	s.setLimitHeaders(&rc.Response.Header, res.Limit)
	if clientErr != nil {
		return clientErr
	}
	return &upstreamError{up: up, err: err}
}
