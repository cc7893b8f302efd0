package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gatehouse/actors/cluster"
	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun"
	"gatehouse/actors/gateway/mcppool"
	"gatehouse/actors/gateway/toolexec"
	"gatehouse/actors/gateway/webhook"
)

// duration is a JSON string such as "24h", checked by validate so the error
// can name the field.
type duration struct {
	d   time.Duration
	raw string
	set bool
}

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`must be a duration string such as "24h" or "500ms"`)
	}
	d.raw, d.set = s, true
	return nil
}

func (d duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.d.String()) }

func dur(v time.Duration) duration { return duration{d: v} }

// fileConfig is the JSON config file; every key is documented in README.md.
type fileConfig struct {
	// MasterKeyFile is where the AES-256 master key is read from (64 hex
	// characters); empty: <data_dir>/master.key, generated on first start.
	// Production keeps it outside the data dir, so that a copy of the data
	// dir does not open the key ciphertexts.
	MasterKeyFile string `json:"master_key_file"`
	// masterKey is GATEHOUSE_MASTER_KEY (64 hex characters): it wins over
	// any file. Environment only, never logged.
	masterKey string
	// demoEcho adds the demo service "echo" (--demo-echo): a built-in echo
	// upstream on loopback, something to proxy to without a real service.
	demoEcho bool
	// file is the config file loaded and sources what else set a key
	// (setBy), so that a validation error names where a bad value came from.
	file    string
	sources map[string]string
	DataDir string `json:"data_dir"`
	Log     struct {
		Format string `json:"format"`
		Level  string `json:"level"`
	} `json:"log"`
	Server struct {
		Host           string   `json:"host"`
		Port           int      `json:"port"`
		SecureCookies  bool     `json:"secure_cookies"`
		MaxBodyBytes   int      `json:"max_body_bytes"`
		RequestTimeout duration `json:"request_timeout"`
		SessionTTL     duration `json:"session_ttl"`
		// MetricsAddr (host:port) serves /metrics and /health without
		// authentication, for scrapers; empty: off (on the API listener
		// /metrics needs an admin session).
		MetricsAddr string `json:"metrics_addr"`
		// ServicesAllowLinkLocal lets services created through the API
		// point at link-local addresses (169.254.0.0/16, fe80::/10: cloud
		// metadata); config-file services always may. (Not under
		// "services", whose keys are service names.)
		ServicesAllowLinkLocal bool `json:"services_allow_link_local"`
		// MaxConns caps the TCP connections of every listener together
		// (they share the process's file descriptors), MaxConnsPerIP those
		// from one client address; 0: derived from the fd limit at start
		// (fdlimit.go).
		MaxConns      int `json:"max_conns"`
		MaxConnsPerIP int `json:"max_conns_per_ip"`
	} `json:"server"`
	Gateway struct {
		Host         string `json:"host"`
		Port         int    `json:"port"`
		Token        string `json:"token"`
		RateLimitRPM int    `json:"rate_limit_rpm"`
		// RateLimitBurst is the token bucket's size (the seed's burst of 5).
		RateLimitBurst int `json:"rate_limit_burst"`
		// MaxTraces is how many run traces the gateway keeps.
		MaxTraces int `json:"max_traces"`
		// TraceDays is how many days back from the newest run traces are
		// kept (0: until max_traces pushes them out).
		TraceDays int `json:"trace_days"`
		// UsageDays is how many UTC days of run usage the gateway keeps.
		UsageDays int `json:"usage_days"`
		// MaxUploadBytes caps a media upload.
		MaxUploadBytes int `json:"max_upload_bytes"`
		// Quotas cap what one user may hold (gateway.Quotas).
		Quotas struct {
			MemoryEntries      int   `json:"memory_entries_per_user"`
			MediaBytes         int64 `json:"media_bytes_per_user"`
			Sessions           int   `json:"sessions_per_user"`
			Agents             int   `json:"agents_per_user"`
			PendingMCPRequests int   `json:"mcp_requests_pending_per_user"`
		} `json:"quotas"`
		// MaxMessageBytes bounds a turn's message text (413 beyond) and
		// MaxAnswerBytes what a provider may answer in one call.
		MaxMessageBytes int `json:"max_message_bytes"`
		MaxAnswerBytes  int `json:"max_answer_bytes"`
		// MCPMaxMessageBytes bounds one message from an MCP server
		// (beyond it the connection drops); WebhookMaxInFlight the async
		// webhook messages in flight per channel instance (429 beyond).
		MCPMaxMessageBytes int `json:"mcp_max_message_bytes"`
		WebhookMaxInFlight int `json:"webhook_max_in_flight"`
		// DefaultAgent is the agent (id or agent_key) a run naming none
		// gets when it acts for no user; empty: none.
		DefaultAgent string `json:"default_agent"`
		// DefaultUserBudget is the budget of every user without one of
		// their own (docs/budgets.md); absent: none.
		DefaultUserBudget gateway.DefaultBudget `json:"default_user_budget"`
	} `json:"gateway"`
	// Pricing prices LLM calls (docs/pricing.md): Models overrides the
	// built-in table; RequireKnown refuses calls to models without a price.
	Pricing pricingConfig `json:"pricing"`
	Keys    struct {
		RotationGracePeriod duration `json:"rotation_grace_period"`
		// MaxPerUser is how many keys a user may hold, by plan.
		MaxPerUser struct {
			Standard int `json:"standard"`
			Premium  int `json:"premium"`
		} `json:"max_per_user"`
	} `json:"keys"`
	// Tools: tools.exec_enabled allows custom tools, which run commands
	// on this host (off by default); tools.sandbox is where they and the
	// stdio MCP servers run: "bwrap" (bubblewrap, the default; without a
	// working bwrap they refuse to run) or "none" (unsandboxed, warned
	// about at start); tools.sandbox_paths are more host paths they see,
	// read-only.
	Tools struct {
		ExecEnabled  bool     `json:"exec_enabled"`
		Sandbox      string   `json:"sandbox"`
		SandboxPaths []string `json:"sandbox_paths"`
	} `json:"tools"`
	Plans struct {
		Standard int64 `json:"standard"`
		Premium  int64 `json:"premium"`
	} `json:"plans"`
	Services map[string]serviceConfig `json:"services"`
	Usage    struct {
		FlushInterval duration `json:"flush_interval"`
	} `json:"usage"`
	Snapshot struct {
		EveryRecords uint64   `json:"every_records"`
		Interval     duration `json:"interval"`
		Retain       int      `json:"retain"`
	} `json:"snapshot"`
	WAL struct {
		MaxBatch int  `json:"max_batch"`
		NoSync   bool `json:"no_sync"`
	} `json:"wal"`
	Actors struct {
		Shards        int      `json:"shards"`
		IdleAfter     duration `json:"idle_after"`
		SweepInterval duration `json:"sweep_interval"`
	} `json:"actors"`
	// Cluster turns cluster mode on when EtcdEndpoints is set (see
	// clustermode.go and docs/cluster.md); empty: a single node on bbolt.
	Cluster clusterConfig `json:"cluster"`
}

