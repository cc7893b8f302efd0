package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Config is one suite run.
type Config struct {
	Conns        int           // connections of the throughput runs
	LatencyConns int           // connections of the latency runs (no queueing)
	Duration     time.Duration // measured time per target and round
	Warmup       time.Duration // unmeasured time before each run
	Rounds       int           // rounds, the targets interleaved in each
	Keys         []int         // key counts of the spread-keys cases (the largest is provisioned)
	BodyBytes    int           // size of the stub's answer
	// Self is the argv prefix that runs this program's subcommands:
	// `Self... stub`, `Self... barehop` and `Self... fixed` (see cmd/benchsuite).
	Self []string
	// Dir receives configs, data and the servers' logs.
	Dir string
	// Log receives progress lines.
	Log io.Writer
	// Vs, when set, is a git revision of this repository: gatehouse built
	// from it is measured beside the working tree's, on the same targets,
	// so a change is judged by ratios taken in one run (-vs in benchsuite).
	Vs string
}

// DefaultConfig is what `make bench` runs: about eight minutes (50,000 keys
// to provision, wrk beside every run).
func DefaultConfig() Config {
	return Config{Conns: 64, LatencyConns: 1, Duration: 5 * time.Second, Warmup: time.Second, Rounds: 3, Keys: []int{5_000, 50_000}, BodyBytes: 1024}
}

// Validate reports the first invalid field, by name.
func (c Config) Validate() error {
	switch {
	case c.Conns < 1 || c.LatencyConns < 1:
		return errors.New("bench: conns and latency_conns must be >= 1")
	case c.Duration <= 0 || c.Warmup < 0:
		return errors.New("bench: duration must be > 0 and warmup >= 0")
	case c.Rounds < 1:
		return errors.New("bench: rounds must be >= 1")
	case len(c.Keys) == 0 || slices.Min(c.Keys) < 1:
		return errors.New("bench: keys must be >= 1")
	case c.BodyBytes < 16:
		return errors.New("bench: body must be >= 16 bytes")
	case len(c.Self) == 0 || c.Dir == "":
		return errors.New("bench: self and dir are required")
	}
	return nil
}

// Target is one server under load.
type Target struct {
	Name     string
	Addr     string
	Requests [][]byte
	Status   int
	Server   *Proc // whose CPU is charged per request
	Kind     string
	Keys     []string // the keys its requests use (wrk rotates them)
	Baseline bool     // built from Config.Vs: reported, not judged

	Rounds   []*Result
	Wrk      []float64       // wrk's req/s, one per round (when wrk is installed)
	RoundCPU []time.Duration // server CPU over each round's measured window
	LoadCPU  time.Duration   // the load generator's CPU over all of them
	Latency  *Result         // at Config.LatencyConns
	Failed   error           // the first run that failed outright, if any

	wrkScript string // the path of its wrk Lua script, once written (runWrk)
}

// Target kinds, for the ratios of the report.
const (
	KindDirect   = "direct"
	KindBare     = "bare"
	KindNginx    = "nginx"
	KindGateway  = "gatehouse"
	KindValidate = "validate"
	KindFixed    = "fixed"     // a bare fasthttp handler answering a fixed body: validate's baseline
	KindNginxLua = "nginx+lua" // a peer: nginx + ngx_lua doing key auth + limit (peers.go)
	KindHAProxy  = "haproxy"   // a peer: HAProxy doing key auth + limit (peers.go)
)

// Suite holds the servers of one run.
type Suite struct {
	wrk     string // wrk's path, "" when it is not installed
	cfg     Config
	procs   []*Proc
	Targets []*Target
	Nginx   string // version
	HAProxy string // version
}

