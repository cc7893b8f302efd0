package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gatehouse/actors/accounts"
	"gatehouse/actors/control"
)

// apiClientDir is the npm project of the generated-client walk-through;
// validatorDir the gateway's, whose OpenAPI validator
// (@seriousme/openapi-schema-validator) TestOpenAPIDocument reuses.
const (
	apiClientDir = "testdata/apiclient"
	validatorDir = "gateway/testdata/gwclient"
)

// needNode returns node and checks that dir's npm packages are installed;
// without them the test skips, and fails under CI=true.
func needNode(tb testing.TB, dir string) string {
	tb.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		skipOrFail(tb, "node not found: install Node.js 20+")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		skipOrFail(tb, "run `make test-deps` (npm ci --prefix httpapi/"+dir+")")
	}
	return node
}

func skipOrFail(tb testing.TB, msg string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

func runNode(tb testing.TB, dir string, stdin []byte, args ...string) []byte {
	tb.Helper()
	node := needNode(tb, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("node %v: %v\n%s\n%s", args, err, out, stderr.String())
	}
	return out
}

type openAPIDoc struct {
	OpenAPI    string                               `json:"openapi"`
	Paths      map[string]map[string]map[string]any `json:"paths"`
	Components struct {
		SecuritySchemes map[string]any `json:"securitySchemes"`
		Responses       map[string]any `json:"responses"`
	} `json:"components"`
}

// TestOpenAPIDocument: GET /api/openapi.json is served without
// credentials, declares every route the router and the prefix dispatch
// serve and nothing else, and is valid OpenAPI 3.1 by a real validator.
func TestOpenAPIDocument(t *testing.T) {
	e := newTestEnv(t)
	r := e.do(t, request{method: "GET", path: "/api/openapi.json"})
	if r.status != 200 {
		t.Fatalf("GET /api/openapi.json: %d %s", r.status, r.body)
	}
	var doc openAPIDoc
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q", doc.OpenAPI)
	}
	// Every route the router serves is declared: a handler registered on
	// the router directly (not through the table) fails here.
	declared := e.srv.documentedRoutes()
	for method, paths := range e.srv.router.List() {
		for _, p := range paths {
			if !slices.Contains(declared, method+" "+p) {
				t.Errorf("%s %s is served but not declared in the route table", method, p)
			}
		}
	}
	// Every declared route is in the document, with its security.
	n := 0
	for _, rt := range e.srv.routes {
		op, ok := doc.Paths[specPath(rt.path)][strings.ToLower(rt.method)]
		if !ok {
			t.Errorf("%s %s is declared but not in the document", rt.method, rt.path)
			continue
		}
		n++
		if rt.auth == authUser || rt.auth == authAdmin {
			if op["x-required-scope"] == nil {
				t.Errorf("%s %s: no x-required-scope", rt.method, rt.path)
			}
		}
		if _, ok := op["security"]; !ok {
			t.Errorf("%s %s: no security", rt.method, rt.path)
		}
	}
	total := 0
	for _, ops := range doc.Paths {
		total += len(ops)
	}
	if total != n || n != len(e.srv.routes) {
		t.Errorf("document has %d operations, table %d", total, len(e.srv.routes))
	}
	// What the issue names is there: the seed's key routes, users, auth,
	// tokens, services, the proxy, /health, /metrics; both security
	// schemes; the error bodies and the rate-limit headers.
	for _, want := range []string{
		"POST /api/keys", "GET /api/keys", "GET /api/keys/{id}", "DELETE /api/keys/{id}", "POST /api/keys/{id}/rotate",
		"POST /api/keys/{id}/revoke", "GET /api/keys/{id}/usage", "POST /api/keys/validate", "POST /api/users",
		"POST /api/auth/login", "POST /api/tokens", "GET /api/tokens", "DELETE /api/tokens/{id}", "GET /api/services",
		"POST /api/services", "PUT /api/services/{name}", "DELETE /api/services/{name}", "GET /api/proxy/{service}/v1/{rest}",
		"POST /api/proxy/{service}/v1/{rest}", "GET /health", "GET /metrics",
	} {
		m, p, _ := strings.Cut(want, " ")
		if _, ok := doc.Paths[p][strings.ToLower(m)]; !ok {
			t.Errorf("%s missing", want)
		}
	}
	for _, s := range []string{"sessionCookie", "accessToken", "apiKey"} {
		if doc.Components.SecuritySchemes[s] == nil {
			t.Errorf("security scheme %s missing", s)
		}
	}
	body := string(r.body)
	for _, want := range []string{`"retryAfter"`, `"X-RateLimit-Remaining"`, `"ValidateInvalid"`, "SERVICE_NOT_ALLOWED", "INVALID_TOKEN"} {
		if !strings.Contains(body, want) {
			t.Errorf("document lacks %s", want)
		}
	}
	// The viewer and its assets.
	page := e.do(t, request{method: "GET", path: "/api/docs"})
	if page.status != 200 || !strings.Contains(string(page.body), "/api/docs/assets/api-init.js") || page.headers["Content-Security-Policy"] == "" {
		t.Errorf("/api/docs: %d %s", page.status, page.body)
	}
	for _, a := range []string{"swagger-ui-bundle.js", "swagger-ui.css", "api-init.js"} {
		if got := e.do(t, request{method: "GET", path: "/api/docs/assets/" + a}); got.status != 200 || len(got.body) == 0 {
			t.Errorf("asset %s: %d", a, got.status)
		}
	}
	mustStatus(t, e.do(t, request{method: "GET", path: "/api/docs/assets/..%2fsecret"}), 404, "NOT_FOUND")

	out := runNode(t, validatorDir, r.body, "validate.mjs")
	var res struct {
		Valid   bool
		Version string
		Errors  any
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("validator output %s: %v", out, err)
	}
	if !res.Valid || res.Version != "3.1" {
		t.Fatalf("document invalid (version %s): %v", res.Version, res.Errors)
	}
}