// clusterConfig is the cluster.* section.
type clusterConfig struct {
	// EtcdEndpoints are the etcd client URLs; setting them turns cluster
	// mode on.
	EtcdEndpoints []string `json:"etcd_endpoints"`
	// NodeID names this node, unique in the cluster (a path segment of
	// its etcd keys).
	NodeID string `json:"node_id"`
	// Listen (host:port) is where the other nodes reach this one: the
	// forwarded admissions' transport binds it and advertises it.
	Listen string `json:"listen"`
	// Prefix is the etcd key prefix of everything the cluster keeps.
	Prefix string `json:"prefix"`
	// LeaseTTL is the membership lease: a dead node's keys move after
	// about this long.
	LeaseTTL duration `json:"lease_ttl"`
	// RequestTimeout bounds each etcd request.
	RequestTimeout duration `json:"request_timeout"`
	// ForwardTimeout bounds an admission forwarded to a key's owner.
	ForwardTimeout duration `json:"forward_timeout"`
	// TLS secures the node transport (cluster.listen) with mutual TLS
	// under a cluster CA (clustertls.go); required unless Insecure.
	TLS clusterTLSConfig `json:"tls"`
	// Insecure runs the node transport without TLS: anything that
	// reaches cluster.listen is heard (a loopback test only).
	Insecure bool `json:"insecure"`
	// Etcd is how the node authenticates to etcd (etcdclient.go).
	Etcd clusterEtcdConfig `json:"etcd"`
}

