package gateway

import (
	"bytes"
	"context"
	"embed"
	"html/template"
	"io/fs"
	"mime"
	"net/url"
	"path"

	"github.com/valyala/fasthttp"
)

// docsUI holds the OpenAPI viewer, fetched by `make docs-ui` from the npm
// package swagger-ui-dist; a fresh clone has only the README placeholder.
//
//go:embed docsui
var docsUI embed.FS

// docsFiles is the viewer's directory; tests swap it to test the
// unbundled case.
var docsFiles = func() fs.FS {
	sub, err := fs.Sub(docsUI, "docsui")
	if err != nil {
		panic(err) // a constant, valid path
	}
	return sub
}()

const (
	docsBundleJS  = "swagger-ui-bundle.js"
	docsBundleCSS = "swagger-ui.css"
)

var docsPageTmpl = template.Must(template.New("docs").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gatehouse agent gateway API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css{{.Query}}"></head>
<body><div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js{{.Query}}"></script>
<script>window.ui = SwaggerUIBundle({url: {{.Spec}}, dom_id: "#swagger-ui", docExpansion: "list", deepLinking: true});</script>
</body></html>
`))

const docsMissing = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gatehouse docs viewer not bundled</title></head>
<body><h1>The docs viewer is not bundled in this build</h1>
<p>Run <code>make docs-ui</code> (it fetches the swagger-ui-dist npm package) and rebuild.
The raw OpenAPI document is served at <a href="/docs/openapi.json">/docs/openapi.json</a>.</p></body></html>
`

func docsBundled() bool {
	_, err1 := fs.Stat(docsFiles, docsBundleJS)
	_, err2 := fs.Stat(docsFiles, docsBundleCSS)
	return err1 == nil && err2 == nil
}

// docsPageIn carries the token a browser opened /docs with, to pass on.
type docsPageIn struct {
	Token string `query:"token" json:"-"`
}

// docsPage serves the viewer, passing a ?token= on to its assets and the
// spec so a browser can open /docs?token=<token>.
func (s *Server) docsPage(_ context.Context, _ Caller, in docsPageIn) (Body, error) {
	const html = "text/html; charset=utf-8"
	if !docsBundled() {
		return Body{ContentType: html, Data: []byte(docsMissing), Status: fasthttp.StatusServiceUnavailable}, nil
	}
	q := ""
	if in.Token != "" {
		q = "?token=" + url.QueryEscape(in.Token)
	}
	var b bytes.Buffer
	if err := docsPageTmpl.Execute(&b, struct{ Query, Spec string }{q, "/docs/openapi.json" + q}); err != nil {
		return Body{}, err
	}
	return Body{ContentType: html, Header: map[string]string{"Cache-Control": "no-store"}, Data: b.Bytes()}, nil
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
		return Body{}, errFileNotFound
	}
	b, err := fs.ReadFile(docsFiles, name)
	if err != nil {
		return Body{}, errFileNotFound
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	return Body{ContentType: ct, Header: map[string]string{"Cache-Control": "public, max-age=3600"}, Data: b}, nil
}
