package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gatehouse/actors/accounts"
	"gatehouse/actors/control"
	"gatehouse/actors/keys"
)

// namedUpstream answers every request with its name; /slow after delay.
func namedUpstream(tb testing.TB, name string, delay time.Duration) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(rc *fasthttp.RequestCtx) {
		if strings.HasSuffix(string(rc.Path()), "/slow") {
			time.Sleep(delay)
		}
		rc.Response.Header.Set("X-Seen-Auth", string(rc.Request.Header.Peek("X-Upstream-Auth")))
		rc.SetBodyString(name)
	}}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	tb.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			tb.Errorf("upstream Shutdown() = %v", err)
		}
		<-done
	})
	return "http://" + ln.Addr().String()
}

func TestServicesAPI(t *testing.T) {
	a, b := namedUpstream(t, "A", 0), namedUpstream(t, "B", 0)
	w := newTestEnv(t, withWorld(), withConfig(func(c *Config) {
		c.Services = map[string]Service{"cfg": {Upstream: a, Headers: map[string]string{"X-Upstream-Auth": "config-secret-0123456789"}}}
	}))
	_, key := w.createKey(t, w.aliceCk, "k")
	call := func(svc string) response {
		return w.do(t, request{method: "GET", path: "/api/proxy/" + svc + "/v1/x", headers: []string{"X-API-Key", key}})
	}
	admin := func(method, path, body string) response {
		return w.do(t, request{method: method, path: path, body: body, cookie: w.adminCk})
	}

	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"config is read-only (PUT)", "PUT", "/api/services/cfg", `{"upstream":"` + b + `"}`, 409, codeServiceReadOnly},
		{"config is read-only (DELETE)", "DELETE", "/api/services/cfg", ``, 409, codeServiceReadOnly},
		{"config name taken", "POST", "/api/services", `{"name":"cfg","upstream":"` + b + `"}`, 409, codeServiceExists},
		{"bad name", "POST", "/api/services", `{"name":"a/b","upstream":"` + b + `"}`, 400, codeValidation},
		{"bad upstream", "POST", "/api/services", `{"name":"x","upstream":"ftp://x"}`, 400, codeValidation},
		{"no upstream", "POST", "/api/services", `{"name":"x"}`, 400, codeValidation},
		{"bad header", "POST", "/api/services", `{"name":"x","upstream":"` + b + `","headers":{"Bad Name":"v"}}`, 400, codeValidation},
		{"bad timeout", "POST", "/api/services", `{"name":"x","upstream":"` + b + `","timeoutMs":-1}`, 400, codeValidation},
		{"absent (PUT)", "PUT", "/api/services/nope", `{"upstream":"` + b + `"}`, 404, codeServiceNotFound},
		{"absent (GET)", "GET", "/api/services/nope", ``, 404, codeServiceNotFound},
		{"absent (DELETE)", "DELETE", "/api/services/nope", ``, 404, codeServiceNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { mustStatus(t, admin(tt.method, tt.path, tt.body), tt.status, tt.code) })
	}
	mustStatus(t, w.do(t, request{method: "GET", path: "/api/services", cookie: w.aliceCk}), 403, codeForbidden)
	mustStatus(t, w.do(t, request{method: "POST", path: "/api/services", cookie: w.aliceCk, body: `{"name":"x","upstream":"` + b + `"}`}), 403, codeForbidden)

	mustStatus(t, call("new"), 404, codeUnknownService)
	c := admin("POST", "/api/services", `{"name":"new","upstream":"`+b+`","headers":{"X-Upstream-Auth":"api-secret-0123456789"},"description":"B side","timeoutMs":2000}`)
	mustStatus(t, c, 201, "")
	if strings.Contains(string(c.body), "api-secret") {
		t.Errorf("answer shows the header value: %s", c.body)
	}
	// Takes effect on the next request, headers injected.
	if r := call("new"); r.status != 200 || string(r.body) != "B" || r.headers["X-Seen-Auth"] != "api-secret-0123456789" {
		t.Fatalf("new service: %d %s %v", r.status, r.body, r.headers)
	}
	l := admin("GET", "/api/services", "")
	mustStatus(t, l, 200, "")
	if strings.Contains(string(l.body), "secret-0123") || !strings.Contains(string(l.body), `"readOnly":true`) || len(l.json["services"].([]any)) != 2 {
		t.Errorf("list: %s", l.body)
	}
	// Replace: headers absent are kept; disabled answers 503.
	mustStatus(t, admin("PUT", "/api/services/new", `{"upstream":"`+a+`","enabled":false}`), 200, "")
	mustStatus(t, call("new"), 503, codeServiceDisabled)
	mustStatus(t, admin("PUT", "/api/services/new", `{"upstream":"`+a+`"}`), 200, "")
	if r := call("new"); string(r.body) != "A" || r.headers["X-Seen-Auth"] != "api-secret-0123456789" {
		t.Fatalf("changed service: %s %v", r.body, r.headers)
	}
	mustStatus(t, admin("PUT", "/api/services/new", `{"upstream":"`+a+`","headers":null}`), 200, "")
	if r := call("new"); r.headers["X-Seen-Auth"] != "" {
		t.Errorf("headers null kept them: %v", r.headers)
	}
	// Durable: a new server on a restarted system serves it.
	w.sys.node.Stop()
	e2 := newTestEnv(t, withDataDir(w.sys.node.Dir), withConfig(func(c *Config) { c.Services = map[string]Service{"cfg": {Upstream: a}} }))
	r := e2.do(t, request{method: "GET", path: "/api/proxy/new/v1/x", headers: []string{"X-API-Key", key}})
	if r.status != 200 || string(r.body) != "A" {
		t.Fatalf("after restart: %d %s", r.status, r.body)
	}
	mustStatus(t, e2.do(t, request{method: "DELETE", path: "/api/services/new", cookie: e2.login(t, "admin@example.com")}), 200, "")
	mustStatus(t, e2.do(t, request{method: "GET", path: "/api/proxy/new/v1/x", headers: []string{"X-API-Key", key}}), 404, codeUnknownService)
}

