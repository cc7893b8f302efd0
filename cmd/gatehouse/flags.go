package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// setting is one flag: its setter applies a value given on the command line
// or, failing that, in the GATEHOUSE_* environment variable of the same name.
type setting struct {
	name, key, usage string
	set              func(c *fileConfig, v string) error
}

// intSetter's error completes "<flag or variable>=<value>: <key> ...".
func intSetter(dst func(*fileConfig) *int) func(*fileConfig, string) error {
	return func(c *fileConfig, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return errors.New("must be an integer")
		}
		*dst(c) = n
		return nil
	}
}

func strSetter(dst func(*fileConfig) *string) func(*fileConfig, string) error {
	return func(c *fileConfig, v string) error { *dst(c) = v; return nil }
}

// listSetter takes a comma-separated list.
func listSetter(dst func(*fileConfig) *[]string) func(*fileConfig, string) error {
	return func(c *fileConfig, v string) error { *dst(c) = splitList(v); return nil }
}

var settings = []setting{
	{"data-dir", "data_dir", "directory for the WAL, snapshots and master key", strSetter(func(c *fileConfig) *string { return &c.DataDir })},
	{"host", "server.host", "key-management and proxy listen address", strSetter(func(c *fileConfig) *string { return &c.Server.Host })},
	{"port", "server.port", "key-management and proxy port (0: any free port)", intSetter(func(c *fileConfig) *int { return &c.Server.Port })},
	{"gateway-host", "gateway.host", "agent gateway listen address", strSetter(func(c *fileConfig) *string { return &c.Gateway.Host })},
	{"gateway-port", "gateway.port", "agent gateway port (0: any free port)", intSetter(func(c *fileConfig) *int { return &c.Gateway.Port })},
	{"gateway-token", "gateway.token", "agent gateway admin token", strSetter(func(c *fileConfig) *string { return &c.Gateway.Token })},
	{"gateway-mcp-max-message-bytes", "gateway.mcp_max_message_bytes", "the largest message an MCP server may send (a JSON reply, an SSE event, a stdio JSON message); beyond it its connection drops", intSetter(func(c *fileConfig) *int { return &c.Gateway.MCPMaxMessageBytes })},
	{"gateway-webhook-max-in-flight", "gateway.webhook_max_in_flight", "async webhook messages in flight per channel instance, callback retries included (429 beyond)", intSetter(func(c *fileConfig) *int { return &c.Gateway.WebhookMaxInFlight })},
	{"max-conns", "server.max_conns", "TCP connections all listeners may hold together, 503 beyond (0: derived from the fd limit)", intSetter(func(c *fileConfig) *int { return &c.Server.MaxConns })},
	{"max-conns-per-ip", "server.max_conns_per_ip", "TCP connections one client address may hold, 429 beyond (0: half of max-conns)", intSetter(func(c *fileConfig) *int { return &c.Server.MaxConnsPerIP })},
	{"services-allow-link-local", "server.services_allow_link_local", "let services created through the API point at link-local addresses (169.254.0.0/16, fe80::/10: cloud metadata)", boolSetter(func(c *fileConfig) *bool { return &c.Server.ServicesAllowLinkLocal })},
	{"master-key-file", "master_key_file", "file holding the 64-hex-character master key (default <data-dir>/master.key)", strSetter(func(c *fileConfig) *string { return &c.MasterKeyFile })},
	{"log-format", "log.format", "text or json", strSetter(func(c *fileConfig) *string { return &c.Log.Format })},
	{"log-level", "log.level", "debug, info, warn or error", strSetter(func(c *fileConfig) *string { return &c.Log.Level })},
	{"etcd-endpoints", "cluster.etcd_endpoints", "cluster mode: etcd client URLs, comma-separated (setting them turns cluster mode on; docs/cluster.md)", listSetter(func(c *fileConfig) *[]string { return &c.Cluster.EtcdEndpoints })},
	{"node-id", "cluster.node_id", "cluster mode: this node's name, unique in the cluster", strSetter(func(c *fileConfig) *string { return &c.Cluster.NodeID })},
	{"cluster-listen", "cluster.listen", "cluster mode: host:port where the other nodes reach this one", strSetter(func(c *fileConfig) *string { return &c.Cluster.Listen })},
	{"cluster-tls-ca-file", "cluster.tls.ca_file", "cluster mode: the cluster CA certificate(s), PEM (gatehouse cluster certs makes them)", strSetter(func(c *fileConfig) *string { return &c.Cluster.TLS.CAFile })},
	{"cluster-tls-cert-file", "cluster.tls.cert_file", "cluster mode: this node's certificate, PEM, signed by the cluster CA", strSetter(func(c *fileConfig) *string { return &c.Cluster.TLS.CertFile })},
	{"cluster-tls-key-file", "cluster.tls.key_file", "cluster mode: this node's private key, PEM", strSetter(func(c *fileConfig) *string { return &c.Cluster.TLS.KeyFile })},
	{"etcd-ca-file", "cluster.etcd.ca_file", "cluster mode: the CA of etcd's server certificate, PEM (makes the etcd endpoints https)", strSetter(func(c *fileConfig) *string { return &c.Cluster.Etcd.CAFile })},
	{"etcd-cert-file", "cluster.etcd.cert_file", "cluster mode: this node's etcd client certificate, PEM (etcd --client-cert-auth)", strSetter(func(c *fileConfig) *string { return &c.Cluster.Etcd.CertFile })},
	{"etcd-key-file", "cluster.etcd.key_file", "cluster mode: the private key of --etcd-cert-file, PEM", strSetter(func(c *fileConfig) *string { return &c.Cluster.Etcd.KeyFile })},
	{"etcd-username", "cluster.etcd.username", "cluster mode: the etcd user this node logs in as (etcd auth enabled)", strSetter(func(c *fileConfig) *string { return &c.Cluster.Etcd.Username })},
	{"etcd-password", "cluster.etcd.password", "cluster mode: that etcd user's password (prefer GATEHOUSE_ETCD_PASSWORD: a flag shows in ps)", strSetter(func(c *fileConfig) *string { return &c.Cluster.Etcd.Password })},
	{"etcd-accept-unauthenticated", "cluster.etcd.accept_unauthenticated", "cluster mode: apply replicated-log entries and snapshots written without a MAC (an upgrade only; docs/decisions.md)", boolSetter(func(c *fileConfig) *bool { return &c.Cluster.Etcd.AcceptUnauthenticated })},
	{"cluster-insecure", "cluster.insecure", "cluster mode without TLS between the nodes (true: a loopback test only; warns at every start)", boolSetter(func(c *fileConfig) *bool { return &c.Cluster.Insecure })},
}

