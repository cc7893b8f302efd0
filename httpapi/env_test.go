package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"gatehouse/actors"
	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/control"
	"gatehouse/actors/keys"
)

// testEnv is the package's one test environment: a Server backed by the
// real actor system on a temp dir (testSystem), served on an in-memory
// listener until the test ends. Options add what a test needs: a config,
// withWorld's users, a loopback TCP listener, fake upstreams, wrapped
// services. Fields an option did not ask for stay zero.
type testEnv struct {
	sys    *testSystem
	srv    *Server
	reg    *prometheus.Registry
	client *fasthttp.HostClient // nil under withoutServing

	// withWorld: an admin, two licensed users and an unlicensed one, all
	// logged in, restored from worldSeed's data dir.
	admin, alice, bob, carol             accounts.User
	adminCk, aliceCk, bobCk, carolCookie string

	// withTCP: the server also listens on loopback TCP.
	base string       // http://127.0.0.1:port
	hc   *http.Client // for base, without compression

	// withProxyUpstreams: the services "echo" (up) and "down" (nobody
	// listens), and alice's key keyID. withStream: the service "stream"
	// and bob's key. secret is that key's secret.
	up     *stubUpstream
	stream *streamUpstream
	keyID  string
	secret string

	// withOpsTokens: access tokens for the admin (admin scope, read scope
	// only) and for alice (read and write).
	adminTok, adminReadTok, aliceTok string

	// withHealthServer: a health server on the same transport as client.
	health *testEnv
}

// envOption configures newTestEnv.
type envOption func(*envSetup)

// envSetup is what the options chose, applied in newTestEnv.
type envSetup struct {
	tb        testing.TB
	configure []func(*Config)
	dir       string // data dir to copy ("": a new, empty one)
	world     bool
	srvOpts   []Option
	noControl bool
	lg        *slog.Logger
	logSet    bool
	wallClock bool
	keys      func(*testSystem) KeyService
	users     func(*testSystem) UserService
	noServe   bool
	tcp       bool
	viaTCP    bool
	health    func(e *testEnv) *Server
	after     []func(*testEnv) // run once the env serves, in order
}

// withConfig edits the server's Config (GracePeriod also reaches the
// actor system). Edits run in the order given.
func withConfig(f func(*Config)) envOption {
	return func(s *envSetup) { s.configure = append(s.configure, f) }
}

// withDataDir starts the system on a copy of the data dir dir.
func withDataDir(dir string) envOption { return func(s *envSetup) { s.dir = dir } }

// withWorld starts the system from worldSeed's data dir, so the env has
// its four users logged in; their argon2id hashes are computed once per
// test binary.
func withWorld() envOption {
	return func(s *envSetup) {
		if s.world {
			return
		}
		s.world = true
		seed := seedWorld(s.tb)
		s.dir = seed.dir
		s.after = append(s.after, func(e *testEnv) {
			e.admin, e.alice, e.bob, e.carol = seed.admin, seed.alice, seed.bob, seed.carol
			e.adminCk, e.aliceCk, e.bobCk, e.carolCookie = seed.adminCk, seed.aliceCk, seed.bobCk, seed.carolCookie
		})
	}
}

// withServerOptions passes opts to New after WithControl.
func withServerOptions(opts ...Option) envOption {
	return func(s *envSetup) { s.srvOpts = append(s.srvOpts, opts...) }
}

// withoutControl builds the server without WithControl: the system still
// runs the control extension, the server does not use it.
func withoutControl() envOption { return func(s *envSetup) { s.noControl = true } }

// withLogger replaces the server's t.Log logger; nil discards.
func withLogger(lg *slog.Logger) envOption {
	return func(s *envSetup) { s.lg, s.logSet = lg, true }
}

// withWallClock leaves the server on time.Now instead of the system's
// fake clock.
func withWallClock() envOption { return func(s *envSetup) { s.wallClock = true } }

// withKeyService puts f(sys) in front of the server as its KeyService.
func withKeyService(f func(*testSystem) KeyService) envOption {
	return func(s *envSetup) { s.keys = f }
}

// withUserService puts f(sys) in front of the server as its UserService.
func withUserService(f func(*testSystem) UserService) envOption {
	return func(s *envSetup) { s.users = f }
}