func TestKeyServicesLimit(t *testing.T) {
	a, b := namedUpstream(t, "A", 0), namedUpstream(t, "B", 0)
	w := newTestEnv(t, withWorld(), withConfig(func(c *Config) { c.Services = map[string]Service{"a": {Upstream: a}, "b": {Upstream: b}} }))
	mustStatus(t, w.do(t, request{method: "POST", path: "/api/keys", cookie: w.aliceCk, body: `{"name":"x","services":["nope"]}`}), 400, codeValidation)
	mustStatus(t, w.do(t, request{method: "POST", path: "/api/keys", cookie: w.aliceCk, body: `{"name":"x","services":"a"}`}), 400, codeValidation)
	r := w.do(t, request{method: "POST", path: "/api/keys", cookie: w.aliceCk, body: `{"name":"only-a","services":["a"]}`})
	mustStatus(t, r, 201, "")
	id, limited := r.json["id"].(string), r.json["key"].(string)
	_, open := w.createKey(t, w.aliceCk, "open")
	call := func(key, svc string) response {
		return w.do(t, request{method: "POST", path: "/api/proxy/" + svc + "/v1/x", body: `{}`, headers: []string{"X-API-Key", key}})
	}
	if got := call(limited, "a"); got.status != 200 || string(got.body) != "A" {
		t.Fatalf("allowed service: %d %s", got.status, got.body)
	}
	mustStatus(t, call(limited, "b"), 403, codeServiceNotAllowed)
	if got := call(open, "b"); string(got.body) != "B" {
		t.Errorf("key without services: %s", got.body)
	}
	l := w.do(t, request{method: "GET", path: "/api/keys", cookie: w.aliceCk})
	for _, k := range l.json["keys"].([]any) {
		km := k.(map[string]any)
		svcs, has := km["services"]
		if (km["id"] == id) != has || (has && fmt.Sprint(svcs) != "[a]") {
			t.Errorf("list entry %v: services %v", km["name"], svcs)
		}
	}
	// Only an admin PATCHes; [] lifts the limit.
	mustStatus(t, w.do(t, request{method: "PATCH", path: "/api/keys/" + id, cookie: w.aliceCk, body: `{"services":[]}`}), 403, codeForbidden)
	p := w.do(t, request{method: "PATCH", path: "/api/keys/" + id, cookie: w.adminCk, body: `{"services":["b"]}`})
	if p.status != 200 || fmt.Sprint(p.json["key"].(map[string]any)["services"]) != "[b]" {
		t.Fatalf("patch: %s", p.body)
	}
	mustStatus(t, call(limited, "a"), 403, codeServiceNotAllowed)
	mustStatus(t, w.do(t, request{method: "PATCH", path: "/api/keys/" + id, cookie: w.adminCk, body: `{"services":[]}`}), 200, "")
	if got := call(limited, "a"); string(got.body) != "A" {
		t.Errorf("after lifting: %d %s", got.status, got.body)
	}
	d := w.do(t, request{method: "GET", path: "/api/keys/" + id, cookie: w.aliceCk})
	if _, has := d.json["key"].(map[string]any)["services"]; has {
		t.Errorf("detail after lifting: %s", d.body)
	}
}

