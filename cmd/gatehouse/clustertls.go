package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"gatehouse/actors/cluster"
	"gatehouse/actors/cluster/transport"
)

// The node transport's security (cluster.tls.*, cluster.insecure) and
// gatehouse cluster certs. In cluster mode every message between nodes
// (forwarded admissions, blob copies) goes over mutual TLS under a cluster
// CA; without the TLS files a node refuses to start unless
// cluster.insecure is true, which warns at every start (docs/cluster.md,
// "Trust model").

// clusterTLSConfig is the cluster.tls section: PEM files.
type clusterTLSConfig struct {
	// CAFile holds the cluster CA certificate(s): a node accepts the peers
	// whose certificates one of them signed (old and new during a CA
	// rollover).
	CAFile string `json:"ca_file"`
	// CertFile and KeyFile are this node's certificate (allowed for
	// server and client authentication, naming the host of
	// cluster.listen) and private key.
	CertFile string `json:"cert_file"`
	KeyFile  string `json:"key_file"`
}

// clusterTLSKeys name the cluster.tls keys, in the order messages list them.
var clusterTLSKeys = []string{"cluster.tls.ca_file", "cluster.tls.cert_file", "cluster.tls.key_file"}

func (t clusterTLSConfig) files() []string { return []string{t.CAFile, t.CertFile, t.KeyFile} }

// boolSetter takes true or false (and what strconv.ParseBool takes).
func boolSetter(dst func(*fileConfig) *bool) func(*fileConfig, string) error {
	return func(c *fileConfig, v string) error {
		switch strings.ToLower(v) {
		case "1", "t", "true":
			*dst(c) = true
		case "0", "f", "false":
			*dst(c) = false
		default:
			return errors.New("must be true or false")
		}
		return nil
	}
}

// validateClusterTLS checks cluster.tls and cluster.insecure: outside
// cluster mode they must be unset; in it, either the three files or
// cluster.insecure.
func (c *fileConfig) validateClusterTLS() error {
	files := c.Cluster.TLS.files()
	if !c.clusterMode() {
		for i, f := range files {
			if f != "" {
				return c.invalid(clusterTLSKeys[i], "is set but cluster.etcd_endpoints is not: it secures cluster mode")
			}
		}
		if c.Cluster.Insecure {
			return c.invalid("cluster.insecure", "is set but cluster.etcd_endpoints is not: it is for cluster mode")
		}
		return nil
	}
	n := 0
	for _, f := range files {
		if f != "" {
			n++
		}
	}
	switch {
	case n == 0 && !c.Cluster.Insecure:
		return c.invalid("cluster.tls.ca_file", "must be set in cluster mode, with cluster.tls.cert_file and cluster.tls.key_file "+
			"(--cluster-tls-ca-file, --cluster-tls-cert-file, --cluster-tls-key-file or GATEHOUSE_CLUSTER_TLS_CA_FILE, _CERT_FILE, _KEY_FILE): "+
			"every message between nodes goes over mutual TLS under the cluster CA; `gatehouse cluster certs` makes a CA and node certificates. "+
			"Only for a test on loopback: cluster.insecure: true (--cluster-insecure true), and anything that reaches cluster.listen is heard")
	case n > 0 && n < len(files):
		for i, f := range files {
			if f == "" {
				return c.invalid(clusterTLSKeys[i], fmt.Sprintf("must be set with %s: the CA file, this node's certificate and its key go together",
					strings.Join(setKeys(files), " and ")))
			}
		}
	case n > 0 && c.Cluster.Insecure:
		return c.invalid("cluster.insecure", "must not be true with cluster.tls set: the node transport is either mutual TLS or insecure")
	}
	return nil
}

// setKeys names the cluster.tls keys whose files are set.
func setKeys(files []string) []string {
	var out []string
	for i, f := range files {
		if f != "" {
			out = append(out, clusterTLSKeys[i])
		}
	}
	return out
}

// transportSecurity loads the node transport's TLS, checked against the
// host the node advertises, or, with cluster.insecure, warns that the
// transport is open. The error names the keys.
func transportSecurity(cfg clusterConfig, lg *slog.Logger) ([]transport.Option, *transport.TLS, error) {
	if cfg.Insecure {
		lg.Warn("cluster transport without TLS (cluster.insecure): any process that reaches cluster.listen can admit requests "+
			"on any key's hour, read any blob and make this node pull blobs; use it on loopback for tests only, "+
			"and set cluster.tls.{ca_file,cert_file,key_file} everywhere else", "listen", cfg.Listen)
		return nil, nil, nil
	}
	t, err := transport.LoadTLS(cfg.TLS.CAFile, cfg.TLS.CertFile, cfg.TLS.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster.tls (ca_file %s, cert_file %s, key_file %s): %w", cfg.TLS.CAFile, cfg.TLS.CertFile, cfg.TLS.KeyFile, err)
	}
	if left := time.Until(t.NotAfter()); left < 30*24*time.Hour {
		lg.Warn("cluster certificate expires soon: renew it and restart the nodes one at a time (docs/cluster.md, Trust model)",
			"cert_file", cfg.TLS.CertFile, "not_after", t.NotAfter().UTC().Format(time.RFC3339))
	}
	return []transport.Option{transport.WithTLS(t)}, t, nil
}

