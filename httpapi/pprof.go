package httpapi

import (
	"net/http"
	"net/http/pprof"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// pprofProfiles are the named runtime profiles served under /debug/pprof/
// (runtime/pprof's, by pprof.Handler).
var pprofProfiles = []string{"allocs", "block", "goroutine", "heap", "mutex", "threadcreate"}

// WithPprof serves net/http/pprof's handlers under /debug/pprof/ (issue
// 35). Only NewHealthServer honours it: the metrics listener, off by
// default and meant for loopback or a private network; New's public
// listeners never serve them.
func WithPprof() Option { return func(s *Server) { s.pprof = true } }

// handlePprof routes /debug/pprof/ on r through a private http.ServeMux
// (never http.DefaultServeMux, which any imported package may fill). Each
// path is its own route, so the listener's metrics name it and an unknown
// profile gets the router's 404.
func (s *Server) handlePprof(r *router.Router) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	paths := []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/profile", "/debug/pprof/symbol", "/debug/pprof/trace"}
	for _, name := range pprofProfiles {
		mux.Handle("/debug/pprof/"+name, pprof.Handler(name))
		paths = append(paths, "/debug/pprof/"+name)
	}
	h := fasthttpadaptor.NewFastHTTPHandler(mux)
	for _, p := range paths {
		wrapped := s.l.Wrap(p, h)
		r.Handle(fasthttp.MethodGet, p, wrapped)
		if p == "/debug/pprof/symbol" { // pprof tools look symbols up by POST
			r.Handle(fasthttp.MethodPost, p, wrapped)
		}
	}
}