// TestServiceChangesUnderLoad adds, changes and removes a service through
// the API while other services carry traffic: no request to the others
// fails, each change is seen by the next request, and a request in flight
// finishes on the service it started on.
func TestServiceChangesUnderLoad(t *testing.T) {
	steady, one, two := namedUpstream(t, "steady", 0), namedUpstream(t, "one", 300*time.Millisecond), namedUpstream(t, "two", 0)
	w := newTestEnv(t, withWorld(), withConfig(func(c *Config) { c.Services = map[string]Service{"steady": {Upstream: steady}} }))
	keyID, key := w.createKey(t, w.bobCk, "load")
	admin := func(method, path, body string) {
		t.Helper()
		if r := w.do(t, request{method: method, path: path, body: body, cookie: w.adminCk}); r.status >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, r.status, r.body)
		}
	}
	// Closed loops on an in-memory listener outrun any plan's hour.
	admin("PATCH", "/api/keys/"+keyID.String(), `{"rateLimit":1000000000}`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := w.do(t, request{method: "GET", path: "/api/proxy/steady/v1/x", headers: []string{"X-API-Key", key}})
				if r.status == 200 && string(r.body) == "steady" {
					ok.Add(1)
				} else {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%d %s", r.status, r.body))
				}
			}
		})
	}
	get := func(path string) response {
		return w.do(t, request{method: "GET", path: path, headers: []string{"X-API-Key", key}})
	}
	for i := range 10 {
		admin("POST", "/api/services", `{"name":"churn","upstream":"`+one+`"}`)
		if r := get("/api/proxy/churn/v1/x"); string(r.body) != "one" {
			t.Fatalf("round %d: created service answered %d %s", i, r.status, r.body)
		}
		// A slow request in flight while the service changes upstream.
		inflight := make(chan response, 1)
		go func() { inflight <- get("/api/proxy/churn/v1/slow") }()
		time.Sleep(50 * time.Millisecond)
		admin("PUT", "/api/services/churn", `{"upstream":"`+two+`"}`)
		if r := get("/api/proxy/churn/v1/x"); string(r.body) != "two" {
			t.Fatalf("round %d: changed service answered %d %s", i, r.status, r.body)
		}
		select {
		case r := <-inflight:
			if r.status != 200 || string(r.body) != "one" {
				t.Fatalf("round %d: the request in flight got %d %s, want the service it started on", i, r.status, r.body)
			}
		case <-ctx.Done():
			t.Fatal("in-flight request never finished")
		}
		admin("DELETE", "/api/services/churn", "")
		if r := get("/api/proxy/churn/v1/x"); r.status != 404 {
			t.Fatalf("round %d: deleted service answered %d %s", i, r.status, r.body)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("steady service: %d ok, %d failed during 10 add/change/delete rounds", ok.Load(), failed.Load())
	if failed.Load() != 0 || ok.Load() == 0 {
		t.Fatalf("steady service: %d ok, %d failed (first: %v)", ok.Load(), failed.Load(), firstErr.Load())
	}
}

// TestAdmitAllocatesNoMore: the API's service table and a key's services
// list add no allocation to the proxy's admission (service lookup, key,
// limit): a limited key on an API service costs what an unlimited key on
// a config service does (what Authorize itself allocates, if anything).
func TestAdmitAllocatesNoMore(t *testing.T) {
	e := newTestEnv(t, withConfig(func(c *Config) { c.Services = map[string]Service{"cfg": {Upstream: "http://127.0.0.1:1"}} }))
	ctx := context.Background()
	if _, err := e.sys.ctl.CreateService(ctx, "llm", control.ServiceInput{Upstream: "http://127.0.0.1:1/base", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	u := e.addUser(t, "alloc@example.com", accounts.RoleUser, accounts.PlanPremium, true)
	allocs := func(service string, limit []string) float64 {
		info, secret, err := e.sys.CreateKey(ctx, keys.NewKey{Owner: e.sys.KeyOwner(u), Name: service})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.sys.ctl.SetKeyServices(ctx, info.ID, limit); err != nil {
			t.Fatal(err)
		}
		var req fasthttp.Request
		req.SetRequestURI("/api/proxy/" + service + "/v1/chat/completions")
		req.Header.SetHost(testHost)
		req.Header.Set("X-API-Key", secret)
		var rc fasthttp.RequestCtx
		rc.Init(&req, clientAddr, nil)
		if _, _, _, err := e.srv.admit(ctx, &rc); err != nil {
			t.Fatal(err)
		}
		return testing.AllocsPerRun(200, func() {
			if _, _, _, err := e.srv.admit(ctx, &rc); err != nil {
				t.Fatal(err)
			}
		})
	}
	base := allocs("cfg", nil)
	if n := allocs("llm", []string{"cfg", "llm"}); n > base {
		t.Errorf("admit of a limited key on an API service allocates %.1f times, an unlimited one on a config service %.1f", n, base)
	}
}

// TestServiceUpstreamNotLinkLocal (issue 31): a service of the API may
// not point at a link-local address (cloud metadata), in any spelling,
// unless the server allows it; a service already stored with one (or a
// name that resolves to one) is refused when dialled, before a packet
// leaves. Config-file services are the operator's own and may.
func TestServiceUpstreamNotLinkLocal(t *testing.T) {
	w := newTestEnv(t, withWorld())
	admin := func(method, path, body string) response {
		return w.do(t, request{method: method, path: path, body: body, cookie: w.adminCk})
	}
	mustStatus(t, admin("POST", "/api/services", `{"name":"ok","upstream":"http://10.0.0.5:9000/base"}`), 201, "")
	for _, up := range []string{
		"http://169.254.169.254/latest/meta-data",
		"https://169.254.0.1:8443",
		"http://[fe80::1]:80",
		"http://[FE80::a9fe:a9fe]",
		"http://[fe80::1%25eth0]/",
		"http://[::ffff:169.254.169.254]/",
		"http://[::ffff:a9fe:a9fe]/",
		"http://[fd00:ec2::254]/",
	} {
		t.Run(up, func(t *testing.T) {
			for _, r := range []response{
				admin("POST", "/api/services", `{"name":"meta","upstream":"`+up+`"}`),
				admin("PUT", "/api/services/ok", `{"upstream":"`+up+`"}`),
			} {
				mustStatus(t, r, 400, codeValidation)
				if !strings.Contains(string(r.body), "upstream") || !strings.Contains(string(r.body), "link-local") {
					t.Errorf("400 does not say why: %s", r.body)
				}
			}
		})
	}
	if g := admin("GET", "/api/services/ok", ""); g.json["service"].(map[string]any)["upstream"] != "http://10.0.0.5:9000/base" {
		t.Errorf("a refused PUT changed the service: %s", g.body)
	}
	mustStatus(t, admin("GET", "/api/services/meta", ""), 404, codeServiceNotFound)

	allowed := newTestEnv(t, withWorld(), withConfig(func(c *Config) { c.AllowLinkLocal = true }))
	mustStatus(t, allowed.do(t, request{method: "POST", path: "/api/services", cookie: allowed.adminCk,
		body: `{"name":"meta","upstream":"http://169.254.169.254/latest"}`}), 201, "")
}

// TestDialRefusesLinkLocal: the dial-time half of the rule sees the
// address a name resolved to, and refuses before connecting.
func TestDialRefusesLinkLocal(t *testing.T) {
	for _, addr := range []string{"169.254.169.254:80", "[fe80::1]:80", "[::ffff:169.254.169.254]:80", "[fd00:ec2::254]:80"} {
		start := time.Now()
		c, err := dialUpstream(addr, 5*time.Second, true)
		if err == nil {
			c.Close()
		}
		if !errors.Is(err, errLinkLocal) || time.Since(start) > time.Second {
			t.Errorf("dialUpstream(%s) = %v after %v, want errLinkLocal at once", addr, err, time.Since(start))
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	c, err := dialUpstream("localhost:"+port, 5*time.Second, true) // a name, resolved, then checked
	if err != nil {
		t.Fatalf("dialUpstream(localhost) = %v", err)
	}
	c.Close()
}