// withoutServing builds the server but leaves serving it to the test
// (a health server is still served).
func withoutServing() envOption { return func(s *envSetup) { s.noServe = true } }

// withTCP also serves on a loopback TCP listener (base, hc, dial).
func withTCP() envOption { return func(s *envSetup) { s.tcp = true } }

// viaTCP serves on loopback TCP only: client dials it, no in-memory
// listener.
func viaTCP() envOption { return func(s *envSetup) { s.tcp, s.viaTCP = true, true } }

// withHealthServer also serves a health server named name with opts, on
// the transport client uses, as health. shared: it registers its metrics
// in the env's registry (as a process does), else in a new one.
func withHealthServer(name string, shared bool, opts ...Option) envOption {
	return func(s *envSetup) {
		s.health = func(e *testEnv) *Server {
			reg := e.reg
			if !shared {
				reg = prometheus.NewRegistry()
			}
			return NewHealthServer(name, testLogger(s.tb), reg, reg, opts...)
		}
	}
}

// withProxyUpstreams is withWorld with the service "echo" on a
// stubUpstream (its path /base/, a header, a 300 ms timeout), the service
// "down" on a closed port, proxy bodies capped at 256 bytes, and a key of
// alice's.
func withProxyUpstreams() envOption {
	return func(s *envSetup) {
		up := newStubUpstream(s.tb)
		down := closedAddr(s.tb)
		withWorld()(s)
		s.configure = append(s.configure, func(c *Config) {
			c.MaxProxyBodyBytes = 256
			c.Services = map[string]Service{
				"echo": {Upstream: "http://" + up.addr + "/base/", Headers: map[string]string{"X-Upstream-Token": "s3cret"}, Timeout: 300 * time.Millisecond},
				"down": {Upstream: "http://" + down, Timeout: time.Second},
			}
		})
		s.after = append(s.after, func(e *testEnv) {
			id, secret := e.createKey(s.tb, e.aliceCk, "proxy")
			e.up, e.keyID, e.secret = up, id.String(), secret
		})
	}
}

// withStream is withWorld and withTCP with the service "stream" on a
// streamUpstream, proxy bodies capped at maxProxyBody, and a key of
// bob's. Later withConfig edits may add services.
func withStream(maxProxyBody int) envOption {
	return func(s *envSetup) {
		up := newStreamUpstream(s.tb)
		withWorld()(s)
		s.tcp = true
		s.configure = append(s.configure, func(c *Config) {
			c.MaxProxyBodyBytes = maxProxyBody
			c.Services = map[string]Service{"stream": {Upstream: up.URL + "/base", Timeout: 10 * time.Second}}
		})
		s.after = append(s.after, func(e *testEnv) {
			_, secret := e.createKey(s.tb, e.bobCk, "stream")
			e.stream, e.secret = up, secret
		})
	}
}

// withOpsTokens is withWorld with access tokens for the admin and alice.
func withOpsTokens() envOption {
	return func(s *envSetup) {
		withWorld()(s)
		s.after = append(s.after, func(e *testEnv) {
			tok := func(u accounts.User, scopes ...control.Scope) string {
				_, secret, err := e.sys.ctl.CreateToken(context.Background(), control.NewToken{UserID: u.ID, Name: "ops", Scopes: scopes})
				if err != nil {
					s.tb.Fatalf("CreateToken(%s) = %v", u.Email, err)
				}
				return secret
			}
			e.adminTok = tok(e.admin, control.ScopeAdmin)
			e.adminReadTok = tok(e.admin, control.ScopeRead)
			e.aliceTok = tok(e.alice, control.ScopeRead, control.ScopeWrite)
		})
	}
}

// newTestEnv builds the env the options ask for; with none, a server with
// DefaultConfig on an empty system, served in memory.
func newTestEnv(tb testing.TB, opts ...envOption) *testEnv {
	tb.Helper()
	s := &envSetup{tb: tb}
	for _, o := range opts {
		o(s)
	}
	cfg := DefaultConfig()
	for _, f := range s.configure {
		f(&cfg)
	}
	e := &testEnv{sys: s.startSystem(cfg), reg: prometheus.NewRegistry()}
	e.srv = s.newServer(cfg, e)
	s.serve(e)
	for _, f := range s.after {
		f(e)
	}
	return e
}