// Start starts the stub upstream, the bare hop, nginx, gatehouse (built
// from this module, with the largest of Config.Keys keys provisioned) and
// the peers doing its work (nginx+Lua, HAProxy: peers.go) given the same
// keys, each in its own process.
func Start(ctx context.Context, cfg Config) (_ *Suite, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Suite{cfg: cfg}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	nginx, err := NginxPath()
	if err != nil {
		return nil, err
	}
	s.Nginx = NginxVersion(nginx)
	haproxy, err := HAProxyPath()
	if err != nil {
		return nil, err
	}
	if _, err := NginxLuaModules(); err != nil {
		return nil, err
	}
	s.HAProxy = HAProxyVersion(haproxy)
	s.wrk, _ = exec.LookPath("wrk")
	addrLine := func(line string) (string, bool) { return strings.CutPrefix(line, "listening ") }
	s.logf("starting the stub upstream and the bare hop")
	stub, stubAddr, err := StartProc(cfg.Dir, "stub", append(cfg.Self, "stub", "-body", fmt.Sprint(cfg.BodyBytes)), nil, 10*time.Second, addrLine)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, stub)
	bare, bareAddr, err := StartProc(cfg.Dir, "barehop", append(cfg.Self, "barehop", "-upstream", stubAddr), nil, 10*time.Second, addrLine)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, bare)
	fixed, fixedAddr, err := StartProc(cfg.Dir, "fixed", append(cfg.Self, "fixed"), nil, 10*time.Second, addrLine)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, fixed)
	s.logf("starting %s", s.Nginx)
	ngx, ngxAddr, err := StartNginx(nginx, cfg.Dir, stubAddr)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, ngx)
	s.logf("building and starting gatehouse")
	bin, err := BuildGatehouse(cfg.Dir)
	if err != nil {
		return nil, err
	}
	mine, err := s.startGatehouse(ctx, "gatehouse", bin, cfg.Dir, stubAddr)
	if err != nil {
		return nil, err
	}
	var theirs []*Target
	if cfg.Vs != "" {
		s.logf("building and starting gatehouse@%s", cfg.Vs)
		vsDir := filepath.Join(cfg.Dir, "vs")
		if err := os.MkdirAll(vsDir, 0o755); err != nil {
			return nil, err
		}
		vbin, err := BuildGatehouseAt(cfg.Vs, vsDir)
		if err != nil {
			return nil, err
		}
		if theirs, err = s.startGatehouse(ctx, "gatehouse@"+cfg.Vs, vbin, vsDir, stubAddr); err != nil {
			return nil, err
		}
		for _, t := range theirs {
			t.Baseline = true
		}
	}

	var all []string // every key provisioned: the largest case's
	for _, t := range mine {
		if len(t.Keys) > len(all) {
			all = t.Keys
		}
	}
	peers, err := s.startPeers(nginx, haproxy, stubAddr, all)
	if err != nil {
		return nil, err
	}

	hot := mine[0].Requests
	s.Targets = []*Target{
		{Name: "upstream direct", Kind: KindDirect, Addr: stubAddr, Requests: hot, Server: stub},
		{Name: "bare fasthttp hop (no auth)", Kind: KindBare, Addr: bareAddr, Requests: hot, Server: bare},
		{Name: "nginx keep-alive proxy", Kind: KindNginx, Addr: ngxAddr, Requests: hot, Server: ngx},
	}
	// Each gatehouse case beside its baseline's and the peers', so all
	// meet the same moment; validate (the last) after its own baseline,
	// the fixed body.
	last := len(mine) - 1
	for i, t := range mine {
		if i == last {
			s.Targets = append(s.Targets, &Target{Name: "bare fasthttp handler, fixed body", Kind: KindFixed, Addr: fixedAddr, Requests: t.Requests, Server: fixed})
		}
		s.Targets = append(s.Targets, t)
		if theirs != nil {
			s.Targets = append(s.Targets, theirs[i])
		}
		if i < last {
			for _, p := range peers {
				s.Targets = append(s.Targets, p.target(t))
			}
		}
	}
	for _, t := range s.Targets {
		t.Status = 200
	}
	return s, nil
}

// peer is a started peer (nginx+Lua or HAProxy).
type peer struct {
	name, kind, addr string
	proc             *Proc
}

