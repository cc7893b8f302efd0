package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"gatehouse/actors"
	"gatehouse/actors/accounts"
	"gatehouse/actors/control"
	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/app"
	"gatehouse/actors/gateway/toolexec"
	"gatehouse/actors/keys"
	"gatehouse/httpapi"
	gwapi "gatehouse/httpapi/gateway"
	"gatehouse/httpapi/listener"
	"gatehouse/snapshot"
	"gatehouse/wal"
)

const usage = `usage:
  gatehouse serve [flags]            run the server (gatehouse serve -h lists the flags)
  gatehouse reset-password [flags]   set a new password for the admin (GATEHOUSE_ADMIN_EMAIL,
                                     default admin@localhost): GATEHOUSE_ADMIN_PASSWORD or a
                                     generated one, printed once; run it with the server stopped
  gatehouse repair [flags]           repair the WAL after start-up refused a corrupt record: keeps
                                     a copy, removes only the bad records, lists what they held
  gatehouse etcd [flags]             run one etcd member for cluster mode (gatehouse etcd -h;
                                     docs/cluster.md)
  gatehouse etcd snapshot save|restore|status
                                     back up the cluster's etcd and restore it
  gatehouse etcd member list|add|remove
                                     change the etcd cluster's members
  gatehouse cluster certs --dir DIR --nodes NODE,...
                                     make a CA and node certificates for the cluster
                                     transport's mutual TLS (docs/cluster.md)
  gatehouse version                  print the version, the commit and the Go version
                                     (also gatehouse --version)

The config file keys (JSON) and the GATEHOUSE_* environment variables are in
the README; GATEHOUSE_ADMIN_EMAIL and GATEHOUSE_ADMIN_PASSWORD name the
bootstrap admin, GATEHOUSE_MASTER_KEY the master key.`

// errHelp ends a run that printed its help: exit status 0.
var errHelp = errors.New("help shown")

// shutdownTimeout bounds draining, the usage flush and the final snapshot.
const shutdownTimeout = 30 * time.Second

// run is main without the process: it returns when ctx is cancelled (after
// a clean shutdown) or on a startup error. What was asked for (help, the
// version) goes to stdout; logs, the one-time password and errors to
// stderr.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := ""
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "serve", "reset-password", "repair":
	case "etcd":
		return runEtcd(ctx, args[1:], getenv, stdout, stderr)
	case "cluster":
		return runCluster(args[1:], stdout, stderr)
	case "version", "--version", "-version", "-v":
		fmt.Fprintln(stdout, versionLine())
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(stdout, usage)
		return errHelp
	case "":
		return errors.New("no subcommand\n\n" + usage)
	default:
		return fmt.Errorf("unknown subcommand %q\n\n%s", cmd, usage)
	}
	cfg, err := parseServe(cmd, args[1:], getenv, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return errHelp
	}
	if err != nil {
		return err
	}
	if cmd == "reset-password" {
		return resetPassword(ctx, cfg, getenv, stderr)
	}
	if cmd == "repair" {
		return repairWAL(cfg, stdout)
	}
	lg := newLogger(cfg, stderr)
	lg.Info("starting", "version", versionLine(), slog.Group("config", cfg.maskedAttrs()...))
	return serve(ctx, cfg, getenv, lg, stderr)
}

func newLogger(cfg fileConfig, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// node is everything serve opens, closed in reverse order.
type node struct {
	log     *wal.Log
	sys     *actors.System
	keys    *keys.Service
	acc     *accounts.Service
	gw      *gateway.Gateway
	ctl     *control.Control
	cluster *clusterRun // nil: a single node
	unlock  func()      // the data dir lock
}

// close stops the system (usage flushed, a final snapshot), leaves the
// cluster, closes the WAL and releases the data dir.
func (n *node) close() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	_ = n.sys.Close(ctx)
	if n.cluster != nil {
		_ = n.cluster.close()
	}
	_ = n.log.Close()
	n.unlock()
}