// startSystem starts the real actor system with cfg's grace period and
// the control extension, on a copy of s.dir if set.
func (s *envSetup) startSystem(cfg Config) *testSystem {
	s.tb.Helper()
	ts := &testSystem{}
	opts := []actorstest.Option{
		actorstest.WithKeys(func(c *keys.Config) { c.GracePeriod = cfg.GracePeriod }),
		actorstest.WithExtensions(func() []actors.Extension {
			ts.ctl = control.New()
			return []actors.Extension{ts.ctl}
		}),
	}
	if s.dir != "" {
		dir := s.tb.TempDir()
		actorstest.CopyDir(s.tb, s.dir, dir)
		opts = append(opts, actorstest.WithDir(dir))
	}
	n := actorstest.New(s.tb, opts...)
	ts.node, ts.clk = n, n.Clock
	ts.System = n.Start()
	return ts
}

// newServer builds the Server over e.sys as the options ask.
func (s *envSetup) newServer(cfg Config, e *testEnv) *Server {
	s.tb.Helper()
	var keys KeyService = e.sys
	if s.keys != nil {
		keys = s.keys(e.sys)
	}
	var users UserService = e.sys
	if s.users != nil {
		users = s.users(e.sys)
	}
	lg := testLogger(s.tb)
	if s.logSet {
		lg = s.lg
	}
	var opts []Option
	if !s.noControl {
		opts = append(opts, WithControl(e.sys.ctl))
	}
	srv, err := New(cfg, keys, users, lg, e.reg, e.reg, append(opts, s.srvOpts...)...)
	if err != nil {
		s.tb.Fatalf("New() = %v", err)
	}
	if !s.wallClock {
		srv.now = e.sys.clk.Now
	}
	return srv
}

// serve serves e.srv, unless withoutServing, and the health server until
// the test ends, and sets e's client, base, hc and health.
func (s *envSetup) serve(e *testEnv) {
	s.tb.Helper()
	if !s.noServe && !s.viaTCP {
		e.client = inmemoryClient(s.tb, e.srv)
	}
	if !s.noServe && s.tcp {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			s.tb.Fatal(err)
		}
		serve(s.tb, e.srv, ln)
		e.base = "http://" + ln.Addr().String()
		tr := &http.Transport{DisableCompression: true}
		s.tb.Cleanup(tr.CloseIdleConnections)
		e.hc = &http.Client{Transport: tr}
		if s.viaTCP {
			e.client = tcpClient(s.tb, ln.Addr().String())
		}
	}
	if s.health == nil {
		return
	}
	hs := s.health(e)
	if !s.viaTCP {
		e.health = &testEnv{client: inmemoryClient(s.tb, hs)}
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.tb.Fatal(err)
	}
	serve(s.tb, hs, ln)
	e.health = &testEnv{client: tcpClient(s.tb, ln.Addr().String())}
}

// inmemoryClient serves srv on an in-memory listener until the test ends
// and returns a client for it.
func inmemoryClient(tb testing.TB, srv *Server) *fasthttp.HostClient {
	tb.Helper()
	ln := fasthttputil.NewInmemoryListener()
	serve(tb, srv, ln)
	client := &fasthttp.HostClient{Addr: testHost, DisablePathNormalizing: true, Dial: func(string) (net.Conn, error) {
		return ln.DialWithLocalAddr(clientAddr)
	}}
	tb.Cleanup(client.CloseIdleConnections)
	return client
}

// tcpClient returns a client for addr, closed when the test ends.
func tcpClient(tb testing.TB, addr string) *fasthttp.HostClient {
	c := &fasthttp.HostClient{Addr: addr, DisablePathNormalizing: true}
	tb.Cleanup(c.CloseIdleConnections)
	return c
}

// dial opens a raw connection to the TCP listener, closed when the test
// ends.
func (e *testEnv) dial(tb testing.TB) net.Conn {
	tb.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

// request is a net/http request to the TCP listener with the env's key.
func (e *testEnv) request(tb testing.TB, method, path string, body io.Reader) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(method, e.base+path, body)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("X-API-Key", e.secret)
	return req
}
