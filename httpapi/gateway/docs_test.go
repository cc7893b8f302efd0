package gateway

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"gatehouse/httpapi/webassets"
)

func TestDocsPage(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	if r := e.do("GET", "/docs", "", ""); r.status != 401 {
		t.Errorf("GET /docs without a token = %d, want 401", r.status) // and a hint: TestDocsHint
	}
	r := e.must(200, "GET", "/docs?token="+gwToken, "", "")
	if !strings.Contains(r.raw, "/docs/assets/swagger-ui-bundle.js?token="+gwToken) || !strings.Contains(r.raw, "/docs/assets/gatehouse-init.js?token="+gwToken) {
		t.Errorf("page does not pass the token on: %s", r.raw)
	}
	if strings.Contains(r.raw, "<script>") || r.header.Get("Content-Security-Policy") != docsCSP {
		t.Errorf("inline script or CSP %q", r.header.Get("Content-Security-Policy"))
	}
	e.must(200, "GET", "/docs/assets/swagger-ui.css?token="+gwToken, "", "")
	e.must(404, "GET", "/docs/assets/..%2Fgwdocs.go?token="+gwToken, "", "")
	e.must(200, "GET", "/docs/openapi.json?token="+gwToken, "", "")
}

// TestVendoredAssets: the committed viewer is the pinned swagger-ui-dist's.
func TestVendoredAssets(t *testing.T) {
	err := webassets.Check("testdata/docsui-src", "docsui")
	if errors.Is(err, webassets.ErrNotInstalled) {
		missing(t, "run `make web-test-deps` (npm ci in testdata/docsui-src)")
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestDocsInChromium loads /docs in headless Chromium and checks that the
// viewer rendered the operations.
func TestDocsInChromium(t *testing.T) {
	chromium := needTool(t, "chromium", "run `make chromium` (Debian package chromium)")
	e := newGWEnv(t, gwOpts{token: gwToken})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir="+t.TempDir(), "--virtual-time-budget=20000", "--dump-dom",
		"--enable-logging=stderr", "--v=0", e.url+"/docs?token="+gwToken)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if strings.Contains(stderr.String(), "Content Security Policy") {
		t.Errorf("the viewer broke its CSP:\n%s", stderr.String())
	}
	dom := string(out)
	if n := strings.Count(dom, `class="opblock opblock-`); n != len(e.srv.routes) {
		t.Errorf("rendered %d operations, want %d", n, len(e.srv.routes))
	}
	// "Try it out" is authorized with the page's ?token= (Authorize shows
	// its lock closed): the first Execute sends the token.
	for _, want := range []string{"/v1/chat/completions", "/v1/responses", "/v1/agents/{id}/wake", "/v1/api-keys", "gatehouse agent gateway", "btn authorize locked"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q", want)
		}
	}
}
