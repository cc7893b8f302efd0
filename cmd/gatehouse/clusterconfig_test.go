package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const testMasterKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// TestParseServeCluster: the cluster.* keys from the file, the
// environment and the flags, and the validation errors of cluster mode.
func TestParseServeCluster(t *testing.T) {
	dir := t.TempDir()
	file := func(body string) string {
		p := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// caFile stands for "CA" in a case's file and arguments: a file that
	// exists, for the cluster.etcd file keys.
	caFile := filepath.Join(dir, "etcd-ca.pem")
	if err := os.WriteFile(caFile, []byte("PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	// on is the environment of a valid cluster node; each case changes it.
	on := func(kv ...string) map[string]string {
		env := map[string]string{
			"GATEHOUSE_ETCD_ENDPOINTS": "http://127.0.0.1:2379", "GATEHOUSE_NODE_ID": "node-1",
			"GATEHOUSE_CLUSTER_LISTEN": "127.0.0.1:7946", "GATEHOUSE_MASTER_KEY": testMasterKey,
			"GATEHOUSE_CLUSTER_INSECURE": "true",
		}
		for i := 0; i < len(kv); i += 2 {
			env[kv[i]] = kv[i+1]
		}
		return env
	}
	tests := []struct {
		name    string
		file    string
		args    []string
		env     map[string]string
		wantErr string
		check   func(t *testing.T, c fileConfig)
	}{
		{name: "off by default", check: func(t *testing.T, c fileConfig) {
			cl := c.Cluster
			if c.clusterMode() || cl.Prefix != "/gatehouse" || cl.LeaseTTL.d != 3*time.Second ||
				cl.RequestTimeout.d != 2*time.Second || cl.ForwardTimeout.d != 500*time.Millisecond {
				t.Errorf("cluster defaults = %+v", cl)
			}
		}},
		{name: "from the environment", env: on("GATEHOUSE_ETCD_ENDPOINTS", " http://10.0.0.1:2379, 10.0.0.2:2379 ,,"),
			check: func(t *testing.T, c fileConfig) {
				cl := c.Cluster
				if !c.clusterMode() || !slices.Equal(cl.EtcdEndpoints, []string{"http://10.0.0.1:2379", "10.0.0.2:2379"}) ||
					cl.NodeID != "node-1" || cl.Listen != "127.0.0.1:7946" {
					t.Errorf("cluster = %+v", cl)
				}
			}},
		{name: "flags beat the environment", args: []string{"--etcd-endpoints", "127.0.0.1:3379", "--node-id", "b", "--cluster-listen", "localhost:0"}, env: on(),
			check: func(t *testing.T, c fileConfig) {
				cl := c.Cluster
				if !slices.Equal(cl.EtcdEndpoints, []string{"127.0.0.1:3379"}) || cl.NodeID != "b" || cl.Listen != "localhost:0" {
					t.Errorf("cluster = %+v", cl)
				}
			}},
		{name: "from the file, with a key file",
			file: `{"master_key_file":"/k","cluster":{"etcd_endpoints":["http://e1:2379","http://e2:2379"],"node_id":"n.2","listen":"10.1.2.3:7000","prefix":"/prod/gh","lease_ttl":"2s","request_timeout":"1s","forward_timeout":"200ms","tls":{"ca_file":"/c/ca.pem","cert_file":"/c/n.pem","key_file":"/c/n-key.pem"}}}`,
			check: func(t *testing.T, c fileConfig) {
				cl := c.Cluster
				if len(cl.EtcdEndpoints) != 2 || cl.NodeID != "n.2" || cl.Listen != "10.1.2.3:7000" || cl.Prefix != "/prod/gh" ||
					cl.LeaseTTL.d != 2*time.Second || cl.RequestTimeout.d != time.Second || cl.ForwardTimeout.d != 200*time.Millisecond ||
					cl.TLS != (clusterTLSConfig{"/c/ca.pem", "/c/n.pem", "/c/n-key.pem"}) || cl.Insecure {
					t.Errorf("cluster = %+v", cl)
				}
				attrs := c.masked()
				if !strings.Contains(attrs, `"etcd_endpoints":["http://e1:2379","http://e2:2379"]`) || !strings.Contains(attrs, `"lease_ttl":"2s"`) {
					t.Errorf("effective config lacks the cluster section: %s", attrs)
				}
			}},
		{name: "no node id", env: on("GATEHOUSE_NODE_ID", ""), wantErr: "config: cluster.node_id must be set in cluster mode"},
		{name: "node id not a key segment", args: []string{"--node-id", "a/b"}, env: on(),
			wantErr: "--node-id=a/b: cluster.node_id must be 1 to 63 letters, digits, '.', '_' or '-'"},
		{name: "node id too long", env: on("GATEHOUSE_NODE_ID", strings.Repeat("n", 64)), wantErr: "cluster.node_id must be 1 to 63"},
		{name: "no listen address", env: on("GATEHOUSE_CLUSTER_LISTEN", ""), wantErr: "config: cluster.listen must be set in cluster mode"},
		{name: "listen without a host", env: on("GATEHOUSE_CLUSTER_LISTEN", ":7946"), wantErr: "GATEHOUSE_CLUSTER_LISTEN=:7946: cluster.listen must be host:port"},
		{name: "listen not host:port", env: on("GATEHOUSE_CLUSTER_LISTEN", "7946"), wantErr: "cluster.listen must be host:port"},
		{name: "listen on every address", env: on("GATEHOUSE_CLUSTER_LISTEN", "0.0.0.0:7946"),
			wantErr: "cluster.listen must name an address the other nodes can reach, not 0.0.0.0"},
		{name: "listen on the api port", env: on("GATEHOUSE_CLUSTER_LISTEN", "127.0.0.1:8080"),
			wantErr: "cluster.listen must differ from server.port (8080)"},
		{name: "listen on the metrics port", file: `{"server":{"metrics_addr":"127.0.0.1:7946"}}`, env: on(),
			wantErr: "cluster.listen must differ from server.metrics_addr (127.0.0.1:7946)"},
		{name: "https endpoint without a CA", env: on("GATEHOUSE_ETCD_ENDPOINTS", "https://e:2379"),
			wantErr: `GATEHOUSE_ETCD_ENDPOINTS=https://e:2379: cluster.etcd_endpoints "https://e:2379" is https: set cluster.etcd.ca_file (--etcd-ca-file)`},
		{name: "etcd TLS and auth", file: `{"cluster":{"etcd_endpoints":["https://e1:2379"],"etcd":{"ca_file":"CA","cert_file":"CA","key_file":"CA","username":"gh","password":"etcd-secret-1"}}}`,
			env: on("GATEHOUSE_ETCD_ENDPOINTS", ""),
			check: func(t *testing.T, c fileConfig) {
				e := c.Cluster.Etcd
				if e.Username != "gh" || e.Password != "etcd-secret-1" || !e.tlsOn() || e.AcceptUnauthenticated {
					t.Errorf("cluster.etcd = %+v", e)
				}
				if attrs := c.masked(); strings.Contains(attrs, "etcd-secret-1") || !strings.Contains(attrs, `"username":"gh"`) {
					t.Errorf("effective config shows the etcd password, or not the user: %s", attrs)
				}
			}},
		{name: "etcd password from the environment", env: on("GATEHOUSE_ETCD_USERNAME", "gh", "GATEHOUSE_ETCD_PASSWORD", "etcd-secret-1",
			"GATEHOUSE_ETCD_ACCEPT_UNAUTHENTICATED", "true"),
			check: func(t *testing.T, c fileConfig) {
				if e := c.Cluster.Etcd; e.Username != "gh" || e.Password != "etcd-secret-1" || !e.AcceptUnauthenticated {
					t.Errorf("cluster.etcd = %+v", e)
				}
			}},
		{name: "etcd user without a password", env: on("GATEHOUSE_ETCD_USERNAME", "gh"),
			wantErr: "GATEHOUSE_ETCD_USERNAME=gh: cluster.etcd.username and cluster.etcd.password go together"},
		{name: "etcd certificate without its key", args: []string{"--etcd-ca-file", "CA", "--etcd-cert-file", "CA"}, env: on("GATEHOUSE_ETCD_ENDPOINTS", "https://e:2379"),
			wantErr: "cluster.etcd.cert_file and cluster.etcd.key_file go together"},
		{name: "etcd CA file missing", args: []string{"--etcd-ca-file", "/nonexistent/ca.pem"}, env: on("GATEHOUSE_ETCD_ENDPOINTS", "https://e:2379"),
			wantErr: "--etcd-ca-file=/nonexistent/ca.pem: cluster.etcd.ca_file must name a readable PEM file"},
		{name: "http endpoint with etcd TLS", args: []string{"--etcd-ca-file", "CA"}, env: on(),
			wantErr: `cluster.etcd_endpoints must all be https:// URLs when cluster.etcd TLS is configured; "http://127.0.0.1:2379" is not`},
		{name: "endpoint without a port", args: []string{"--etcd-endpoints", "127.0.0.1:2379,etcd"}, env: on(),
			wantErr: `--etcd-endpoints=127.0.0.1:2379,etcd: cluster.etcd_endpoints must be etcd client URLs`},
		{name: "endpoint with a path", env: on("GATEHOUSE_ETCD_ENDPOINTS", "http://e:2379/v3"), wantErr: `"http://e:2379/v3" is not`},
		{name: "endpoints not a list", file: `{"cluster":{"etcd_endpoints":"e:2379"}}`,
			wantErr: "config FILE:1:30: cluster.etcd_endpoints: want an array, got a string"},
		{name: "unknown cluster key", file: `{"cluster":{"etcd2":[]}}`,
			wantErr: `unknown key "cluster.etcd2"; valid keys here: etcd_endpoints, node_id, listen, prefix, lease_ttl, request_timeout, forward_timeout`},
		{name: "relative prefix", file: `{"cluster":{"prefix":"gatehouse"}}`, env: on(), wantErr: `config FILE: cluster.prefix must be an etcd key path such as "/gatehouse"`},
		{name: "prefix with a trailing slash", file: `{"cluster":{"prefix":"/gatehouse/"}}`, env: on(), wantErr: "cluster.prefix must be an etcd key path"},
		{name: "lease under a second", file: `{"cluster":{"lease_ttl":"500ms"}}`, env: on(),
			wantErr: "config FILE: cluster.lease_ttl must be a whole number of seconds, at least 1s"},
		{name: "lease not whole seconds", file: `{"cluster":{"lease_ttl":"2500ms"}}`, env: on(), wantErr: "cluster.lease_ttl must be a whole number of seconds"},
		{name: "zero request timeout", file: `{"cluster":{"request_timeout":"0s"}}`, wantErr: "config FILE: cluster.request_timeout must be > 0"},
		{name: "bad forward timeout", file: `{"cluster":{"forward_timeout":"soon"}}`, wantErr: `cluster.forward_timeout must be a duration such as "24h" or "500ms", not "soon"`},
		{name: "no master key", env: on("GATEHOUSE_MASTER_KEY", ""),
			wantErr: "GATEHOUSE_ETCD_ENDPOINTS=http://127.0.0.1:2379: cluster.etcd_endpoints turns cluster mode on, where every node must use the same master key: set GATEHOUSE_MASTER_KEY (or master_key_file)"},
		{name: "master key file instead", args: []string{"--master-key-file", "/etc/gatehouse/master.key"}, env: on("GATEHOUSE_MASTER_KEY", ""),
			check: func(t *testing.T, c fileConfig) {
				if !c.clusterMode() || c.MasterKeyFile != "/etc/gatehouse/master.key" {
					t.Errorf("cluster mode %v, master key file %q", c.clusterMode(), c.MasterKeyFile)
				}
			}},
		{name: "node id without endpoints", args: []string{"--node-id", "n1"},
			wantErr: "--node-id=n1: cluster.node_id is set but cluster.etcd_endpoints is not: cluster mode needs the etcd endpoints"},
		{name: "listen without endpoints", file: `{"cluster":{"listen":"127.0.0.1:7946"}}`,
			wantErr: "config FILE: cluster.listen is set but cluster.etcd_endpoints is not"},
		{name: "neither TLS nor insecure", env: on("GATEHOUSE_CLUSTER_INSECURE", ""),
			wantErr: "config: cluster.tls.ca_file must be set in cluster mode, with cluster.tls.cert_file and cluster.tls.key_file " +
				"(--cluster-tls-ca-file, --cluster-tls-cert-file, --cluster-tls-key-file or GATEHOUSE_CLUSTER_TLS_CA_FILE, _CERT_FILE, _KEY_FILE): " +
				"every message between nodes goes over mutual TLS under the cluster CA; `gatehouse cluster certs` makes a CA and node certificates. " +
				"Only for a test on loopback: cluster.insecure: true (--cluster-insecure true)"},
		{name: "insecure false", env: on("GATEHOUSE_CLUSTER_INSECURE", "false"), wantErr: "config: cluster.tls.ca_file must be set in cluster mode"},
		{name: "insecure not a bool", env: on("GATEHOUSE_CLUSTER_INSECURE", "yes"), wantErr: "GATEHOUSE_CLUSTER_INSECURE=yes: cluster.insecure must be true or false"},
		{name: "TLS without its key", args: []string{"--cluster-tls-ca-file", "ca.pem", "--cluster-tls-cert-file", "n.pem"}, env: on("GATEHOUSE_CLUSTER_INSECURE", ""),
			wantErr: "config: cluster.tls.key_file must be set with cluster.tls.ca_file and cluster.tls.cert_file"},
		{name: "TLS and insecure", env: on("GATEHOUSE_CLUSTER_TLS_CA_FILE", "ca.pem", "GATEHOUSE_CLUSTER_TLS_CERT_FILE", "n.pem", "GATEHOUSE_CLUSTER_TLS_KEY_FILE", "k.pem"),
			wantErr: "GATEHOUSE_CLUSTER_INSECURE=true: cluster.insecure must not be true with cluster.tls set"},
		{name: "TLS from the environment", env: on("GATEHOUSE_CLUSTER_INSECURE", "", "GATEHOUSE_CLUSTER_TLS_CA_FILE", "ca.pem", "GATEHOUSE_CLUSTER_TLS_CERT_FILE", "n.pem", "GATEHOUSE_CLUSTER_TLS_KEY_FILE", "k.pem"),
			check: func(t *testing.T, c fileConfig) {
				if c.Cluster.TLS != (clusterTLSConfig{"ca.pem", "n.pem", "k.pem"}) || c.Cluster.Insecure {
					t.Errorf("cluster.tls = %+v, insecure %v", c.Cluster.TLS, c.Cluster.Insecure)
				}
			}},
		{name: "TLS without endpoints", file: `{"cluster":{"tls":{"ca_file":"ca.pem"}}}`,
			wantErr: "config FILE: cluster.tls.ca_file is set but cluster.etcd_endpoints is not"},
		{name: "insecure without endpoints", args: []string{"--cluster-insecure", "true"},
			wantErr: "--cluster-insecure=true: cluster.insecure is set but cluster.etcd_endpoints is not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append([]string{"--config", file(strings.ReplaceAll(tt.file, `"CA"`, strconv.Quote(caFile)))}, args...)
			}
			for i, a := range args {
				if a == "CA" {
					args[i] = caFile
				}
			}
			getenv := func(k string) string { return tt.env[k] }
			c, err := parseServe("serve", args, getenv, io.Discard, io.Discard)
			if tt.wantErr != "" {
				want := tt.wantErr
				if tt.file != "" {
					want = strings.ReplaceAll(want, "FILE", args[1])
				}
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("parseServe() error = %v, want one containing %q", err, want)
				}
				if strings.Contains(err.Error(), testMasterKey) {
					t.Errorf("parseServe() error = %v shows the master key", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseServe() = %v", err)
			}
			tt.check(t, c)
		})
	}
}
