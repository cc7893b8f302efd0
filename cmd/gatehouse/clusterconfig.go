package main

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The cluster.* settings: cluster mode is on when cluster.etcd_endpoints
// is set.

// clusterMode reports whether cluster.etcd_endpoints turns cluster mode on.
func (c *fileConfig) clusterMode() bool { return len(c.Cluster.EtcdEndpoints) > 0 }

var (
	// nodeIDRe: a node id is one segment of etcd keys
	// ({prefix}/members/{id}, the replicated log's {prefix}/wal/log/{id}/).
	nodeIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	// prefixRe: an absolute key path without a trailing slash.
	prefixRe = regexp.MustCompile(`^(/[A-Za-z0-9._-]+)+$`)
)

// splitList parses a comma-separated list (an environment variable or a
// flag), dropping blanks.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// validateCluster checks the cluster.* keys. Without etcd endpoints the
// others must be unset (a node id alone is a cluster that was not
// configured, not a single node).
func (c *fileConfig) validateCluster() error {
	cl := &c.Cluster
	if !c.clusterMode() {
		for _, x := range []struct{ key, v string }{{"cluster.node_id", cl.NodeID}, {"cluster.listen", cl.Listen}} {
			if x.v != "" {
				return c.invalid(x.key, "is set but cluster.etcd_endpoints is not: cluster mode needs the etcd endpoints "+
					"(--etcd-endpoints or GATEHOUSE_ETCD_ENDPOINTS); a single node needs neither")
			}
		}
		return c.validateClusterTLS()
	}
	for _, ep := range cl.EtcdEndpoints {
		if !validEndpoint(ep) {
			return c.invalid("cluster.etcd_endpoints", fmt.Sprintf(`must be etcd client URLs such as "http://10.0.0.1:2379", "https://10.0.0.1:2379" (with cluster.etcd.ca_file) or host:port, comma-separated; %q is not`, ep))
		}
	}
	if err := c.validateClusterEtcd(); err != nil {
		return err
	}
	switch {
	case cl.NodeID == "":
		return c.invalid("cluster.node_id", "must be set in cluster mode: a name unique in the cluster, e.g. --node-id node-1")
	case !nodeIDRe.MatchString(cl.NodeID):
		return c.invalid("cluster.node_id", "must be 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit (it names etcd keys)")
	case cl.Listen == "":
		return c.invalid("cluster.listen", "must be set in cluster mode: host:port where the other nodes reach this one, e.g. --cluster-listen 10.0.0.1:7946")
	case !prefixRe.MatchString(cl.Prefix):
		return c.invalid("cluster.prefix", `must be an etcd key path such as "/gatehouse": '/'-separated segments of letters, digits, '.', '_' or '-', no trailing '/'`)
	case cl.LeaseTTL.d < time.Second || cl.LeaseTTL.d%time.Second != 0:
		return c.invalid("cluster.lease_ttl", "must be a whole number of seconds, at least 1s (etcd leases count in seconds)")
	}
	host, port, err := net.SplitHostPort(cl.Listen)
	n, perr := strconv.Atoi(port)
	if err != nil || host == "" || perr != nil || n < 0 || n > 65535 {
		return c.invalid("cluster.listen", `must be host:port where the other nodes reach this one, e.g. "10.0.0.1:7946" (port 0: any free port, advertised through etcd)`)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return c.invalid("cluster.listen", fmt.Sprintf("must name an address the other nodes can reach, not %s: it is advertised to them as is", host))
	}
	for _, l := range []struct {
		key, host string
		port      int
	}{{"server.port", c.Server.Host, c.Server.Port}, {"gateway.port", c.Gateway.Host, c.Gateway.Port}} {
		if sameSocket(host, n, l.host, l.port) {
			return c.invalid("cluster.listen", fmt.Sprintf("must differ from %s (%d): two listeners cannot share a port", l.key, l.port))
		}
	}
	if h, p, err := net.SplitHostPort(c.Server.MetricsAddr); err == nil {
		if mp, _ := strconv.Atoi(p); sameSocket(host, n, h, mp) {
			return c.invalid("cluster.listen", fmt.Sprintf("must differ from server.metrics_addr (%s): two listeners cannot share a port", c.Server.MetricsAddr))
		}
	}
	if c.masterKey == "" && c.MasterKeyFile == "" {
		return c.invalid("cluster.etcd_endpoints", "turns cluster mode on, where every node must use the same master key: "+
			"set GATEHOUSE_MASTER_KEY (or master_key_file) to it on every node; a key generated per node would not open the others' records")
	}
	return c.validateClusterTLS()
}

// validEndpoint accepts what the etcd client dials: http://host:port,
// https://host:port or host:port (validateClusterEtcd matches the scheme
// with cluster.etcd's TLS).
func validEndpoint(ep string) bool {
	hostPort := ep
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
			return false
		}
		hostPort = u.Host
	}
	host, port, err := net.SplitHostPort(hostPort)
	n, perr := strconv.Atoi(port)
	return err == nil && host != "" && perr == nil && n > 0 && n <= 65535
}