func serve(ctx context.Context, cfg fileConfig, getenv func(string) string, lg *slog.Logger, stderr io.Writer) error {
	// Each listener serves its own registry: the API listener's (admin
	// only, and on server.metrics_addr) has the process, the WAL, the
	// snapshots, the key actors and its routes; the gateway's has its
	// routes, buckets and blob store.
	reg, gwReg := prometheus.NewRegistry(), prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	fdLimit, raised, err := raiseFDLimit()
	caps := deriveConnCaps(cfg.Server.MaxConns, cfg.Server.MaxConnsPerIP, fdLimit)
	logConnCaps(lg, caps, raised, err)
	n, err := openNode(ctx, cfg, lg, reg, gwReg)
	if err != nil {
		return err
	}
	defer n.close() // an early return stops the system too; after shutdown only the WAL and the lock are left
	// The agent gateway's application services (runtime, webhooks,
	// workspaces) belong to the process, not to a listener: closed after
	// every listener drained, before the system stops.
	acfg := app.DefaultConfig()
	acfg.Webhook.Code = gwapi.WebhookCode
	acfg.Sandbox = sandboxConfig(cfg)
	acfg.Limits.MaxMessageBytes, acfg.Limits.MaxAnswerBytes = cfg.Gateway.MaxMessageBytes, cfg.Gateway.MaxAnswerBytes
	acfg.MCP.MaxMessageBytes, acfg.Webhook.MaxInFlight = cfg.Gateway.MCPMaxMessageBytes, cfg.Gateway.WebhookMaxInFlight
	acfg.Registerer = gwReg
	acfg.TurnLock = n.cluster.serializeChanges(n.sys, n.gw) // a key's changes, a session's turns, a budget's holds: one at a time across the nodes
	gwApp, err := app.New(acfg, n.gw, lg)
	if err != nil {
		return fmt.Errorf("gateway services: %w", err)
	}
	checkSandbox(cfg, gwApp.Sandbox, lg)
	n.cluster.watchMembers(n.gw) // a summon whose node left fails on the others
	closeApp := sync.OnceValue(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		return gwApp.Close(ctx)
	})
	defer closeApp() // an early return; after shutdown it has run already
	api, gw, err := newServers(cfg, n, gwApp, lg, reg, gwReg)
	if err != nil {
		return err
	}
	type server struct {
		name, addr, flag string
		srv              interface {
			Serve(net.Listener) error
			Shutdown(context.Context) error
		}
	}
	servers := []server{
		{"api", net.JoinHostPort(cfg.Server.Host, strconv.Itoa(cfg.Server.Port)), "--port or GATEHOUSE_PORT", api},
		{"gateway", net.JoinHostPort(cfg.Gateway.Host, strconv.Itoa(cfg.Gateway.Port)), "--gateway-port or GATEHOUSE_GATEWAY_PORT", gw},
	}
	if cfg.Server.MetricsAddr != "" {
		servers = append(servers, server{"metrics", cfg.Server.MetricsAddr, "server.metrics_addr", httpapi.NewHealthServer("metrics", lg, reg, reg, append(n.clusterOpts(), httpapi.WithPprof())...)})
	}
	// Bind every listener first: the bootstrap admin (whose generated
	// password is shown once) is created only once they all bound, so a
	// port clash does not use it up.
	lns := make([]net.Listener, 0, len(servers))
	closeAll := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}
	for _, l := range servers {
		ln, err := net.Listen("tcp", l.addr)
		if errors.Is(err, syscall.EADDRINUSE) {
			closeAll()
			return fmt.Errorf("listen %s: %w: another program (another gatehouse?) holds %s; choose another port with %s (0: any free port)",
				l.name, err, l.addr, l.flag)
		}
		if err != nil {
			closeAll()
			return fmt.Errorf("listen %s: %w", l.name, err)
		}
		lns = append(lns, ln)
	}
	if err := n.cluster.bootstrapAdmin(ctx, func() error {
		return bootstrapAdmin(ctx, n.acc, cfg.DataDir, getenv, stderr, lg)
	}); err != nil {
		closeAll()
		return err
	}
	errc := make(chan error, len(servers))
	conns := listener.NewConns(caps.max, caps.perIP) // one budget: the listeners share the fds
	for i, l := range servers {
		ln := conns.Limit(lns[i])
		lg.Info("listening", "listener", l.name, "addr", ln.Addr().String())
		go func() { errc <- l.srv.Serve(ln) }()
	}
	announce(cfg, lns[0].Addr(), lns[1].Addr(), lg, stderr)
	go gwapi.PrepareDocs() // compress the /docs viewer before its first visitor
	select {
	case <-ctx.Done():
	case err = <-errc:
		lg.Error("listener failed", "err", err)
	case err = <-n.cluster.failed():
		lg.Error("stopping: this node cannot go on in the cluster; start it again to restore from the cluster's snapshot", "err", err)
	}
	lg.Info("shutting down")
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	errs := []error{err}
	for _, l := range servers {
		errs = append(errs, l.srv.Shutdown(ctx))
	}
	errs = append(errs, closeApp())
	return shutdown(ctx, n, lg, errs)
}