type serviceConfig struct {
	Upstream string            `json:"upstream"`
	Headers  map[string]string `json:"headers"`
	Timeout  duration          `json:"timeout"`
	MaxConns int               `json:"max_conns"`
}

// defaultConfig is the embedded default: what `make run` uses.
func defaultConfig() fileConfig {
	var c fileConfig
	c.DataDir = "./data"
	c.Log.Format, c.Log.Level = "text", "info"
	c.Server.Host, c.Server.Port = "127.0.0.1", 8080
	c.Server.MaxBodyBytes = 64 << 10
	c.Server.RequestTimeout = dur(5 * time.Second)
	c.Server.SessionTTL = dur(7 * 24 * time.Hour)
	c.Gateway.Host, c.Gateway.Port = "127.0.0.1", 18790
	gwd := gateway.DefaultConfig()
	c.Gateway.RateLimitBurst, c.Gateway.MaxTraces, c.Gateway.UsageDays = gwd.RateLimitBurst, gwd.MaxTraces, gwd.UsageDays
	c.Gateway.TraceDays = gwd.TraceDays
	c.Gateway.MaxMessageBytes, c.Gateway.MaxAnswerBytes = agentrun.DefaultMaxMessageBytes, agentrun.DefaultMaxAnswerBytes
	c.Gateway.MCPMaxMessageBytes, c.Gateway.WebhookMaxInFlight = mcppool.DefaultMaxMessageBytes, webhook.DefaultMaxInFlight
	q := &c.Gateway.Quotas
	q.MemoryEntries, q.MediaBytes, q.Sessions, q.Agents, q.PendingMCPRequests = gwd.Quotas.MemoryEntries, gwd.Quotas.MediaBytes, gwd.Quotas.Sessions, gwd.Quotas.Agents, gwd.Quotas.PendingMCPRequests
	c.Gateway.MaxUploadBytes = 20 << 20
	c.Keys.RotationGracePeriod = dur(24 * time.Hour)
	c.Tools.Sandbox = toolexec.SandboxBwrap
	c.Keys.MaxPerUser.Standard, c.Keys.MaxPerUser.Premium = 100, 1000
	c.Plans.Standard, c.Plans.Premium = 1000, 10000
	c.Services = map[string]serviceConfig{}
	c.Usage.FlushInterval = dur(time.Second)
	c.Snapshot.EveryRecords, c.Snapshot.Interval, c.Snapshot.Retain = 200_000, dur(10*time.Minute), 3
	c.WAL.MaxBatch = 4096
	c.Actors.Shards = 64
	c.Actors.IdleAfter, c.Actors.SweepInterval = dur(5*time.Minute), dur(time.Minute)
	c.Cluster.Prefix = cluster.DefaultPrefix
	c.Cluster.LeaseTTL, c.Cluster.RequestTimeout = dur(cluster.DefaultTTL), dur(2*time.Second)
	c.Cluster.ForwardTimeout = dur(500 * time.Millisecond)
	return c
}

// minRemoteToken is the shortest gateway token accepted off loopback: a
// full-admin credential reachable from the network must not be guessable.
const minRemoteToken = 32

// loadFile overlays the JSON file at path on c. Unknown keys are refused.
func loadFile(c *fileConfig, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := decodeStrict(b, c); err != nil {
		if _, ok := errors.AsType[*fileError](err); ok {
			return fmt.Errorf("config %s:%w", path, err) // "config f.json:3:14: ..."
		}
		return fmt.Errorf("config %s: %w", path, err)
	}
	c.file = path
	return nil
}