// target is the peer's target of the gatehouse case g: the same requests
// and keys.
func (p peer) target(g *Target) *Target {
	name := p.name + ", 1 hot key"
	if len(g.Requests) > 1 {
		name = fmt.Sprintf("%s, %d keys", p.name, len(g.Requests))
	}
	return &Target{Name: name, Kind: p.kind, Addr: p.addr, Requests: g.Requests, Server: p.proc, Keys: g.Keys}
}

// startPeers starts nginx+Lua and HAProxy in front of upstream, each with
// its files in its own directory, given secrets (PeerKeys) with the limit
// gatehouse's keys have.
func (s *Suite) startPeers(nginx, haproxy, upstream string, secrets []string) ([]peer, error) {
	keys := filepath.Join(s.cfg.Dir, "peer-keys")
	if err := PeerKeys(keys, secrets); err != nil {
		return nil, err
	}
	var peers []peer
	for _, p := range []struct {
		name, kind, dir string
		start           func(dir string) (*Proc, string, error)
	}{
		{"nginx + Lua (key auth + limit)", KindNginxLua, "nginx-lua", func(dir string) (*Proc, string, error) {
			return StartNginxLua(nginx, dir, upstream, keys, PeerLimit)
		}},
		{"HAProxy (key auth + limit)", KindHAProxy, "haproxy", func(dir string) (*Proc, string, error) {
			return StartHAProxy(haproxy, dir, upstream, keys, PeerLimit)
		}},
	} {
		dir := filepath.Join(s.cfg.Dir, p.dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		s.logf("starting %s", p.name)
		proc, addr, err := p.start(dir)
		if err != nil {
			return nil, err
		}
		s.procs = append(s.procs, proc)
		peers = append(peers, peer{name: p.name, kind: p.kind, addr: addr, proc: proc})
	}
	return peers, nil
}

// startGatehouse starts the gatehouse binary bin with its data under dir
// (StartGatehouse), provisions its keys and returns its cases: one hot
// key, each spread-keys count, then validate.
func (s *Suite) startGatehouse(ctx context.Context, name, bin, dir, upstream string) ([]*Target, error) {
	gh, addr, err := StartGatehouse(bin, dir, upstream)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, gh)
	most := slices.Max(s.cfg.Keys)
	s.logf("creating %d keys in %s", most, name)
	t0 := time.Now()
	secrets, err := Provision(ctx, "http://"+addr, most)
	if err != nil {
		return nil, fmt.Errorf("provision keys in %s: %w", name, err)
	}
	s.logf("created %d keys in %v", len(secrets), time.Since(t0).Round(time.Millisecond))
	ts := []*Target{{Name: name + ", 1 hot key", Kind: KindGateway, Addr: addr, Requests: [][]byte{ProxyRequest(secrets[0])}, Server: gh, Keys: secrets[:1]}}
	for _, n := range s.cfg.Keys {
		spread := make([][]byte, n)
		for i, k := range secrets[:n] {
			spread[i] = ProxyRequest(k)
		}
		ts = append(ts, &Target{Name: fmt.Sprintf("%s, %d keys", name, n), Kind: KindGateway, Addr: addr,
			Requests: spread, Server: gh, Keys: secrets[:n]})
	}
	return append(ts, &Target{Name: name + " POST /api/keys/validate", Kind: KindValidate, Addr: addr,
		Requests: [][]byte{ValidateRequest(secrets[0])}, Server: gh, Keys: secrets[:1]}), nil
}

// ProxyRequest is the request every proxy target gets, byte for byte: the
// stub answers any path, and gatehouse needs the key and the proxy path.
func ProxyRequest(key string) []byte {
	return []byte("GET /api/proxy/" + ServiceName + "/v1/items?page=1 HTTP/1.1\r\nHost: bench.local\r\n" +
		"User-Agent: gatehouse-bench\r\nAccept: application/json\r\nX-API-Key: " + key + "\r\n\r\n")
}

// ValidateRequest is the request every validate target gets.
func ValidateRequest(key string) []byte {
	return []byte("POST /api/keys/validate HTTP/1.1\r\nHost: bench.local\r\nUser-Agent: gatehouse-bench\r\n" +
		"X-API-Key: " + key + "\r\nContent-Length: 0\r\n\r\n")
}

