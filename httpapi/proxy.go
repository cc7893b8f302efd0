package httpapi

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"gatehouse/actors"
	"gatehouse/actors/ratelimit"
)

// upstream is one proxied service with its keep-alive client, built once.
type upstream struct {
	name     string
	host     string
	basePath []byte
	headers  [][2][]byte // injected headers, name then value
	timeout  time.Duration
	client   *fasthttp.HostClient
	lastWarn atomic.Int64 // Unix second of the last upstream failure logged
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
	up := &upstream{name: name, host: u.host, basePath: []byte(u.basePath), timeout: timeout}
	for k, v := range svc.Headers {
		up.headers = append(up.headers, [2][]byte{[]byte(k), []byte(v)})
	}
	up.client = &fasthttp.HostClient{
		Addr:                     u.addr,
		IsTLS:                    u.tls,
		NoDefaultUserAgentHeader: true,
		MaxConns:                 svc.MaxConns,
		MaxConnWaitTimeout:       timeout,
		MaxResponseBodySize:      maxUpstreamBody,
		DisablePathNormalizing:   true,
		// net.Dialer rather than fasthttp's default dialer, whose DNS cache
		// keeps a goroutine for the life of the process; connections are
		// kept alive, so dials (and lookups) are rare.
		DialTimeout: dialUpstream,
		// Streaming (SSE, large bodies) will set StreamResponseBody and copy
		// the body stream into the RequestCtx; forward is shaped for it.
	}
	return up, nil
}

func dialUpstream(addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	return d.Dial("tcp", addr)
}

// proxy: ANY /api/proxy/{service}/v1/{rest}.
func (s *Server) proxy(ctx context.Context, rc *fasthttp.RequestCtx) error {
	up, suffix, res, err := s.admit(ctx, rc)
	if err != nil {
		return err
	}
	return s.forward(rc, up, suffix, res)
}

// admit is the auth+limit path of the proxy. The checks run in the order
// path (400), service (404), body size (413), key (401), limit (429), so
// only a forwardable request costs quota. suffix aliases the request's
// path.
func (s *Server) admit(ctx context.Context, rc *fasthttp.RequestCtx) (up *upstream, suffix []byte, res actors.AuthResult, err error) {
	name, suffix, ok := parseProxyPath(rc.Request.URI().PathOriginal())
	if !ok {
		return nil, nil, res, errInvalidPath
	}
	if up = s.services[string(name)]; up == nil {
		return nil, nil, res, errUnknownService
	}
	if len(rc.Request.Body()) > s.cfg.MaxProxyBodyBytes {
		return nil, nil, res, errTooLarge
	}
	res, err = s.authorize(ctx, rc)
	return up, suffix, res, err
}

// authorize checks the request's key and consumes one request of its
// limit. It sets the X-RateLimit-* headers whenever the key was usable.
// It allocates nothing on the admitted path (the key bytes are passed
// as they are: Authorize does not retain them).
func (s *Server) authorize(ctx context.Context, rc *fasthttp.RequestCtx) (actors.AuthResult, error) {
	secret := apiKey(&rc.Request.Header)
	if len(secret) == 0 {
		return actors.AuthResult{}, actors.ErrKeyMissing
	}
	res := s.keys.Authorize(ctx, secret)
	if res.Err == nil {
		setLimitHeaders(&rc.Response.Header, res.Limit)
		return res, nil
	}
	if errors.Is(res.Err, actors.ErrRateLimited) {
		setLimitHeaders(&rc.Response.Header, res.Limit)
		return res, &rateLimitedError{d: res.Limit}
	}
	return res, res.Err
}

var (
	hdrLimit     = []byte("X-RateLimit-Limit")
	hdrRemaining = []byte("X-RateLimit-Remaining")
	hdrReset     = []byte("X-RateLimit-Reset")
)

// setLimitHeaders writes the X-RateLimit-* headers of d without allocating.
func setLimitHeaders(h *fasthttp.ResponseHeader, d ratelimit.Decision) {
	var buf [20]byte
	h.SetCanonical(hdrLimit, strconv.AppendInt(buf[:0], d.Limit, 10))
	h.SetCanonical(hdrRemaining, strconv.AppendInt(buf[:0], d.Remaining, 10))
	h.SetCanonical(hdrReset, strconv.AppendInt(buf[:0], d.Reset, 10))
}

// forward sends the request to up and copies the answer into rc. The
// upstream request is the client's with hop-by-hop headers, the key and
// the session cookie removed, the forwarding headers added and up's
// headers injected. The request was admitted: it counts in usage even if
// the upstream then fails.
func (s *Server) forward(rc *fasthttp.RequestCtx, up *upstream, suffix []byte, res actors.AuthResult) error {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	buildUpstreamRequest(req, rc, up, suffix, res)

	err := up.client.DoDeadline(req, &rc.Response, time.Now().Add(up.timeout))
	if err != nil {
		rc.Response.Reset()
		setLimitHeaders(&rc.Response.Header, res.Limit)
		return &upstreamError{up: up, err: err}
	}
	stripHopHeaders(&rc.Response.Header)
	setLimitHeaders(&rc.Response.Header, res.Limit)
	return nil
}