// sandboxConfig is tools.sandbox's: the data dir, the master key file and
// the config file are hidden from tools, should a shown directory hold
// them.
func sandboxConfig(cfg fileConfig) toolexec.SandboxConfig {
	sc := toolexec.SandboxConfig{Mode: cfg.Tools.Sandbox, ReadOnly: cfg.Tools.SandboxPaths}
	for _, p := range []string{cfg.DataDir, cfg.MasterKeyFile, cfg.file} {
		if abs, err := filepath.Abs(p); p != "" && err == nil {
			sc.Hide = append(sc.Hide, abs)
		}
	}
	return sc
}

// checkSandbox logs, once at start, what tools.sandbox means for custom
// tools and stdio MCP servers: a warning when they run unsandboxed, an
// error when they cannot run at all.
func checkSandbox(cfg fileConfig, sb *toolexec.Sandbox, lg *slog.Logger) {
	if sb.Mode() == toolexec.SandboxNone {
		lg.Warn(`tools.sandbox is "none": custom tools and stdio MCP servers run unsandboxed, as the server's user, and can read its files and processes`,
			"exec_enabled", cfg.Tools.ExecEnabled)
		return
	}
	if !cfg.Tools.ExecEnabled {
		return
	}
	if err := sb.Check(); err != nil {
		lg.Error("custom tools and stdio MCP servers will refuse to run", "err", err)
		return
	}
	lg.Info("custom tools and stdio MCP servers run sandboxed", "sandbox", sb.Mode())
}

// shutdown, once the listeners are drained, flushes usage and takes a
// final snapshot.
func shutdown(ctx context.Context, n *node, lg *slog.Logger, errs []error) error {
	errs = append(errs, n.sys.Close(ctx))
	if n.cluster != nil {
		errs = append(errs, n.cluster.close())
	}
	err := errors.Join(errs...)
	if err == nil {
		lg.Info("stopped cleanly")
	}
	return err
}

