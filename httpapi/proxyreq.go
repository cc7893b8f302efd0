package httpapi

import (
	"bytes"
	"net"
	"strconv"
	"sync"

	"github.com/valyala/fasthttp"

	"gatehouse/actors"
)

var (
	hdrXFF      = []byte("X-Forwarded-For")
	hdrXFHost   = []byte("X-Forwarded-Host")
	hdrXFProto  = []byte("X-Forwarded-Proto")
	hdrUserID   = []byte("X-Gatehouse-User-Id")
	hdrKeyID    = []byte("X-Gatehouse-Key-Id")
	hdrAPIKey   = []byte("X-Api-Key")
	hdrAuthz    = []byte("Authorization")
	commaSpace  = []byte(", ")
	protoHTTP   = []byte("http")
	protoHTTPS  = []byte("https")
	http11      = []byte("HTTP/1.1")
	cookieNameB = []byte(CookieName)
)

// dropped reports whether the client's header named k (canonical form) is
// not forwarded: hop-by-hop (RFC 9110 §7.6.1), Expect, the key, a header
// gatehouse sets itself (X-Forwarded-Host/-Proto, the identity headers:
// removed so that no copy a client sends survives, however often it is
// repeated), a claim about the client's address that gatehouse does not
// vouch for (Forwarded, X-Real-IP: an upstream trusting them would take
// the client's word; X-Forwarded-For is extended with the real address
// instead), or a name with "_" (some servers read it as "-": a way to
// smuggle X-Gatehouse-User-Id). Connection and Transfer-Encoding are
// removed unconditionally, the service's own headers by up.injects.
func dropped(k []byte) bool {
	switch string(k) {
	case "Proxy-Authorization", "X-Api-Key", "Authorization", "Expect",
		"X-Forwarded-Host", "X-Forwarded-Proto", "X-Gatehouse-User-Id", "X-Gatehouse-Key-Id",
		"Forwarded", "X-Real-Ip":
		return true
	}
	return hopByHop(k) || bytes.IndexByte(k, '_') >= 0
}

// hopByHop reports whether a header named k (canonical form) is about one
// hop only, in either direction (RFC 9110 §7.6.1). Connection and
// Transfer-Encoding are handled apart, as fasthttp keeps them apart.
func hopByHop(k []byte) bool {
	switch string(k) {
	case "Keep-Alive", "Proxy-Authenticate", "Proxy-Connection", "Te", "Trailer", "Upgrade":
		return true
	}
	return false
}

var uriPool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// buildUpstreamRequest fills req's header from the client's request in rc;
// attachBody adds the body.
func buildUpstreamRequest(req *fasthttp.Request, rc *fasthttp.RequestCtx, up *upstream, suffix []byte, res actors.AuthResult) {
	h := &req.Header
	rc.Request.Header.CopyTo(h)
	if conn := rc.Request.Header.Peek(fasthttp.HeaderConnection); len(conn) > 0 {
		stripConnectionTokens(h, conn) // its tokens are as the client cased them
	}
	// Every name from here on is canonical already (the server normalized
	// the client's, ours are constants): no need to normalize each again.
	h.DisableNormalizing()
	// The client's Connection header is about its own hop: forwarded, it
	// would make an HTTP/1.1 intermediary before the upstream drop the
	// headers it names (the identity headers set below).
	h.Del(fasthttp.HeaderConnection)
	h.ResetConnectionClose()
	h.Del(fasthttp.HeaderTransferEncoding)
	// One pass finds what to drop, so that the usual request, which has
	// nothing to drop but its key, pays for one deletion instead of ten.
	var buf8 [8][]byte
	drop := buf8[:0] // grows (allocates) only past 8 headers to drop
	for k := range rc.Request.Header.All() {
		if dropped(k) || up.injects(k) {
			drop = append(drop, k)
		}
	}
	for _, k := range drop {
		h.DelBytes(k) // every copy
	}
	if len(rc.Request.Header.Peek(fasthttp.HeaderCookie)) > 0 {
		h.DelCookieBytes(cookieNameB)
	}

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

	var buf [64]byte
	xff := buf[:0]
	if prev := rc.Request.Header.PeekBytes(hdrXFF); len(prev) > 0 {
		xff = append(append(xff, prev...), commaSpace...)
	}
	req.Header.SetCanonical(hdrXFF, appendRemoteIP(xff, rc.RemoteAddr()))
	// The rest were dropped from the copy above (dropped, up.injects):
	// appended without looking for a copy to replace.
	req.Header.AddBytesKV(hdrXFHost, rc.Request.Header.Host())
	if rc.IsTLS() {
		req.Header.AddBytesKV(hdrXFProto, protoHTTPS)
	} else {
		req.Header.AddBytesKV(hdrXFProto, protoHTTP)
	}
	req.Header.AddBytesKV(hdrUserID, appendUUID(buf[:0], res.UserID))
	req.Header.AddBytesKV(hdrKeyID, appendUUID(buf[:0], res.KeyID))
	for _, kv := range up.headers {
		req.Header.SetCanonical(kv[0], kv[1]) // may be a special header (Host, User-Agent…)
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

// appendRemoteIP appends the client's IP without allocating: an IPv4
// address (or an IPv4-mapped IPv6 one) in dotted decimal, written
// directly (netip's conversion was a visible cost per request), any
// other as netip writes it.
func appendRemoteIP(dst []byte, a net.Addr) []byte {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return append(dst, a.String()...)
	}
	if ip4 := ta.IP.To4(); ip4 != nil {
		for i, b := range ip4 {
			if i > 0 {
				dst = append(dst, '.')
			}
			dst = strconv.AppendUint(dst, uint64(b), 10)
		}
		return dst
	}
	return ta.AddrPort().Addr().AppendTo(dst)
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
