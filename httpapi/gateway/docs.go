package gateway

import (
	"bytes"
	"context"
	"embed"
	"html/template"
	"io/fs"
	"net/url"
	"path"
	"sync"

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
	return Body{ContentType: "application/json", Data: s.spec}, nil
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
	a, ok := files.Get(name)
	if !ok {
		return Body{}, errNotFound
	}
	return Body{ContentType: a.ContentType, Header: map[string]string{"Cache-Control": "public, max-age=3600"}, Data: a.Body}, nil
}

// docsAssets is the viewer's files, read on first use (not at start-up:
// the bundle is 1.7 MB) and then served without a copy.
var docsAssets = sync.OnceValues(func() (*webassets.Table, error) {
	sub, err := fs.Sub(docsUI, "docsui")
	if err != nil {
		return nil, err
	}
	return webassets.Load(sub, "application/octet-stream")
})

// DocsAssets is the vendored viewer's files, for the key service's
// /api/docs (httpapi), which shares them.
func DocsAssets() (*webassets.Table, error) { return docsAssets() }

// DocsCSP is the viewer page's Content-Security-Policy, shared likewise.
const DocsCSP = docsCSP
