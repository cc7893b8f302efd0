package httpapi

import (
	"bytes"
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

// docsPage serves the viewer, passing a ?token= on to its assets and the
// spec so a browser can open /docs?token=<token>.
func (s *GatewayServer) docsPage(r *gwReq) error {
	r.rc.SetContentType("text/html; charset=utf-8")
	if !docsBundled() {
		r.rc.SetStatusCode(fasthttp.StatusServiceUnavailable)
		r.rc.SetBodyString(docsMissing)
		return nil
	}
	q := ""
	if tok := r.rc.QueryArgs().Peek("token"); len(tok) > 0 {
		q = "?token=" + url.QueryEscape(string(tok))
	}
	var b bytes.Buffer
	if err := docsPageTmpl.Execute(&b, struct{ Query, Spec string }{q, "/docs/openapi.json" + q}); err != nil {
		return err
	}
	r.rc.Response.Header.Set("Cache-Control", "no-store")
	r.rc.SetBody(b.Bytes())
	return nil
}

func (s *GatewayServer) docsSpec(r *gwReq) error {
	r.rc.SetContentType("application/json")
	r.rc.SetBody(s.spec)
	return nil
}

var errGWFileNotFound = gwErr(fasthttp.StatusNotFound, gwNotFound, msgNotFound)

func (s *GatewayServer) docsAsset(r *gwReq) error {
	name := param(r, "file")
	if name == "" || name != path.Base(name) || name[0] == '.' {
		return errGWFileNotFound
	}
	b, err := fs.ReadFile(docsFiles, name)
	if err != nil {
		return errGWFileNotFound
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	r.rc.SetContentType(ct)
	r.rc.Response.Header.Set("Cache-Control", "public, max-age=3600")
	r.rc.SetBody(b)
	return nil
}