// validate parses durations and checks every field, naming the first bad one.
func (c *fileConfig) validate() error {
	durs := []struct {
		name     string
		d        *duration
		positive bool
	}{
		{"server.request_timeout", &c.Server.RequestTimeout, true},
		{"server.session_ttl", &c.Server.SessionTTL, true},
		{"keys.rotation_grace_period", &c.Keys.RotationGracePeriod, false},
		{"usage.flush_interval", &c.Usage.FlushInterval, true},
		{"snapshot.interval", &c.Snapshot.Interval, false},
		{"actors.idle_after", &c.Actors.IdleAfter, true},
		{"actors.sweep_interval", &c.Actors.SweepInterval, true},
		{"cluster.lease_ttl", &c.Cluster.LeaseTTL, true},
		{"cluster.request_timeout", &c.Cluster.RequestTimeout, true},
		{"cluster.forward_timeout", &c.Cluster.ForwardTimeout, true},
	}
	for _, x := range durs {
		if err := x.d.parse(x.positive); err != nil {
			return c.invalid(x.name, err.Error())
		}
	}
	for name, s := range c.Services {
		if err := s.Timeout.parse(false); err != nil {
			return c.invalid("services."+name+".timeout", err.Error())
		}
		c.Services[name] = s
	}
	return c.validateValues()
}

// parse sets d.d from the string read; its error completes "<key> ...".
func (d *duration) parse(positive bool) error {
	if d.set {
		v, err := time.ParseDuration(d.raw)
		if err != nil {
			return fmt.Errorf(`must be a duration such as "24h" or "500ms", not %q`, d.raw)
		}
		d.d, d.set = v, false
	}
	if d.d < 0 || positive && d.d == 0 {
		return fmt.Errorf("must be %s", map[bool]string{true: "> 0", false: ">= 0"}[positive])
	}
	return nil
}

