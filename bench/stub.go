package bench

import (
	"bytes"
	"net"

	"github.com/valyala/fasthttp"
)

// JSONBody returns a JSON object of exactly n bytes (n >= 16), the body
// the stub upstream answers with.
func JSONBody(n int) []byte {
	const head, tail = `{"data":"`, `"}`
	pad := max(n-len(head)-len(tail), 0)
	return []byte(head + string(bytes.Repeat([]byte("x"), pad)) + tail)
}

// Upstream returns the stub upstream's handler: every request is answered
// 200 with body as application/json, whatever its method and path.
func Upstream(body []byte) fasthttp.RequestHandler {
	return func(rc *fasthttp.RequestCtx) {
		rc.SetContentType("application/json")
		rc.SetBody(body)
	}
}

// BareHop returns a pass-through handler to the upstream at addr: each
// request goes out as it came, over one keep-alive HostClient, and the
// answer comes back as it came. No auth, no header rewriting, buffered:
// the physical limit of one fasthttp hop, the baseline gatehouse is
// measured against.
func BareHop(addr string) fasthttp.RequestHandler {
	c := &fasthttp.HostClient{Addr: addr, MaxConns: 1024, NoDefaultUserAgentHeader: true}
	return func(rc *fasthttp.RequestCtx) {
		if err := c.Do(&rc.Request, &rc.Response); err != nil {
			rc.Error(err.Error(), fasthttp.StatusBadGateway)
		}
	}
}

// Serve serves h on ln until ln is closed, as the stub and the bare hop
// do in their own processes.
func Serve(ln net.Listener, h fasthttp.RequestHandler) error {
	srv := &fasthttp.Server{Handler: h, NoDefaultServerHeader: true}
	return srv.Serve(ln)
}
