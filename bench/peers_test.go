package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestPeers starts each peer (nginx+Lua, HAProxy) in front of a recording
// upstream with two keys and a limit of 3 an hour, and checks that it
// does the work gatehouse does: 401 without a key or with an unknown one,
// the key id instead of the key upstream, the five rate-limit headers,
// and 429 past the limit. It needs the Debian packages (make bench-deps):
// without them it skips, except under CI=true.
func TestPeers(t *testing.T) {
	var mu sync.Mutex
	var seen []string // X-Consumer-ID / X-API-Key of each request upstream
	up := serveLoopback(t, func(rc *fasthttp.RequestCtx) {
		mu.Lock()
		seen = append(seen, string(rc.Request.Header.Peek("X-Consumer-ID"))+"/"+string(rc.Request.Header.Peek("X-API-Key")))
		mu.Unlock()
		rc.SetBody(JSONBody(64))
	})
	const limit = 3
	keys := filepath.Join(t.TempDir(), "keys")
	if err := PeerKeys(keys, []string{"secret-zero", "secret-one"}); err != nil {
		t.Fatal(err)
	}
	start := map[string]func(dir string) (*Proc, string, error){
		"nginx+lua": func(dir string) (*Proc, string, error) {
			bin, err := NginxPath()
			if err != nil {
				return nil, "", err
			}
			if _, err := NginxLuaModules(); err != nil {
				return nil, "", err
			}
			return StartNginxLua(bin, dir, up, keys, limit)
		},
		"haproxy": func(dir string) (*Proc, string, error) {
			bin, err := HAProxyPath()
			if err != nil {
				return nil, "", err
			}
			return StartHAProxy(bin, dir, up, keys, limit)
		},
	}
	for name, start := range start {
		t.Run(name, func(t *testing.T) {
			p, addr, err := start(t.TempDir())
			if err == errNoNginx || err == errNoLua || err == errNoHAProxy {
				if os.Getenv("CI") == "true" {
					t.Fatal(err)
				}
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Stop)
			mu.Lock()
			seen = nil
			mu.Unlock()
			c := &fasthttp.HostClient{Addr: addr}
			get := func(key string) *fasthttp.Response {
				req, resp := fasthttp.AcquireRequest(), new(fasthttp.Response)
				defer fasthttp.ReleaseRequest(req)
				req.SetRequestURI("http://" + addr + "/v1/items")
				if key != "" {
					req.Header.Set("X-API-Key", key)
				}
				if err := c.Do(req, resp); err != nil {
					t.Fatal(err)
				}
				return resp
			}
			for _, tt := range []struct{ key, code string }{{"", "KEY_MISSING"}, {"secret-two", "INVALID_KEY"}} {
				if r := get(tt.key); r.StatusCode() != 401 || !strings.Contains(string(r.Body()), tt.code) {
					t.Errorf("key %q: %d %s, want 401 %s", tt.key, r.StatusCode(), r.Body(), tt.code)
				}
			}
			for i := 1; i <= limit; i++ {
				r := get("secret-one")
				if r.StatusCode() != 200 {
					t.Fatalf("request %d: %d %s", i, r.StatusCode(), r.Body())
				}
				want := map[string]string{"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": strconv.Itoa(limit - i),
					"RateLimit-Policy": `"hourly";q=3;w=3600`}
				for h, v := range want {
					if got := string(r.Header.Peek(h)); got != v {
						t.Errorf("request %d: %s = %q, want %q", i, h, got, v)
					}
				}
				if rl := string(r.Header.Peek("RateLimit")); !strings.HasPrefix(rl, fmt.Sprintf(`"hourly";r=%d;t=`, limit-i)) {
					t.Errorf("request %d: RateLimit = %q", i, rl)
				}
				if reset, _ := strconv.Atoi(string(r.Header.Peek("X-RateLimit-Reset"))); reset < 1_700_000_000 {
					t.Errorf("request %d: X-RateLimit-Reset = %q", i, r.Header.Peek("X-RateLimit-Reset"))
				}
			}
			if r := get("secret-one"); r.StatusCode() != 429 || string(r.Header.Peek("X-RateLimit-Remaining")) != "0" {
				t.Errorf("past the limit: %d, remaining %q", r.StatusCode(), r.Header.Peek("X-RateLimit-Remaining"))
			}
			if r := get("secret-zero"); r.StatusCode() != 200 {
				t.Errorf("the other key: %d", r.StatusCode())
			}
			mu.Lock()
			defer mu.Unlock()
			if want := "key-1/,key-1/,key-1/,key-0/"; strings.Join(seen, ",") != want {
				t.Errorf("upstream saw %q, want %q", strings.Join(seen, ","), want)
			}
		})
	}
}

func TestPeerConfigs(t *testing.T) {
	lua := NginxLuaConfig("/tmp/x", "/usr/lib/nginx/modules", "127.0.0.1:8081", "127.0.0.1:9000", "/tmp/x/keys", 7)
	ha := HAProxyConfig("/tmp/x", "127.0.0.1:8082", "127.0.0.1:9000", "/tmp/x/keys", 7)
	for conf, wants := range map[string][]string{
		lua: {"load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;", `io.lines("/tmp/x/keys")`, "local limit = 7", "SHA256", "counters:incr(", "keepalive 128;", "listen 127.0.0.1:8081"},
		ha:  {"nbthread 2", "http-reuse always", "sha2(256),hex,map(/tmp/x/keys)", "http_req_rate(1h)", "bind 127.0.0.1:8082", "server stub 127.0.0.1:9000", "int(7)"},
	} {
		for _, want := range wants {
			if !strings.Contains(conf, want) {
				t.Errorf("config lacks %q:\n%s", want, conf)
			}
		}
	}
}