var (
	hdrXFF       = []byte("X-Forwarded-For")
	hdrXFHost    = []byte("X-Forwarded-Host")
	hdrXFProto   = []byte("X-Forwarded-Proto")
	hdrUserID    = []byte("X-Gatehouse-User-Id")
	hdrKeyID     = []byte("X-Gatehouse-Key-Id")
	hdrAPIKey    = []byte("X-Api-Key")
	hdrAuthz     = []byte("Authorization")
	commaSpace   = []byte(", ")
	protoHTTP    = []byte("http")
	protoHTTPS   = []byte("https")
	http11       = []byte("HTTP/1.1")
	cookieNameB  = []byte(CookieName)
	hopByHopReq  = []string{"Expect", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}
	hopByHopResp = []string{"Keep-Alive", "Proxy-Authenticate", "Proxy-Connection", "Te", "Trailer", "Upgrade"}
)

var uriPool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// buildUpstreamRequest fills req from the client's request in rc.
func buildUpstreamRequest(req *fasthttp.Request, rc *fasthttp.RequestCtx, up *upstream, suffix []byte, res actors.AuthResult) {
	rc.Request.Header.CopyTo(&req.Header)
	stripConnectionTokens(&req.Header, rc.Request.Header.Peek(fasthttp.HeaderConnection))
	req.Header.ResetConnectionClose()
	for _, h := range hopByHopReq {
		req.Header.Del(h)
	}
	req.Header.DelBytes(hdrAPIKey)
	req.Header.DelBytes(hdrAuthz)
	req.Header.DelCookieBytes(cookieNameB)

	bp := uriPool.Get().(*[]byte)
	uri := append((*bp)[:0], up.basePath...)
	uri = append(uri, suffix...)
	if q := rc.URI().QueryString(); len(q) > 0 {
		uri = append(uri, '?')
		uri = append(uri, q...)
	}
	req.Header.SetRequestURIBytes(uri)
	*bp = uri
	uriPool.Put(bp)
	req.Header.SetHost(up.host)
	req.SetBodyRaw(rc.Request.Body())

	var buf [64]byte
	xff := buf[:0]
	if prev := rc.Request.Header.PeekBytes(hdrXFF); len(prev) > 0 {
		xff = append(append(xff, prev...), commaSpace...)
	}
	req.Header.SetCanonical(hdrXFF, appendRemoteIP(xff, rc.RemoteAddr()))
	req.Header.SetCanonical(hdrXFHost, rc.Request.Header.Host())
	if rc.IsTLS() {
		req.Header.SetCanonical(hdrXFProto, protoHTTPS)
	} else {
		req.Header.SetCanonical(hdrXFProto, protoHTTP)
	}
	req.Header.SetCanonical(hdrUserID, appendUUID(buf[:0], res.UserID))
	req.Header.SetCanonical(hdrKeyID, appendUUID(buf[:0], res.KeyID))
	for _, h := range up.headers {
		req.Header.SetBytesKV(h[0], h[1])
	}
}

// stripConnectionTokens removes the headers the Connection header names.
func stripConnectionTokens(h *fasthttp.RequestHeader, conn []byte) {
	for len(conn) > 0 {
		var tok []byte
		if i := indexByte(conn, ','); i >= 0 {
			tok, conn = conn[:i], conn[i+1:]
		} else {
			tok, conn = conn, nil
		}
		tok = trimOWS(tok)
		if len(tok) > 0 && !asciiEqualFold(tok, []byte("close")) && !asciiEqualFold(tok, []byte("keep-alive")) {
			h.DelBytes(tok)
		}
	}
}

// stripHopHeaders removes the upstream's hop-by-hop response headers. The
// status line is ours too: an HTTP/1.0 upstream must not make the answer
// to an HTTP/1.1 client read "HTTP/1.0".
func stripHopHeaders(h *fasthttp.ResponseHeader) {
	h.SetProtocol(http11)
	h.ResetConnectionClose()
	for _, name := range hopByHopResp {
		h.Del(name)
	}
}

func indexByte(b []byte, c byte) int {
	for i := range b {
		if b[i] == c {
			return i
		}
	}
	return -1
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// appendRemoteIP appends the client's IP without allocating.
func appendRemoteIP(dst []byte, a net.Addr) []byte {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap().AppendTo(dst)
	}
	return append(dst, a.String()...)
}

// appendUUID appends the canonical form of id.
func appendUUID(dst []byte, id [16]byte) []byte {
	const hex = "0123456789abcdef"
	for i, b := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hex[b>>4], hex[b&0x0f])
	}
	return dst
}
