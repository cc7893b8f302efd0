// Package listener holds the fasthttp pieces every gatehouse listener
// shares, so that the key-management API (httpapi) and the agent gateway
// (httpapi/gateway) behave alike at the HTTP level: one server
// configuration (timeouts, no Server header, body limits, close on
// shutdown), one route wrapper (per-route Prometheus metrics and a panic
// guard that logs once and answers 500), an exact-match router, JSON
// writing and strict JSON-object decoding, the Authorization: Bearer
// parser, /metrics, and WatchPeer, which tells a handler that waits long
// that its client went away (fasthttp does not). Serve survives running
// out of file descriptors (accepting pauses), and a Conns budget shared by
// a process's listeners caps their connections, in all and per client
// address (limit.go).
//
// A listener keeps its own error format: it gets the listener-level
// failures (ErrPanic, ErrTooLarge, ErrRequestTimeout, ErrMalformed)
// through Options.ErrorHandler and writes them its way.
//
// # Usage
//
//	l, err := listener.New(listener.Options{Name: "api", Logger: lg, Registerer: reg,
//		MaxRequestBodySize: 1 << 20, ErrorHandler: s.writeError})
//	r := listener.NewRouter()
//	r.GET("/health", l.Wrap("/health", health))
//	r.NotFound = l.Wrap(listener.RouteUnmatched, notFound)
//	l.SetHandler(r.Handler)
//	conns := listener.NewConns(480, 240) // one budget for every listener
//	go l.Serve(conns.Limit(ln))
//	defer l.Shutdown(ctx)
//
// # Concurrency and ownership
//
// A Listener is safe for concurrent use once its handler is set. The
// metric collectors are shared by every Listener on one Registerer; the
// "listener" label tells them apart. Nothing here keeps a
// *fasthttp.RequestCtx or its bytes past the handler: Bearer's result
// aliases the request and must be copied by a caller that keeps it.
package listener
