package httpapi

import (
	"bytes"
	"net"
	"strconv"

	"github.com/valyala/fasthttp"

	"gatehouse/actors/keys"
	"gatehouse/httpapi/relay"
)

var (
	hdrXFF     = []byte("X-Forwarded-For")
	hdrXFHost  = []byte("X-Forwarded-Host")
	hdrXFProto = []byte("X-Forwarded-Proto")
	hdrUserID  = []byte("X-Gatehouse-User-Id")
	hdrKeyID   = []byte("X-Gatehouse-Key-Id")
	hdrAPIKey  = []byte("X-Api-Key")
	hdrAuthz   = []byte("Authorization")
	commaSpace = []byte(", ")
	protoHTTP  = []byte("http")
	protoHTTPS = []byte("https")
	http11     = []byte("HTTP/1.1")
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

// appendUpstreamHead appends the upstream request's request line and
// header lines (each ending in CRLF; the relay adds the framing and the
// empty line) to dst. The client's header lines are passed on as the
// bytes it sent (RawHeaders), minus the ones not forwarded (dropped,
// up.injects, those its Connection header names, its Host, framing and
// X-Forwarded-For), with the gatehouse session cookie cut out of Cookie;
// then come X-Forwarded-For (the client's first value, extended with its
// address), X-Forwarded-Host and -Proto, the identity headers and the
// service's own headers, each once.
func appendUpstreamHead(dst []byte, rc *fasthttp.RequestCtx, up *upstream, suffix []byte, res keys.AuthResult) []byte {
	h := &rc.Request.Header
	dst = append(dst, h.Method()...)
	dst = append(dst, ' ')
	dst = append(dst, up.basePath...)
	dst = append(dst, suffix...)
	if q := rc.URI().QueryString(); len(q) > 0 {
		dst = append(dst, '?')
		dst = append(dst, q...)
	}
	dst = append(dst, " HTTP/1.1\r\n"...)

	raw := h.RawHeaders()
	if len(raw) == 0 { // a request that was not parsed (built in memory)
		hb := h.Header()
		raw = hb[bytes.IndexByte(hb, '\n')+1:]
	}
	// The client's Connection header names headers about its own hop:
	// found first, as it may come after them.
	var connBuf [4][]byte
	conn := connBuf[:0]
	for rest := raw; ; {
		k, v, next, ok := nextHeader(rest)
		if !ok {
			break
		}
		rest = next
		if len(k) == len("Connection") && asciiEqualFold(k, hdrConnection) && len(conn) < cap(conn) {
			conn = append(conn, v)
		}
	}
	var kb [64]byte
	var xff []byte
	xffSeen := false
	for rest := raw; ; {
		k, v, next, ok := nextHeader(rest)
		if !ok {
			break
		}
		rest = next
		ck := canonicalKey(kb[:0], k)
		switch string(ck) {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection":
			continue
		case "X-Forwarded-For":
			if !xffSeen {
				xff, xffSeen = v, true
			}
			continue
		}
		if dropped(ck) || up.injects(ck) || namedBy(conn, k) {
			continue
		}
		if string(ck) == "Cookie" {
			dst = appendCookieLine(dst, k, v)
			continue
		}
		dst = appendLine(dst, k, v)
	}
	if !up.injects(hdrHost) {
		dst = appendLine(dst, hdrHost, up.hostB)
	}
	dst = append(dst, hdrXFF...)
	dst = append(dst, ": "...)
	if len(xff) > 0 {
		dst = append(append(dst, xff...), commaSpace...)
	}
	dst = appendRemoteIP(dst, rc.RemoteAddr())
	dst = append(dst, "\r\n"...)
	dst = appendLine(dst, hdrXFHost, h.Host())
	if rc.IsTLS() {
		dst = appendLine(dst, hdrXFProto, protoHTTPS)
	} else {
		dst = appendLine(dst, hdrXFProto, protoHTTP)
	}
	var buf [36]byte
	dst = appendLine(dst, hdrUserID, appendUUID(buf[:0], res.UserID))
	dst = appendLine(dst, hdrKeyID, appendUUID(buf[:0], res.KeyID))
	for _, kv := range up.headers {
		switch string(kv[0]) {
		case "Content-Length", "Transfer-Encoding", "Connection": // the relay's
			continue
		}
		dst = appendLine(dst, kv[0], kv[1])
	}
	return dst
}

var (
	hdrHost       = []byte("Host")
	hdrConnection = []byte("connection")
)

func appendLine(dst, k, v []byte) []byte {
	dst = append(dst, k...)
	dst = append(dst, ": "...)
	dst = append(dst, v...)
	return append(dst, "\r\n"...)
}

// appendCookieLine appends the client's Cookie line without gatehouse's
// session cookie (upstreams never see it), or nothing if that was all.
func appendCookieLine(dst, k, v []byte) []byte {
	start := len(dst)
	dst = append(dst, k...)
	dst = append(dst, ": "...)
	mark := len(dst)
	for len(v) > 0 {
		var pair []byte
		if i := bytes.IndexByte(v, ';'); i >= 0 {
			pair, v = v[:i], v[i+1:]
		} else {
			pair, v = v, nil
		}
		pair = relay.TrimOWS(pair)
		if len(pair) == 0 {
			continue
		}
		name := pair
		if i := bytes.IndexByte(pair, '='); i >= 0 {
			name = relay.TrimOWS(pair[:i])
		}
		if string(name) == CookieName {
			continue
		}
		if len(dst) > mark {
			dst = append(dst, "; "...)
		}
		dst = append(dst, pair...)
	}
	if len(dst) == mark {
		return dst[:start]
	}
	return append(dst, "\r\n"...)
}

// nextHeader splits the first header line off b (raw header lines, CRLF
// or LF ended): its name and trimmed value. ok is false at the block's
// end. A line that is not "name: value" is skipped (the server refused
// such requests already).
func nextHeader(b []byte) (k, v, rest []byte, ok bool) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		var line []byte
		if i < 0 {
			line, b = b, nil
		} else {
			line, b = b[:i], b[i+1:]
		}
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if len(line) == 0 {
			return nil, nil, nil, false
		}
		c := bytes.IndexByte(line, ':')
		if c <= 0 || line[0] == ' ' || line[0] == '\t' {
			continue
		}
		return relay.TrimOWS(line[:c]), relay.TrimOWS(line[c+1:]), b, true
	}
	return nil, nil, nil, false
}

// canonicalKey appends k in canonical form (as fasthttp normalizes names:
// upper case first and after each '-', lower case elsewhere) to dst.
func canonicalKey(dst, k []byte) []byte {
	n := len(dst)
	dst = append(dst, k...)
	d := dst[n:]
	upper := true
	for i, c := range d {
		switch {
		case upper && 'a' <= c && c <= 'z':
			d[i] = c - ('a' - 'A')
		case !upper && 'A' <= c && c <= 'Z':
			d[i] = c + ('a' - 'A')
		}
		upper = c == '-'
	}
	return dst
}

// namedBy reports whether one of the Connection header values conn
// names k (other than close and keep-alive, which name no header).
func namedBy(conn [][]byte, k []byte) bool {
	for _, v := range conn {
		for tok := range relay.Tokens(v) {
			if asciiEqualFold(tok, k) {
				return true
			}
		}
	}
	return false
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