// Run measures every target: Rounds throughput rounds at Conns
// connections, the targets interleaved so that a noisy moment hits them
// all alike, then one latency run each at LatencyConns. A run that fails
// outright is recorded in the target's Failed and the suite goes on.
func (s *Suite) Run(ctx context.Context) error {
	for r := range s.cfg.Rounds {
		for _, t := range s.Targets {
			res, cpu, load, err := s.measure(ctx, t, s.cfg.Conns)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				s.failed(t, err)
				continue
			}
			t.Rounds = append(t.Rounds, res)
			t.RoundCPU = append(t.RoundCPU, cpu)
			t.LoadCPU += load
			s.logf("round %d/%d  %-36s %9.0f req/s  p99 %v  errors %d", r+1, s.cfg.Rounds, t.Name, res.Throughput(), res.Latency.Quantile(0.99), res.Errors)
			if s.wrk != "" && t.Kind != KindDirect {
				rps, err := s.runWrk(ctx, t)
				if err != nil {
					s.logf("wrk %s: %v", t.Name, err)
				} else {
					t.Wrk = append(t.Wrk, rps)
					s.logf("round %d/%d  %-36s %9.0f req/s  (wrk)", r+1, s.cfg.Rounds, t.Name, rps)
				}
			}
		}
	}
	for _, t := range s.Targets {
		res, _, _, err := s.measure(ctx, t, s.cfg.LatencyConns)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			s.failed(t, err)
			continue
		}
		t.Latency = res
		s.logf("latency at %d conn  %-36s p50 %v  p99 %v", s.cfg.LatencyConns, t.Name, res.Latency.Quantile(0.5), res.Latency.Quantile(0.99))
	}
	return nil
}

func (s *Suite) failed(t *Target, err error) {
	s.logf("%s: %v", t.Name, err)
	if t.Failed == nil {
		t.Failed = fmt.Errorf("%s: %w", time.Now().UTC().Format(time.TimeOnly), err)
	}
}

// measure loads t once; it returns the result and the CPU time the
// server and the load generator used in the measured window.
func (s *Suite) measure(ctx context.Context, t *Target, conns int) (res *Result, server, load time.Duration, err error) {
	var srv0, srv1, load0, load1 time.Duration
	res, err = Run(ctx, Load{
		Addr: t.Addr, Requests: t.Requests, Conns: conns, Warmup: s.cfg.Warmup, Duration: s.cfg.Duration, Status: t.Status,
		OnWindow: func(start bool) {
			if start {
				srv0, load0 = t.Server.CPU(), selfCPU()
			} else {
				srv1, load1 = t.Server.CPU(), selfCPU()
			}
		},
	})
	return res, srv1 - srv0, load1 - load0, err
}

// selfCPU is the CPU time (user + system) this process used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Stop stops every server, the last started first.
func (s *Suite) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].Stop()
	}
	s.procs = nil
}

func (s *Suite) logf(format string, args ...any) {
	if s.cfg.Log != nil {
		fmt.Fprintf(s.cfg.Log, format+"\n", args...)
	}
}

func listenLoopback() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// fixedBody is what the fixed-body handler answers: a validate answer.
var fixedBody = []byte(`{"valid":true,"userId":"00000000-0000-0000-0000-000000000000","rateLimit":1000,"isActive":true}`)

// ServeSubcommand runs the stub or bare hop in this process on a loopback
// port, printing "listening ADDR" once it accepts connections.
func ServeSubcommand(w io.Writer, name string, body int, upstream string) error {
	ln, err := listenLoopback()
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "listening "+ln.Addr().String())
	if f, ok := w.(*os.File); ok {
		_ = f.Sync()
	}
	switch name {
	case "stub":
		return Serve(ln, Upstream(JSONBody(body)))
	case "barehop":
		return Serve(ln, BareHop(upstream))
	case "fixed":
		return Serve(ln, Upstream(fixedBody))
	case "chatfwd":
		return serveChatForwarder(ln, upstream)
	}
	return fmt.Errorf("bench: unknown server %q", name)
}