func (c *fileConfig) validateValues() error {
	checks := []struct {
		bad  bool
		name string
		want string
	}{
		{c.DataDir == "", "data_dir", "a directory path"},
		{c.Log.Format != "text" && c.Log.Format != "json", "log.format", `"text" or "json"`},
		{!oneOf(c.Log.Level, "debug", "info", "warn", "error"), "log.level", "debug, info, warn or error"},
		{net.ParseIP(c.Server.Host) == nil && c.Server.Host != "localhost", "server.host", "an IP address or localhost"},
		{c.Server.Port < 0 || c.Server.Port > 65535, "server.port", "in 0..65535"},
		{c.Server.MaxBodyBytes < 1, "server.max_body_bytes", "> 0"},
		{c.Server.MaxConns < 0, "server.max_conns", ">= 0 (0: derived from the fd limit)"},
		{c.Server.MaxConnsPerIP < 0, "server.max_conns_per_ip", ">= 0 (0: derived from server.max_conns)"},
		{c.Server.MaxConns > 0 && c.Server.MaxConnsPerIP > c.Server.MaxConns, "server.max_conns_per_ip", "<= server.max_conns"},
		{net.ParseIP(c.Gateway.Host) == nil && c.Gateway.Host != "localhost", "gateway.host", "an IP address or localhost"},
		{c.Gateway.Port < 0 || c.Gateway.Port > 65535, "gateway.port", "in 0..65535"},
		{c.Gateway.RateLimitRPM < 0, "gateway.rate_limit_rpm", ">= 0 (0 disables it)"},
		{c.Gateway.RateLimitBurst < 1, "gateway.rate_limit_burst", ">= 1"},
		{c.Gateway.DefaultUserBudget.Validate() != nil, "gateway.default_user_budget", "{period: day|month|total, max_usd and/or max_tokens > 0}"},
		{c.Gateway.MaxTraces < 1, "gateway.max_traces", ">= 1"},
		{c.Gateway.UsageDays < 1, "gateway.usage_days", ">= 1"},
		{c.Gateway.TraceDays < 0, "gateway.trace_days", ">= 0 (0: no age limit)"},
		{c.Gateway.MaxMessageBytes < 1, "gateway.max_message_bytes", ">= 1"},
		{c.Gateway.MaxAnswerBytes < 1, "gateway.max_answer_bytes", ">= 1"},
		{c.Gateway.MCPMaxMessageBytes < 4096 || c.Gateway.MCPMaxMessageBytes > 1<<30, "gateway.mcp_max_message_bytes", "in 4096..1073741824"},
		{c.Gateway.WebhookMaxInFlight < 1 || c.Gateway.WebhookMaxInFlight > 1e6, "gateway.webhook_max_in_flight", "in 1..1000000"},
		{c.Gateway.Quotas.MemoryEntries < 1, "gateway.quotas.memory_entries_per_user", ">= 1"},
		{c.Gateway.Quotas.MediaBytes < 1, "gateway.quotas.media_bytes_per_user", ">= 1"},
		{c.Gateway.Quotas.Sessions < 1, "gateway.quotas.sessions_per_user", ">= 1"},
		{c.Gateway.Quotas.Agents < 1, "gateway.quotas.agents_per_user", ">= 1"},
		{c.Gateway.Quotas.PendingMCPRequests < 1, "gateway.quotas.mcp_requests_pending_per_user", ">= 1"},
		{c.Gateway.MaxUploadBytes < 1 || c.Gateway.MaxUploadBytes > 1<<30, "gateway.max_upload_bytes", "in 1..1073741824"},
		{c.Plans.Standard < 1 || c.Plans.Standard > 1e9, "plans.standard", "in 1..1000000000"},
		{c.Keys.MaxPerUser.Standard < 1 || c.Keys.MaxPerUser.Standard > 1e6, "keys.max_per_user.standard", "in 1..1000000"},
		{c.Keys.MaxPerUser.Premium < 1 || c.Keys.MaxPerUser.Premium > 1e6, "keys.max_per_user.premium", "in 1..1000000"},
		{c.Plans.Premium < 1 || c.Plans.Premium > 1e9, "plans.premium", "in 1..1000000000"},
		{c.Snapshot.Retain < 1, "snapshot.retain", ">= 1"},
		{c.WAL.MaxBatch < 1, "wal.max_batch", "> 0"},
		{c.Actors.Shards < 1 || c.Actors.Shards > 4096, "actors.shards", "in 1..4096"},
		{!oneOf(c.Tools.Sandbox, toolexec.SandboxBwrap, toolexec.SandboxNone), "tools.sandbox", `"bwrap" or "none"`},
		{slices.ContainsFunc(c.Tools.SandboxPaths, func(p string) bool { return !filepath.IsAbs(p) }), "tools.sandbox_paths", "absolute paths"},
	}
	for _, x := range checks {
		if x.bad {
			return c.invalid(x.name, "must be "+x.want)
		}
	}
	if _, err := c.Pricing.table(); err != nil {
		return c.invalid("pricing.models", fmt.Sprintf("must hold valid prices (USD per million tokens): %v", err))
	}
	if sameSocket(c.Server.Host, c.Server.Port, c.Gateway.Host, c.Gateway.Port) {
		return c.invalid("gateway.port", fmt.Sprintf("must differ from server.port (%d): the two listeners cannot share a port", c.Server.Port))
	}
	if c.Server.MetricsAddr != "" {
		host, port, err := net.SplitHostPort(c.Server.MetricsAddr)
		n, perr := strconv.Atoi(port)
		if err != nil || net.ParseIP(host) == nil && host != "localhost" || perr != nil || n < 0 || n > 65535 {
			return c.invalid("server.metrics_addr", `must be host:port with an IP address or localhost, e.g. "127.0.0.1:9464"`)
		}
		for _, l := range []struct {
			key, host string
			port      int
		}{{"server.port", c.Server.Host, c.Server.Port}, {"gateway.port", c.Gateway.Host, c.Gateway.Port}} {
			if sameSocket(host, n, l.host, l.port) {
				return c.invalid("server.metrics_addr", fmt.Sprintf("must differ from %s (%d): two listeners cannot share a port", l.key, l.port))
			}
		}
	}
	if c.Gateway.Token == "" && !loopback(c.Gateway.Host) {
		return c.invalid("gateway.token", fmt.Sprintf("must be set unless gateway.host is a loopback address (got %q)", c.Gateway.Host))
	}
	if c.Gateway.Token != "" && len(c.Gateway.Token) < minRemoteToken && !loopback(c.Gateway.Host) {
		return c.invalid("gateway.token", fmt.Sprintf("must be at least %d characters when gateway.host is not a loopback address", minRemoteToken))
	}
	if err := c.validateCluster(); err != nil {
		return err
	}
	for name, s := range c.Services {
		if name == "" || strings.ContainsAny(name, "/?#% ") {
			return c.invalid(fmt.Sprintf("services.%q", name), "must be named by a plain path segment")
		}
		if !strings.HasPrefix(s.Upstream, "http://") && !strings.HasPrefix(s.Upstream, "https://") {
			return c.invalid("services."+name+".upstream", "must be an http:// or https:// URL")
		}
	}
	return nil
}

