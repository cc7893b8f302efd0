package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// clusterEtcdConfig is cluster.etcd: how a node authenticates to etcd
// (etcd's own client TLS and user authentication; docs/cluster.md, "Trust
// model"), and whether it accepts the replicated log's entries written
// before they were authenticated.
type clusterEtcdConfig struct {
	// CAFile holds the CA certificate(s) etcd's server certificate is
	// checked against; setting it makes the endpoints https.
	CAFile string `json:"ca_file"`
	// CertFile and KeyFile are this node's client certificate and key,
	// for an etcd started with --client-cert-auth.
	CertFile string `json:"cert_file"`
	KeyFile  string `json:"key_file"`
	// Username and Password log in to an etcd with authentication on.
	Username string `json:"username"`
	Password string `json:"password"`
	// AcceptUnauthenticated applies log entries and loads snapshots
	// written without a MAC (before gatehouse authenticated them), for an
	// upgrade only: docs/decisions.md.
	AcceptUnauthenticated bool `json:"accept_unauthenticated"`
}

// tlsOn reports whether the node speaks TLS to etcd.
func (e clusterEtcdConfig) tlsOn() bool { return e.CAFile != "" || e.CertFile != "" }

// validateClusterEtcd checks cluster.etcd and the endpoints' scheme
// against it.
func (c *fileConfig) validateClusterEtcd() error {
	e := c.Cluster.Etcd
	switch {
	case (e.CertFile == "") != (e.KeyFile == ""):
		return c.invalid("cluster.etcd.cert_file", "and cluster.etcd.key_file go together: the client certificate and its private key")
	case e.CertFile != "" && e.CAFile == "":
		return c.invalid("cluster.etcd.ca_file", "must be set with cluster.etcd.cert_file: the CA that signed etcd's server certificate")
	case (e.Username == "") != (e.Password == ""):
		return c.invalid("cluster.etcd.username", "and cluster.etcd.password go together (GATEHOUSE_ETCD_USERNAME, GATEHOUSE_ETCD_PASSWORD)")
	}
	for _, f := range []struct{ key, path string }{
		{"cluster.etcd.ca_file", e.CAFile}, {"cluster.etcd.cert_file", e.CertFile}, {"cluster.etcd.key_file", e.KeyFile},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return c.invalid(f.key, fmt.Sprintf("must name a readable PEM file: %v", err))
		}
	}
	for _, ep := range c.Cluster.EtcdEndpoints {
		https := strings.HasPrefix(ep, "https://")
		switch {
		case https && !e.tlsOn():
			return c.invalid("cluster.etcd_endpoints", fmt.Sprintf("%q is https: set cluster.etcd.ca_file (--etcd-ca-file) to the CA of etcd's server certificate", ep))
		case !https && e.tlsOn():
			return c.invalid("cluster.etcd_endpoints", fmt.Sprintf("must all be https:// URLs when cluster.etcd TLS is configured; %q is not", ep))
		}
	}
	return nil
}

// etcdClientTLS returns the etcd client's TLS config: nil without
// cluster.etcd.ca_file.
func etcdClientTLS(e clusterEtcdConfig) (*tls.Config, error) {
	if !e.tlsOn() {
		return nil, nil
	}
	pem, err := os.ReadFile(e.CAFile)
	if err != nil {
		return nil, fmt.Errorf("cluster.etcd.ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("cluster.etcd.ca_file %s: no PEM certificate in it", e.CAFile)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if e.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(e.CertFile, e.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cluster.etcd.cert_file %s, cluster.etcd.key_file %s: %w", e.CertFile, e.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// errEtcdAuth explains a refused connection to a secured etcd.
var errEtcdAuth = errors.New("etcd refused this node's credentials: check cluster.etcd.{ca_file,cert_file,key_file} " +
	"(--etcd-ca-file, --etcd-cert-file, --etcd-key-file) and cluster.etcd.{username,password} (GATEHOUSE_ETCD_USERNAME, GATEHOUSE_ETCD_PASSWORD)")

// isEtcdAuthError reports whether etcd refused the node's credentials: a
// wrong or missing user or password, or a TLS handshake it failed.
func isEtcdAuthError(err error) bool {
	s := err.Error()
	for _, m := range []string{"authentication failed", "user name is empty", "invalid auth token",
		"permission denied", "certificate", "tls:", "authentication handshake failed", "user name not found"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// etcdAccess is how the `gatehouse etcd snapshot|member` helpers reach a
// secured etcd: the variables of serve's cluster.etcd.* (the helpers have
// no config file).
type etcdAccess struct {
	tls            *tls.Config
	user, password string
}

// etcdAccessFromEnv reads GATEHOUSE_ETCD_{CA_FILE,CERT_FILE,KEY_FILE,
// USERNAME,PASSWORD}.
func etcdAccessFromEnv(getenv func(string) string) (etcdAccess, error) {
	e := clusterEtcdConfig{
		CAFile: getenv("GATEHOUSE_ETCD_CA_FILE"), CertFile: getenv("GATEHOUSE_ETCD_CERT_FILE"), KeyFile: getenv("GATEHOUSE_ETCD_KEY_FILE"),
		Username: getenv("GATEHOUSE_ETCD_USERNAME"), Password: getenv("GATEHOUSE_ETCD_PASSWORD"),
	}
	if (e.CertFile == "") != (e.KeyFile == "") || (e.CertFile != "" && e.CAFile == "") {
		return etcdAccess{}, errors.New("GATEHOUSE_ETCD_CERT_FILE and GATEHOUSE_ETCD_KEY_FILE go together, with GATEHOUSE_ETCD_CA_FILE")
	}
	if (e.Username == "") != (e.Password == "") {
		return etcdAccess{}, errors.New("GATEHOUSE_ETCD_USERNAME and GATEHOUSE_ETCD_PASSWORD go together")
	}
	t, err := etcdClientTLS(e)
	if err != nil {
		return etcdAccess{}, err
	}
	return etcdAccess{tls: t, user: e.Username, password: e.Password}, nil
}

// helperDialMax bounds how long a helper waits for its connection (TLS
// handshake and authentication included) when its --timeout allows more
// than etcdDialTimeout.
const helperDialMax = 30 * time.Second

// config is the client config of a helper for endpoints, bound by ctx: the
// connection may take as long as ctx's deadline leaves (at least
// etcdDialTimeout, at most helperDialMax), so an operator's --timeout also
// covers a slow handshake on a loaded machine.
func (a etcdAccess) config(ctx context.Context, endpoints []string) clientv3.Config {
	dial := etcdDialTimeout
	if d, ok := ctx.Deadline(); ok {
		dial = max(dial, min(time.Until(d), helperDialMax))
	}
	return clientv3.Config{Endpoints: endpoints, DialTimeout: dial, Logger: zap.NewNop(), Context: ctx,
		TLS: a.tls, Username: a.user, Password: a.password}
}
