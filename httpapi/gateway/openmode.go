package gateway

import (
	"net"
	"net/url"
	"strings"

	"github.com/valyala/fasthttp"
)

// Open mode (an empty gateway token, which cmd allows on loopback only)
// treats a request without a token as the admin. Only programs on this
// machine may get that, so in open mode: the Host must be a loopback name
// (DNS rebinding points a foreign name at 127.0.0.1), an Origin, when a
// browser sends one, must be loopback too (a web page must not drive the
// gateway), and a body must have its route's content type (a page can
// send text/plain cross-origin without asking).

var errOpenModeHost = newError(fasthttp.StatusForbidden, codeUnauthorized, msgOpenMode, "Host")

// openModeGuard applies those rules to rc.
func openModeGuard(rc *fasthttp.RequestCtx, rt *Route) error {
	if !loopbackHost(string(rc.Host())) {
		return errOpenModeHost
	}
	if o := rc.Request.Header.Peek("Origin"); len(o) > 0 {
		u, err := url.Parse(string(o))
		if err != nil || !loopbackHost(u.Host) {
			return newError(fasthttp.StatusForbidden, codeUnauthorized, msgOpenMode, "Origin")
		}
	}
	if len(rc.Request.Body()) == 0 {
		return nil
	}
	want := "application/json"
	if raw := rt.Op.input().raw; raw != nil {
		want = raw.name
	}
	ct := string(rc.Request.Header.ContentType())
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	if !strings.EqualFold(strings.TrimSpace(ct), want) && !(want != "application/json" && strings.HasPrefix(ct, "text/")) {
		return errInvalid("Content-Type must be " + want)
	}
	return nil
}

// loopbackHost reports whether host (with or without a port) names this
// machine: localhost, 127.0.0.0/8 or ::1.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