// secrets are the settings whose values errors and logs never show, by
// key: setBy hides what set them, masked their values. (Service headers,
// a map, are masked apart.)
func (c *fileConfig) secrets() map[string]*string {
	return map[string]*string{"gateway.token": &c.Gateway.Token, "cluster.etcd.password": &c.Cluster.Etcd.Password}
}

// setBy records that the environment variable or flag name set key to
// value, for validation errors: "GATEHOUSE_PORT=99999: server.port ...".
func (c *fileConfig) setBy(key, name, value string) {
	if _, secret := c.secrets()[key]; secret {
		value = "***"
	}
	if c.sources == nil {
		c.sources = map[string]string{}
	}
	c.sources[key] = name + "=" + value
}

// invalid reports key's bad value, naming where it came from: the
// variable or flag that set it, else the config file, else the defaults.
func (c *fileConfig) invalid(key, problem string) error {
	src, ok := c.sources[key]
	switch {
	case ok:
	case c.file != "":
		src = "config " + c.file
	default:
		src = "config"
	}
	return fmt.Errorf("%s: %s %s", src, key, problem)
}

// sameSocket reports whether two listen addresses collide: the same port
// (0, any free port, never does) on hosts that overlap (the same one, an
// unspecified one such as 0.0.0.0, or localhost and a loopback address).
func sameSocket(h1 string, p1 int, h2 string, p2 int) bool {
	if p1 != p2 || p1 == 0 {
		return false
	}
	a, b := net.ParseIP(h1), net.ParseIP(h2)
	switch {
	case h1 == h2, a != nil && a.IsUnspecified(), b != nil && b.IsUnspecified():
		return true
	case h1 == "localhost" || h2 == "localhost":
		return loopback(h1) && loopback(h2)
	}
	return a != nil && a.Equal(b)
}

// loopback reports whether host only accepts local connections.
func loopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

func oneOf(s string, opts ...string) bool {
	for _, o := range opts {
		if s == o {
			return true
		}
	}
	return false
}

// masked renders the effective config for the startup log, secrets hidden.
func (c fileConfig) masked() string {
	for _, v := range c.secrets() {
		if *v != "" {
			*v = "***"
		}
	}
	svcs := make(map[string]serviceConfig, len(c.Services))
	for name, s := range c.Services {
		h := make(map[string]string, len(s.Headers))
		for k := range s.Headers {
			h[k] = "***"
		}
		s.Headers = h
		svcs[name] = s
	}
	c.Services = svcs
	b, _ := json.Marshal(c)
	return string(b)
}

// maskedAttrs is masked as log attributes, one per setting, grouped as in
// the file ("server.port=8080" in text logs, nested objects in JSON ones),
// in key order.
func (c fileConfig) maskedAttrs() []any {
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(c.masked()))
	dec.UseNumber() // 1073741824, not 1.073741824e+09
	if err := dec.Decode(&m); err != nil {
		return []any{slog.String("error", err.Error())}
	}
	return attrsOf(m)
}

func attrsOf(m map[string]any) []any {
	keys := slices.Sorted(maps.Keys(m))
	out := make([]any, 0, len(keys))
	for _, k := range keys {
		switch v := m[k].(type) {
		case map[string]any:
			if len(v) == 0 {
				out = append(out, slog.String(k, "{}"))
				continue
			}
			out = append(out, slog.Group(k, attrsOf(v)...))
		case []any:
			b, _ := json.Marshal(v)
			out = append(out, slog.String(k, string(b)))
		default:
			out = append(out, slog.Any(k, v))
		}
	}
	return out
}