func envName(flagName string) string {
	return "GATEHOUSE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// subcommands describe themselves in their -h, above their flags.
var subcommands = map[string]string{
	"serve": `usage: gatehouse serve [flags]

Runs the server: key management, the proxy and the web console on one
listener (--port, default 8080), the agent gateway on another
(--gateway-port, default 18790). Each flag may be given instead by its
GATEHOUSE_* environment variable, or by the config file's key (README,
"Configuration"); a flag wins over its variable, which wins over the file.

Cluster mode (docs/cluster.md): --etcd-endpoints turns it on; every node
then needs its own --node-id and --cluster-listen, and the same master key
(GATEHOUSE_MASTER_KEY or --master-key-file) and config.`,
	"etcd": `usage: gatehouse etcd [flags]

Runs one etcd member (etcd 3.7, embedded) for cluster mode, so that a
cluster needs nothing but this binary: one member, or three started with
the same --initial-cluster. Its clients (gatehouse serve --etcd-endpoints)
reach it at --listen-client; its peers at --listen-peer. SIGTERM or
SIGINT stops it. For production, an external etcd cluster works as well.

Operations (docs/cluster.md, "Operations"; each has its own -h):
  gatehouse etcd snapshot save|restore|status   back up and restore
  gatehouse etcd member list|add|remove         change the members
Against an etcd with client TLS or authentication, save and member read
GATEHOUSE_ETCD_CA_FILE, _CERT_FILE, _KEY_FILE, _USERNAME and _PASSWORD,
as serve's cluster.etcd.* (a snapshot needs etcd's root role).`,
	"etcd snapshot": `usage:
  gatehouse etcd snapshot save [--endpoints URLs] [--force] FILE
  gatehouse etcd snapshot restore FILE --name NAME --data-dir DIR --initial-cluster NAME=URL,...
  gatehouse etcd snapshot status FILE

save writes a consistent snapshot of the cluster's etcd (everything the
gatehouse nodes share) to FILE, taken from the leader; restore makes a
member's data dir from it (once per member, with the same
--initial-cluster); status checks a snapshot file.`,
	"etcd snapshot save": `usage: gatehouse etcd snapshot save [flags] FILE

Saves a snapshot of the etcd cluster at --endpoints into FILE, taken from
the leader after a linearizable read (every change acknowledged before the
save is in it): written beside FILE, synced, checked (the sha256 etcd
appends, the bbolt pages, etcd's buckets), then renamed. Prints its size,
revision and key count. Refuses to replace FILE without --force.`,
	"etcd snapshot restore": `usage: gatehouse etcd snapshot restore FILE [flags]

Makes the data dir of one etcd member from the snapshot FILE (etcd's own
restore): run it for every member of the new cluster, each with its
--name and --data-dir and the same --initial-cluster, then start each
with gatehouse etcd on that data dir. The data dir must be absent or
empty. The restored etcd is the cluster as it was at the snapshot: stop
every gatehouse node first, start them after.`,
	"etcd snapshot status": `usage: gatehouse etcd snapshot status FILE

Checks that FILE is a whole etcd snapshot (its sha256, its bbolt pages,
etcd's buckets) and prints its size, revision and key count.`,
	"etcd member": `usage:
  gatehouse etcd member list [--endpoints URLs]
  gatehouse etcd member add NAME --listen-peer HOST:PORT [--endpoints URLs]
  gatehouse etcd member remove NAME [--endpoints URLs]

Changes the etcd cluster's members (etcdctl member list/add/remove): add
prints the gatehouse etcd command that starts the new member.`,
	"etcd member list": `usage: gatehouse etcd member list [flags]

Lists the etcd cluster's members: id, name, peer and client URLs.`,
	"etcd member add": `usage: gatehouse etcd member add NAME --listen-peer HOST:PORT [flags]

Adds member NAME, whose peers will reach it at --listen-peer, and prints
the gatehouse etcd command that starts it (--initial-cluster-state
existing). Start it at once: the cluster counts it in its quorum from now.`,
	"cluster certs": `usage: gatehouse cluster certs --dir DIR --nodes NODE,... [flags]

Makes the certificates of cluster mode's node transport (mutual TLS,
docs/cluster.md "Trust model"): a CA (DIR/ca.pem, DIR/ca-key.pem) and, for
each node, a certificate and key (DIR/NODE.pem, DIR/NODE-key.pem), ECDSA
P-256, allowed for server and client authentication and naming --hosts
(the hosts of the nodes' --cluster-listen). With --ca-file and
--ca-key-file, issues node certificates under an existing CA (a node
added, a certificate renewed). Never replaces a file. Give each node
--cluster-tls-ca-file DIR/ca.pem, --cluster-tls-cert-file DIR/NODE.pem
and --cluster-tls-key-file DIR/NODE-key.pem; keep ca-key.pem off the
nodes.`,
	"etcd member remove": `usage: gatehouse etcd member remove NAME [flags]

Removes the member named NAME (or of that hex id) from the etcd cluster;
then stop its process and delete its data dir.`,
	"repair": repairHelp,
	"reset-password": `usage: gatehouse reset-password [flags]

Sets a new password for the admin named by GATEHOUSE_ADMIN_EMAIL (default
admin@localhost): GATEHOUSE_ADMIN_PASSWORD, or a generated one printed
once. Run it with the server stopped, on the server's data dir (--data-dir
or --config as the server was started): it refuses a directory that holds
no gatehouse data. The admin's sessions end.`,
}

// parseServe builds the effective config of subcommand cmd: embedded
// defaults, then the config file, then each flag, or its environment
// variable when the flag was not given. -h prints cmd's help on stdout
// and returns flag.ErrHelp.
func parseServe(cmd string, args []string, getenv func(string) string, stdout, stderr io.Writer) (fileConfig, error) {
	fs := newFlagSet(cmd, args, stdout, stderr)
	configPath := fs.String("config", "", "JSON config file (env GATEHOUSE_CONFIG)")
	demo := fs.Bool("demo-echo", false, "demo: add a service \"echo\" answered by a built-in echo upstream on loopback (env GATEHOUSE_DEMO_ECHO=1)")
	vals := make(map[string]*string, len(settings))
	for _, s := range settings {
		vals[s.name] = fs.String(s.name, "", s.usage+" (env "+envName(s.name)+")")
	}
	if err := fs.Parse(args); err != nil {
		return fileConfig{}, err
	}
	if fs.NArg() > 0 {
		return fileConfig{}, fmt.Errorf("unexpected argument %q (gatehouse %s -h lists the flags)", fs.Arg(0), cmd)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	cfg := defaultConfig()
	path := *configPath
	if !given["config"] {
		path = getenv("GATEHOUSE_CONFIG")
	}
	if path != "" {
		if err := loadFile(&cfg, path); err != nil {
			return fileConfig{}, err
		}
	}
	for _, s := range settings {
		v, by := *vals[s.name], "--"+s.name
		if !given[s.name] {
			by = envName(s.name)
			v = getenv(by)
		}
		if given[s.name] || v != "" {
			cfg.setBy(s.key, by, v)
			if err := s.set(&cfg, v); err != nil {
				return fileConfig{}, cfg.invalid(s.key, err.Error())
			}
		}
	}
	cfg.masterKey = getenv("GATEHOUSE_MASTER_KEY")
	cfg.demoEcho = *demo || (!given["demo-echo"] && getenv("GATEHOUSE_DEMO_ECHO") == "1")
	return cfg, cfg.validate()
}