func openNode(ctx context.Context, cfg fileConfig, lg *slog.Logger, reg, gwReg prometheus.Registerer) (_ *node, err error) {
	// Absolute, so that paths handed to tools and MCP servers (which run
	// in their workspace) do not resolve against that workspace.
	if cfg.DataDir, err = filepath.Abs(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	var cl *clusterRun // cluster mode: the transport and the etcd client come first (clustermode.go)
	if cfg.clusterMode() {
		if cl, err = startCluster(cfg.Cluster, lg); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				_ = cl.close()
			}
		}()
		// The cluster's key first: a refused one writes nothing in the data dir.
		if err := cl.checkMasterKey(ctx, cfg); err != nil {
			return nil, err
		}
	}
	key, err := openMasterKey(cfg, lg)
	if err != nil {
		return nil, err
	}
	sealer, err := actors.NewSealer(key)
	if err != nil {
		return nil, err
	}
	wcfg := wal.DefaultConfig()
	wcfg.Path, wcfg.MaxBatch, wcfg.NoSync = filepath.Join(cfg.DataDir, "wal.db"), cfg.WAL.MaxBatch, cfg.WAL.NoSync
	l, err := wal.Open(wcfg, lg, reg)
	if err != nil {
		return nil, fmt.Errorf("open wal: %w", err)
	}
	snaps, err := snapshot.New(snapshot.Config{Dir: filepath.Join(cfg.DataDir, "snap"), Retain: cfg.Snapshot.Retain}, lg, reg)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("open snapshots: %w", err)
	}
	acfg := actors.DefaultConfig()
	acfg.FlushInterval = cfg.Usage.FlushInterval.d
	kcfg := keys.DefaultConfig()
	kcfg.Shards = cfg.Actors.Shards
	kcfg.IdleAfter, kcfg.SweepInterval = cfg.Actors.IdleAfter.d, cfg.Actors.SweepInterval.d
	kcfg.GracePeriod = cfg.Keys.RotationGracePeriod.d
	ks, err := keys.New(kcfg) // API keys: authorization, limits, usage
	if err != nil {
		l.Close()
		return nil, err
	}
	ucfg := accounts.DefaultConfig()
	ucfg.SessionTTL = cfg.Server.SessionTTL.d
	ucfg.Plans = map[accounts.Plan]int64{accounts.PlanStandard: cfg.Plans.Standard, accounts.PlanPremium: cfg.Plans.Premium}
	ucfg.MaxKeys = map[accounts.Plan]int{accounts.PlanStandard: cfg.Keys.MaxPerUser.Standard, accounts.PlanPremium: cfg.Keys.MaxPerUser.Premium}
	acc, err := accounts.New(ucfg) // users, sessions, logins
	if err != nil {
		l.Close()
		return nil, err
	}
	acfg.SnapshotEvery, acfg.SnapshotInterval = cfg.Snapshot.EveryRecords, cfg.Snapshot.Interval.d
	gwcfg := gateway.DefaultConfig()
	gwcfg.RateLimitRPM, gwcfg.RateLimitBurst = cfg.Gateway.RateLimitRPM, cfg.Gateway.RateLimitBurst
	gwcfg.MaxTraces, gwcfg.UsageDays, gwcfg.TraceDays = cfg.Gateway.MaxTraces, cfg.Gateway.UsageDays, cfg.Gateway.TraceDays
	gwcfg.BlobDir = filepath.Join(cfg.DataDir, "blobs")
	gwcfg.WorkspaceDir = filepath.Join(cfg.DataDir, "workspaces")
	gwcfg.ToolsExecEnabled = cfg.Tools.ExecEnabled
	gwcfg.DefaultAgent = cfg.Gateway.DefaultAgent
	gwcfg.DefaultUserBudget = cfg.Gateway.DefaultUserBudget
	if gwcfg.Pricing, err = cfg.Pricing.resolver(); err != nil {
		return nil, fmt.Errorf("pricing: %w", err) // validated with the config: cannot happen
	}
	if cl != nil {
		gwcfg.NodeID = cfg.Cluster.NodeID     // a summon runs on the node that started it
		gwcfg.WrapBlobs = cl.wrapBlobs(gwReg) // every upload on two nodes; a missing blob fetched
	}
	q := cfg.Gateway.Quotas
	gwcfg.Quotas = gateway.Quotas{MemoryEntries: q.MemoryEntries, MediaBytes: q.MediaBytes, Sessions: q.Sessions, Agents: q.Agents, PendingMCPRequests: q.PendingMCPRequests}
	gwcfg.Registerer = gwReg
	gw, err := gateway.New(gwcfg)
	if err != nil {
		l.Close()
		return nil, err
	}
	ctl := control.New() // access tokens, the API's services, per-key service lists
	deps := actors.Deps{Log: l, Snapshots: snaps, Sealer: sealer, Logger: lg, Registerer: reg}
	if cl != nil {
		// The replicated log replaces the bbolt WAL and the snapshots.
		deps.Log, deps.Snapshots = nil, nil
		if deps.Cluster, err = cl.deps(ctx, reg); err != nil {
			l.Close()
			return nil, err
		}
	}
	sys, err := actors.New(acfg, deps, ks, acc, gw, ctl)
	if err != nil {
		l.Close()
		return nil, corruptWALHint(fmt.Errorf("start actors: %w", err), cfg.DataDir)
	}
	if cl != nil {
		cl.serveAdmissions(ks)
	}
	return &node{log: l, sys: sys, keys: ks, acc: acc, gw: gw, ctl: ctl, cluster: cl, unlock: unlock}, nil
}

