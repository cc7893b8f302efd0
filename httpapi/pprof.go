package httpapi

import (
	"net/http"
	"net/http/pprof"
	"os"
	"strings"

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
	mux.HandleFunc("/debug/pprof/cmdline", pprofCmdline)
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

// pprofCmdline is pprof.Cmdline with the values of flags that may hold a
// secret (--gateway-token, --etcd-password) redacted: the listener has no
// authentication, and a flag's value is no business of a profile.
func pprofCmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(strings.Join(redactArgs(os.Args), "\x00")))
}

// redactArgs returns args with the value of every flag whose name says
// token, password, secret or key replaced by "[redacted]", in both the
// --flag=value and the --flag value forms. A boolean flag of such a name
// costs the next argument's display, nothing else.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	for i := 0; i < len(args); i++ {
		out[i] = args[i]
		if args[i] == "--" {
			copy(out[i+1:], args[i+1:])
			break
		}
		if !strings.HasPrefix(args[i], "-") {
			continue
		}
		name, _, inline := strings.Cut(args[i], "=")
		if !secretFlag(name) {
			continue
		}
		if inline {
			out[i] = name + "=[redacted]"
		} else if i+1 < len(args) {
			i++
			out[i] = "[redacted]"
		}
	}
	return out
}

func secretFlag(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"token", "password", "secret", "key"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
