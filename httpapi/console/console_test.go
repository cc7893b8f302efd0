package console

import (
	"errors"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gatehouse/httpapi/webassets"
)

func get(h *Handler, path string, hdr map[string]string) (*fasthttp.RequestCtx, bool) {
	var rc fasthttp.RequestCtx
	rc.Request.SetRequestURI(path)
	for k, v := range hdr {
		rc.Request.Header.Set(k, v)
	}
	return &rc, h.Serve(&rc)
}

func TestServe(t *testing.T) {
	h := New()
	tests := []struct {
		path   string
		served bool
		status int
		ctype  string
		cache  string
	}{
		{"/console", true, 302, "", ""},
		{"/console/", true, 200, "text/html; charset=utf-8", "no-store"},
		{"/console/assets/app.js", true, 200, "text/javascript; charset=utf-8", "no-cache"},
		{"/console/assets/gw.js", true, 200, "text/javascript; charset=utf-8", "no-cache"},
		{"/console/assets/app.css", true, 200, "text/css; charset=utf-8", "no-cache"},
		{"/console/assets/vendor/uPlot.iife.min.js", true, 200, "text/javascript; charset=utf-8", "no-cache"},
		{"/console/assets/vendor/uPlot.LICENSE", true, 200, "text/plain; charset=utf-8", "no-cache"},
		{"/console/assets/index.html", false, 0, "", ""},
		{"/console/assets/nope.js", false, 0, "", ""},
		{"/console/assets/../console.go", false, 0, "", ""},
		{"/console/keys", false, 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rc, served := get(h, tt.path, nil)
			if served != tt.served {
				t.Fatalf("served = %v, want %v", served, tt.served)
			}
			if !served {
				return
			}
			if got := rc.Response.StatusCode(); got != tt.status {
				t.Fatalf("status = %d, want %d", got, tt.status)
			}
			if tt.status != 200 {
				return
			}
			hd := &rc.Response.Header
			for k, want := range map[string]string{
				"Content-Type": tt.ctype, "Cache-Control": tt.cache, "Content-Security-Policy": CSP,
				"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
			} {
				if got := string(hd.Peek(k)); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			etag := string(hd.Peek("ETag"))
			rc2, _ := get(h, tt.path, map[string]string{"If-None-Match": etag})
			if etag == "" || rc2.Response.StatusCode() != 304 || len(rc2.Response.Body()) != 0 {
				t.Errorf("If-None-Match %s = %d", etag, rc2.Response.StatusCode())
			}
		})
	}
}

// TestStrictPage: nothing the CSP would block, and nothing that could
// keep a full key in the browser or insert text as HTML.
func TestStrictPage(t *testing.T) {
	page, _ := fs.ReadFile(Files(), "index.html")
	for _, re := range []string{`<script(?:\s+type="module")?>`, `<script>`, `\sstyle=`, `<style`, `https?://`, `\son[a-z]+=`} {
		if m := regexp.MustCompile(re).Find(page); m != nil {
			t.Errorf("index.html has %q, which the CSP forbids or which loads from elsewhere", m)
		}
	}
	scripts, err := fs.Glob(Files(), "*.js")
	if err != nil || len(scripts) < 5 {
		t.Fatalf("the console's scripts: %v %v", scripts, err)
	}
	for _, name := range scripts {
		app, err := fs.ReadFile(Files(), name)
		if err != nil {
			t.Fatal(err)
		}
		// The SVG namespace is a name, not an address anything loads from.
		src := strings.ReplaceAll(string(app), `'http://www.w3.org/2000/svg'`, "")
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "localStorage", "sessionStorage",
			"document.cookie", "indexedDB", "eval(", "new Function", "http://", "https://", ".style."} {
			if strings.Contains(src, bad) {
				t.Errorf("%s uses %q", name, bad)
			}
		}
	}
}

// TestVendoredAssets: the committed chart library is the pinned uplot's.
func TestVendoredAssets(t *testing.T) {
	err := webassets.Check("testdata/npm", "web")
	if errors.Is(err, webassets.ErrNotInstalled) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v: `make web-test-deps` must run before the tests in CI", err)
		}
		t.Skipf("%v: run `make web-test-deps`", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}
