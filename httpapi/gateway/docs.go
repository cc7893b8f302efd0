package gateway

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"net/url"
	"path"
	"sync"

	"github.com/valyala/fasthttp"

	"gatehouse/httpapi/webassets"
)

// docsUI holds the OpenAPI viewer, vendored from the pinned npm package
// swagger-ui-dist by `make web-assets` and committed, so a plain `go
// build` binary serves /docs (TestVendoredAssets checks the copy).
//
//go:embed docsui/*.js docsui/*.css docsui/LICENSE docsui/NOTICE docsui/*.txt
var docsUI embed.FS

var docsPageTmpl = template.Must(template.New("docs").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gatehouse agent gateway API</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css{{.Query}}"></head>
<body><div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js{{.Query}}"></script>
<script src="/docs/assets/gatehouse-init.js{{.Query}}"></script>
</body></html>
`))

// docsHintTmpl is what a browser opening /docs without a usable token
// sees instead of the JSON error: how to open the docs.
var docsHintTmpl = template.Must(template.New("hint").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gatehouse agent gateway API</title>
<link rel="icon" href="data:,"></head>
<body style="font-family: sans-serif; max-width: 42em; margin: 3em auto; line-height: 1.5">
<h1>gatehouse agent gateway API</h1>
<p><strong>{{.}}</strong></p>
<p>The interactive docs need a credential: the gateway token (<code>gateway.token</code> in the config,
<code>--gateway-token</code> or <code>GATEHOUSE_GATEWAY_TOKEN</code>) or a gateway API key
(<code>gateway_…</code>) with scope <code>operator.read</code>.
Open <code>/docs?token=&lt;token&gt;</code>, or enter it here; the docs' "Try it out" then sends it too.</p>
<form method="get" action="/docs"><input type="password" name="token" autocomplete="off" size="48" aria-label="token">
<button type="submit">Open the docs</button></form>
</body></html>
`))

// rpcDocsPage names the viewer's route: its authentication failures are
// answered with docsHint's page, not JSON.
const rpcDocsPage = "docs.page"

// docsHint answers /docs refused for its credential (none, or not a
// live one) with a page saying how to open it, and the 401; other errors
// (a scope, a user binding) it leaves to the JSON envelope (false).
func (s *Server) docsHint(rc *fasthttp.RequestCtx, err error) bool {
	var problem string
	switch {
	case errors.Is(err, errTokenMissing):
		problem = "No token was given."
	case errors.Is(err, errTokenInvalid):
		problem = "The token was refused: it is not the gateway token nor a live gateway API key."
	default:
		return false
	}
	var b bytes.Buffer
	if docsHintTmpl.Execute(&b, problem) != nil {
		return false
	}
	rc.SetStatusCode(fasthttp.StatusUnauthorized)
	rc.SetContentType("text/html; charset=utf-8")
	for k, v := range map[string]string{"Cache-Control": "no-store", "Content-Security-Policy": docsCSP, "Referrer-Policy": "no-referrer"} {
		rc.Response.Header.Set(k, v)
	}
	rc.SetBody(b.Bytes())
	return true
}

// docsCSP is the viewer's Content-Security-Policy: everything from this
// origin, no inline script. swagger-ui sets inline styles, hence
// 'unsafe-inline' for styles only.
const docsCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// docsPageIn carries the token a browser opened /docs with, to pass on.
type docsPageIn struct {
	Token string `query:"token" json:"-"`
}

// docsPage serves the viewer, passing a ?token= on to its assets and the
// spec so a browser can open /docs?token=<token>.
func (s *Server) docsPage(_ context.Context, _ Caller, in docsPageIn) (Body, error) {
	const html = "text/html; charset=utf-8"
	q := ""
	if in.Token != "" {
		q = "?token=" + url.QueryEscape(in.Token)
	}
	var b bytes.Buffer
	if err := docsPageTmpl.Execute(&b, struct{ Query string }{q}); err != nil {
		return Body{}, err
	}
	hdr := map[string]string{"Cache-Control": "no-store", "Content-Security-Policy": docsCSP, "Referrer-Policy": "no-referrer"}
	return Body{ContentType: html, Header: hdr, Data: b.Bytes()}, nil
}

func (s *Server) docsSpec(context.Context, Caller, None) (Body, error) {
	return Body{ContentType: "application/json", Data: s.spec, Encoded: s.specEncoded()}, nil
}

type docsAssetIn struct {
	File string `path:"file" json:"-"`
}

func (s *Server) docsAsset(_ context.Context, _ Caller, in docsAssetIn) (Body, error) {
	name := in.File
	if name == "" || name != path.Base(name) || name[0] == '.' {
		return Body{}, errNotFound
	}
	files, err := docsAssets()
	if err != nil {
		return Body{}, err
	}
	a, ok := files[name]
	if !ok {
		return Body{}, errNotFound
	}
	hdr := map[string]string{"Cache-Control": "public, max-age=3600", "ETag": a.ETag}
	return Body{ContentType: a.ContentType, Header: hdr, Data: a.Body, Encoded: a.enc}, nil
}

// docsAsset is a viewer file and its compressed forms.
type docsFile struct {
	webassets.Asset
	enc *webassets.Encoded
}

// docsAssets is the viewer's files, read and compressed once (the bundle
// is 1.7 MB, 400 KB as brotli): on first use, or ahead of it by
// PrepareDocs. Then served without a copy.
var docsAssets = sync.OnceValues(func() (map[string]docsFile, error) {
	sub, err := fs.Sub(docsUI, "docsui")
	if err != nil {
		return nil, err
	}
	t, err := webassets.Load(sub, "application/octet-stream")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(sub, "*")
	if err != nil {
		return nil, err
	}
	files := make(map[string]docsFile, len(names))
	for _, name := range names {
		if a, ok := t.Get(name); ok {
			files[name] = docsFile{a, webassets.Encode(a.Body)}
		}
	}
	return files, nil
})

// PrepareDocs reads and compresses the /docs viewer's files ahead of the
// first request (about half a second of CPU); a server calls it once it
// is up, in a goroutine of its own.
func PrepareDocs() { _, _ = docsAssets() }

// DocsAsset is one of the vendored viewer's files and its compressed
// forms, for the key service's /api/docs (httpapi), which shares them.
func DocsAsset(name string) (contentType string, enc *webassets.Encoded, ok bool, err error) {
	files, err := docsAssets()
	if err != nil {
		return "", nil, false, err
	}
	a, ok := files[name]
	return a.ContentType, a.enc, ok, nil
}

// DocsCSP is the viewer page's Content-Security-Policy, shared likewise.
const DocsCSP = docsCSP
