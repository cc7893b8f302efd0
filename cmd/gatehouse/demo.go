package main

import (
	"encoding/json"
	"maps"
	"net"
	"slices"
	"strings"

	"github.com/valyala/fasthttp"
)

// demoEcho serves the demo service "echo" (--demo-echo): it answers every
// request with what reached it (method, path, query, the headers minus
// credentials, the body's size), so that a newcomer can try the proxy
// without a real service. It listens on loopback only, for as long as
// the process lives, and returns its base URL.
func demoEcho() (upstream string, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &fasthttp.Server{NoDefaultServerHeader: true, Handler: func(rc *fasthttp.RequestCtx) {
		headers := map[string]string{}
		rc.Request.Header.VisitAll(func(k, v []byte) {
			name := string(k)
			switch strings.ToLower(name) {
			case "authorization", "x-api-key", "cookie":
				return
			}
			headers[name] = string(v)
		})
		b, _ := json.Marshal(map[string]any{
			"echo": true, "method": string(rc.Method()), "path": string(rc.Path()), "query": string(rc.QueryArgs().QueryString()),
			"headers": headers, "header_names": slices.Sorted(maps.Keys(headers)), "body_bytes": len(rc.Request.Body()),
		})
		rc.SetContentType("application/json")
		rc.SetBody(b)
	}}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}