// verifyAdvertised checks that the node certificate names the host of
// addr, the address the transport advertises (cluster.listen's host,
// resolved to the IP it listens on): the other nodes check it when they
// dial. Nothing to check without TLS.
func verifyAdvertised(cfg clusterConfig, t *transport.TLS, addr string) error {
	if t == nil {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("cluster transport address %q: %w", addr, err)
	}
	if err := t.VerifyHost(host); err != nil {
		return fmt.Errorf("cluster.tls.cert_file %s: the other nodes reach this one at %s (cluster.listen %s), which the certificate "+
			"must name (make it with gatehouse cluster certs --hosts): %w", cfg.TLS.CertFile, host, cfg.Listen, err)
	}
	return nil
}

// probeMembers checks, before this node joins, that the live members
// accept its certificate and present ones the CA signed: a node with a
// certificate of another CA stops here instead of taking shards that no
// member can reach. Members out of reach are skipped (a dead member's
// lease has not run out yet); no member: nothing to probe.
func probeMembers(ctx context.Context, t *transport.TLS, members []cluster.Member, self string) error {
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		if m.ID == self || m.Addr == "" {
			continue
		}
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if err := t.Probe(pctx, m.Addr); errors.Is(err, transport.ErrPeerRefused) {
				errs[i] = fmt.Errorf("member %s: %w; every node needs a certificate signed by a CA in every node's cluster.tls.ca_file", m.ID, err)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// dnsNameRe: a DNS name for a certificate (letters, digits, '-', dots;
// a leading "*." for a wildcard).
var dnsNameRe = regexp.MustCompile(`^(\*\.)?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// runCluster runs gatehouse cluster SUBCOMMAND.
func runCluster(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "certs" {
		return runClusterCerts(args[1:], stdout, stderr)
	}
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help") {
		fmt.Fprintln(stdout, subcommands["cluster certs"])
		return errHelp
	}
	return fmt.Errorf("gatehouse cluster: want a subcommand: certs\n\n%s", subcommands["cluster certs"])
}

// runClusterCerts is gatehouse cluster certs: a CA and node certificates
// for the node transport.
func runClusterCerts(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("cluster certs", args, stdout, stderr)
	dir := fs.String("dir", "", "directory to write the files into (created if absent; existing files are never replaced)")
	nodes := fs.String("nodes", "", "node names, comma-separated: one certificate each (NODE.pem, NODE-key.pem)")
	hosts := fs.String("hosts", "127.0.0.1,::1,localhost", "IP addresses and DNS names of cluster.listen, comma-separated, that every node certificate names")
	valid := fs.Duration("valid", 365*24*time.Hour, "how long the node certificates are valid (a new CA: twice as long)")
	caFile := fs.String("ca-file", "", "an existing CA certificate to issue the node certificates under (with --ca-key-file; default: a new CA)")
	caKey := fs.String("ca-key-file", "", "the existing CA's private key")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (gatehouse cluster certs -h lists the flags)", fs.Arg(0))
	}
	names := splitList(*nodes)
	switch {
	case *dir == "":
		return errors.New("--dir: must be set: the directory to write the certificates into")
	case len(names) == 0:
		return errors.New("--nodes: must name at least one node, e.g. --nodes node1,node2,node3")
	case len(splitList(*hosts)) == 0:
		return errors.New("--hosts: must name at least one IP address or DNS name")
	case *valid < time.Hour:
		return fmt.Errorf("--valid=%s: must be at least 1h", *valid)
	case (*caFile == "") != (*caKey == ""):
		return errors.New("--ca-file and --ca-key-file: give both (an existing CA) or neither (a new one)")
	}
	for _, n := range names {
		if !nodeIDRe.MatchString(n) {
			return fmt.Errorf("--nodes: %q must be 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit", n)
		}
	}
	for _, h := range splitList(*hosts) {
		if ip := net.ParseIP(h); ip == nil && !dnsNameRe.MatchString(h) {
			return fmt.Errorf("--hosts: %q is neither an IP address nor a DNS name", h)
		}
	}
	written, err := transport.WriteCerts(*dir, transport.CertOptions{Nodes: names, Hosts: splitList(*hosts), Valid: *valid,
		CAFile: *caFile, CAKeyFile: *caKey})
	if err != nil {
		return err
	}
	for _, p := range written {
		fmt.Fprintln(stdout, "wrote", p)
	}
	return nil
}

// probeMembers reads the live members from etcd and probes them
// (probeMembers) before this node joins; nothing with cluster.insecure.
func (c *clusterRun) probeMembers(ctx context.Context) error {
	if c.tls == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout.d)
	defer cancel()
	prefix := c.cfg.Prefix + "/members/"
	resp, err := c.cli.Get(rctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("cluster: etcd at %s: read the members %s: %w", c.endpoints(), prefix, err)
	}
	var ms []cluster.Member
	for _, kv := range resp.Kvs {
		ms = append(ms, cluster.Member{ID: strings.TrimPrefix(string(kv.Key), prefix), Addr: string(kv.Value)})
	}
	if err := probeMembers(ctx, c.tls, ms, c.cfg.NodeID); err != nil {
		return fmt.Errorf("cluster: not joining: %w", err)
	}
	return nil
}