func newServers(cfg fileConfig, n *node, gwApp *app.App, lg *slog.Logger, reg, gwReg *prometheus.Registry) (api *httpapi.Server, gw *gwapi.Server, err error) {
	hcfg := httpapi.DefaultConfig()
	hcfg.Host, hcfg.Port = cfg.Server.Host, cfg.Server.Port
	hcfg.MaxBodyBytes, hcfg.SecureCookies = cfg.Server.MaxBodyBytes, cfg.Server.SecureCookies
	hcfg.AllowLinkLocal = cfg.Server.ServicesAllowLinkLocal
	hcfg.GracePeriod, hcfg.RequestTimeout = cfg.Keys.RotationGracePeriod.d, cfg.Server.RequestTimeout.d
	for name, s := range cfg.Services {
		hcfg.Services[name] = httpapi.Service{Upstream: s.Upstream, Headers: s.Headers, Timeout: s.Timeout.d, MaxConns: s.MaxConns}
	}
	if cfg.demoEcho {
		if _, taken := hcfg.Services["echo"]; !taken {
			up, err := demoEcho()
			if err != nil {
				return nil, nil, fmt.Errorf("demo echo: %w", err)
			}
			hcfg.Services["echo"] = httpapi.Service{Upstream: up}
			lg.Info("demo service echo: a built-in echo upstream", "upstream", up)
		}
	}
	api, err = httpapi.New(hcfg, n.keys, n.acc, lg, reg, reg, append(n.clusterOpts(), httpapi.WithControl(n.ctl))...)
	if err != nil {
		return nil, nil, fmt.Errorf("http api: %w", err)
	}
	gcfg := gwapi.DefaultConfig()
	gcfg.Token = cfg.Gateway.Token
	gcfg.MaxUploadBytes = cfg.Gateway.MaxUploadBytes
	deps := gwapi.DepsOf(n.gw, gwApp)
	deps.Health = n.health
	gw, err = gwapi.New(gcfg, deps, lg, gwReg, gwReg)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway api: %w", err)
	}
	api.MountGateway(gw) // the console's pages reach it below /api/gateway
	return api, gw, nil
}

func writeFileSync(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// bootstrapAdmin creates the admin named by GATEHOUSE_ADMIN_EMAIL (default
// admin@localhost) if no such user exists, with GATEHOUSE_ADMIN_PASSWORD or
// a generated password printed once on stderr (never logged).
func bootstrapAdmin(ctx context.Context, acc *accounts.Service, dataDir string, getenv func(string) string, stderr io.Writer, lg *slog.Logger) error {
	email := bootstrapEmail(getenv)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	created, generated, err := acc.EnsureAdmin(ctx, email, getenv("GATEHOUSE_ADMIN_PASSWORD"))
	if err != nil {
		return adminError(err)
	}
	if created {
		lg.Info("created bootstrap admin", "email", email)
	} else if getenv("GATEHOUSE_ADMIN_PASSWORD") != "" {
		lg.Warn("GATEHOUSE_ADMIN_PASSWORD ignored: the admin already exists in this data dir, with the password it was created with; "+
			"to change it, stop the server and run `gatehouse reset-password` (same --data-dir or --config; it takes GATEHOUSE_ADMIN_PASSWORD), "+
			"or start over with an empty data dir", "email", email, "data_dir", dataDir)
	}
	if generated != "" {
		fmt.Fprintf(stderr, "\n  bootstrap admin %s, password (shown once): %s\n\n", email, generated)
	}
	return nil
}

// bootstrapEmail is GATEHOUSE_ADMIN_EMAIL, by default admin@localhost.
func bootstrapEmail(getenv func(string) string) string {
	if email := getenv("GATEHOUSE_ADMIN_EMAIL"); email != "" {
		return email
	}
	return "admin@localhost"
}
