// Package console is the web console of the :8080 listener: a small
// single-page app, embedded in the binary, where users log in, create,
// watch, rotate, revoke and delete their API keys, and admins manage
// users and look at their keys; and where users work with the agent
// gateway (agents, chat, sessions, traces, usage) and admins run it
// (web/gw*.js).
//
// The console has no endpoints of its own: its script calls the JSON API
// the seed defines (/api/auth, /api/keys, /api/users), and the gateway's
// operations through the bridge below /api/gateway (httpapi's
// gatewaybridge.go), with the session cookie and the same CSRF rules as
// any other client: no gateway token reaches the browser. This package only
// serves the page and its assets, with a strict Content-Security-Policy
// (scripts, styles and connections from this origin only; no inline
// script or style). The charting library (uPlot) is vendored from its
// pinned npm package into web/vendor by `make web-assets`;
// TestVendoredAssets fails when the committed copy and the pin disagree.
package console

import (
	"bytes"
	"embed"
	"io/fs"
	"strings"

	"github.com/valyala/fasthttp"

	"gatehouse/httpapi/webassets"
)

// Prefix is the console's path on the listener; Root is its page.
const (
	Prefix = "/console"
	Root   = Prefix + "/"
	assets = Prefix + "/assets/"
)

//go:embed web
var webFS embed.FS

// Files is the embedded web directory: index.html, the app's script and
// style, and vendor/ (the vendored libraries and their licenses).
func Files() fs.FS {
	sub, err := fs.Sub(webFS, "web")
	if err != nil {
		panic(err) // the directory is embedded: cannot happen
	}
	return sub
}

// CSP is the Content-Security-Policy of every console response.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Handler serves the console. It is safe for concurrent use: its files
// are read once, in New.
type Handler struct {
	files *webassets.Table // the web directory
}

// New reads the embedded files and their ETags. It panics if they are
// unreadable, which only a broken build can cause (like template.Must).
func New() *Handler {
	files, err := webassets.Load(Files(), "text/plain; charset=utf-8")
	if err != nil {
		panic(err)
	}
	if _, ok := files.Get("index.html"); !ok {
		panic("console: index.html is not embedded")
	}
	return &Handler{files: files}
}

// Serve answers GET and HEAD below Prefix: the page at Root (and, for
// the app's own routes, nowhere else: they live in the URL fragment), the
// assets below /console/assets/. It reports false for a path it does
// not serve, leaving the answer to the caller.
func (h *Handler) Serve(rc *fasthttp.RequestCtx) bool {
	p := string(rc.Path())
	switch {
	case p == Prefix:
		rc.Redirect(Root, fasthttp.StatusFound)
		return true
	case p == Root:
		page, _ := h.files.Get("index.html")
		h.write(rc, page, "no-store")
		return true
	case strings.HasPrefix(p, assets):
		name := strings.TrimPrefix(p, assets)
		if name == "index.html" {
			return false
		}
		a, ok := h.files.Get(name)
		if !ok {
			return false
		}
		// Names are not content-hashed: revalidate, answered by the ETag.
		h.write(rc, a, "no-cache")
		return true
	}
	return false
}

func (h *Handler) write(rc *fasthttp.RequestCtx, a webassets.Asset, cache string) {
	hd := &rc.Response.Header
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set(fasthttp.HeaderCacheControl, cache)
	hd.Set(fasthttp.HeaderETag, a.ETag)
	if inm := rc.Request.Header.Peek(fasthttp.HeaderIfNoneMatch); len(inm) > 0 && bytes.Contains(inm, []byte(a.ETag)) {
		rc.SetStatusCode(fasthttp.StatusNotModified)
		return
	}
	hd.SetContentType(a.ContentType)
	rc.SetStatusCode(fasthttp.StatusOK)
	if !rc.IsHead() {
		rc.SetBody(a.Body)
	}
}