// TestGeneratedClientWalkthrough generates a TypeScript client from the
// served document (openapi-typescript, pinned), type-checks a walk-through
// against it (tsc) and runs it (openapi-fetch) on a real listener: create
// a user, create a token, with the token create a key, validate it, call
// the proxy, read usage, rotate, revoke.
func TestGeneratedClientWalkthrough(t *testing.T) {
	needNode(t, apiClientDir)
	up := newStubUpstream(t)
	e := newTestEnv(t, withWallClock(), withTCP(),
		withConfig(func(c *Config) { c.Services = map[string]Service{"echo": {Upstream: "http://" + up.addr + "/base"}} }))
	sys, srv := e.sys, e.srv
	ctx := context.Background()
	admin, err := sys.CreateUser(ctx, accounts.NewUser{Email: "root@example.com", Password: "password123", Role: accounts.RoleAdmin, LicenseActive: true})
	if err != nil {
		t.Fatal(err)
	}
	_, adminToken, err := sys.ctl.CreateToken(ctx, control.NewToken{UserID: admin.ID, Name: "bootstrap", Scopes: []control.Scope{control.ScopeAdmin}})
	if err != nil {
		t.Fatal(err)
	}

	// Generate, type-check and compile in a scratch dir that sees the
	// pinned packages.
	dir := t.TempDir()
	abs, err := filepath.Abs(apiClientDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(abs, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"walkthrough.ts", "tsconfig.json", "package.json"} {
		b, err := os.ReadFile(filepath.Join(apiClientDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "openapi.json"), srv.spec, 0o644); err != nil {
		t.Fatal(err)
	}
	runNode(t, dir, nil, "node_modules/openapi-typescript/bin/cli.js", "openapi.json", "-o", "api.d.ts")
	runNode(t, dir, nil, "node_modules/typescript/bin/tsc", "-p", ".")
	out := runNode(t, dir, nil, "out/walkthrough.js", e.base, adminToken, "echo")
	var got struct {
		UserEmail, TokenPrefix, MeID, UserID, KeyPrefix, ValidUser, ProxyBody, ProxyLimit, RotatedPrefix string
		TokenScopes                                                                                      []string
		Valid, Revoked                                                                                   bool
		ProxyStatus, AfterStatus, GraceHours, UsageTotal, UsageUsed                                      int
		AfterError                                                                                       map[string]any
		Tokens                                                                                           []string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("walk-through output %s: %v", out, err)
	}
	t.Logf("walk-through: %s", out)
	switch {
	case got.TokenPrefix != "svc_pat_" || !slices.Equal(got.TokenScopes, []string{"write"}):
		t.Errorf("token: %+v", got)
	case got.MeID != got.UserID:
		t.Errorf("the token acts as %s, want the new user %s", got.MeID, got.UserID)
	case got.KeyPrefix != "svc_live_" || !got.Valid || got.ValidUser != got.UserID:
		t.Errorf("key: %+v", got)
	case got.ProxyStatus != 202 || got.ProxyBody != "from upstream: GET" || got.ProxyLimit == "":
		t.Errorf("proxy: %d %q limit %q", got.ProxyStatus, got.ProxyBody, got.ProxyLimit)
	case got.UsageUsed < 1:
		t.Errorf("usage: %+v", got)
	case got.RotatedPrefix != "svc_live_" || got.GraceHours != 24 || !got.Revoked:
		t.Errorf("rotate/revoke: %+v", got)
	case got.AfterStatus != 401 || got.AfterError["error"] != "KEY_REVOKED" || got.AfterError["valid"] != false:
		t.Errorf("validate after revoke: %d %v", got.AfterStatus, got.AfterError)
	case !slices.Equal(got.Tokens, []string{"ci"}):
		t.Errorf("tokens: %v", got.Tokens)
	}
	if r := up.lastRequest(); r.URI != "/base/v1/hello" {
		t.Errorf("upstream saw %q", r.URI)
	}
}
