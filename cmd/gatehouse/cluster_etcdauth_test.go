package main

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/crypto/argon2"

	"gatehouse/actors/cluster/etcdtest"
	"gatehouse/actors/cluster/transport"
)

// forgedUserEntry is what a client of etcd without the master key can
// write into the replicated log: one batch holding a user record (type 2)
// with role admin and a password hash whose password it knows, in the
// log's pre-MAC entry format (version 1) with a valid CRC-32C, or in the
// current one (version 2) with a MAC it had to guess.
func forgedUserEntry(t *testing.T, email, password string, version byte) []byte {
	t.Helper()
	salt := []byte("0123456789abcdef")
	b64 := base64.RawStdEncoding
	phc := fmt.Sprintf("$argon2id$v=%d$m=19456,t=2,p=1$%s$%s", argon2.Version, b64.EncodeToString(salt),
		b64.EncodeToString(argon2.IDKey([]byte(password), salt, 2, 19*1024, 1, 32)))
	rec := fmt.Sprintf(`{"v":1,"id":%q,"email":%q,"role":"admin","plan":"premium","license_active":true,"created_at":%d,"password_hash":%q}`,
		uuid.New(), email, time.Now().Unix(), phc)
	batch := binary.AppendUvarint(nil, 1)
	batch = append(batch, 2)
	batch = binary.AppendUvarint(batch, uint64(len(rec)))
	batch = append(batch, rec...)
	batch = binary.BigEndian.AppendUint32(batch, crc32.Checksum(batch, crc32.MakeTable(crc32.Castagnoli)))
	entry := append([]byte{version, 0}, batch...)
	if version == 2 {
		entry = append(entry, make([]byte, 32)...) // a MAC it cannot compute
	}
	return entry
}

// TestClusterForgedLogEntry: a client of etcd appends user records with
// role admin to the replicated log (a node's writer name and a made-up
// one; the old entry format with its CRC recomputed, and the current one
// with a made-up MAC). No node applies them (their admin cannot log in
// anywhere), each node warns, and both keep serving and applying the
// genuine entries written after them. No genuine value in etcd holds a
// password hash in the clear.
func TestClusterForgedLogEntry(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	masterKey := hex.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	a := startClusterNode(t, "a", etcd.Endpoints(), masterKey, nil)
	b := startClusterNode(t, "b", etcd.Endpoints(), masterKey, nil)
	admin := newClient(a.c.api)
	admin.login(t, adminEmail, adminPassword)

	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	forged := map[string]bool{}
	for key, v := range map[string][]byte{
		"/gatehouse/wal/log/a/00000000000000000777":        forgedUserEntry(t, "evil@example.com", "evil password 1", 1),
		"/gatehouse/wal/log/intruder/00000000000000000001": forgedUserEntry(t, "evil2@example.com", "evil password 2", 2),
	} {
		if _, err := cli.Put(ctx, key, string(v)); err != nil {
			t.Fatal(err)
		}
		forged[key] = true
	}
	expect(t, "create user after the forgeries", 201)(admin.do("POST", "/api/users", map[string]any{
		"email": "dev@example.com", "password": "user-password-1", "plan": "standard", "licenseActive": true,
	}, nil, nil))
	onB := newClient(b.c.api)
	if !eventually(10*time.Second, func() bool {
		code, err := onB.do("POST", "/api/auth/login", map[string]string{"email": "dev@example.com", "password": "user-password-1"}, nil, nil)
		return err == nil && code == 200
	}) {
		t.Fatalf("b did not apply the genuine user created after the forged entries:\n%s", b.c.logs.String())
	}
	// The replicated log (and everything else in etcd) holds no password
	// hash in the clear: the admin's and dev's are sealed.
	all, err := cli.Get(ctx, "/gatehouse/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range all.Kvs {
		if strings.Contains(string(kv.Value), "$argon2id$") && !forged[string(kv.Key)] {
			t.Errorf("etcd key %s holds a password hash in the clear", kv.Key)
		}
	}
	for _, n := range []*clusterNode{a, b} {
		for _, cred := range [][2]string{{"evil@example.com", "evil password 1"}, {"evil2@example.com", "evil password 2"}} {
			code, err := newClient(n.c.api).do("POST", "/api/auth/login", map[string]string{"email": cred[0], "password": cred[1]}, nil, nil)
			if err != nil || code != 401 {
				t.Errorf("node %s: login as the forged admin %s = %d, %v; want 401", n.id, cred[0], code, err)
			}
		}
		if logs := n.c.logs.String(); strings.Count(logs, "refused an unauthenticated entry") != 2 {
			t.Errorf("node %s: want one warning per forged writer (a, intruder):\n%s", n.id, warnings(logs))
		}
	}
}

// TestClusterEtcdTLSAndAuth: a node reaches an etcd member that requires
// client certificates and user authentication with cluster.etcd's
// certificate and user; without the certificate, with a wrong password,
// or with an https endpoint and no CA, it does not start and says why.
func TestClusterEtcdTLSAndAuth(t *testing.T) {
	dir := t.TempDir()
	if _, err := transport.WriteCerts(dir, transport.CertOptions{Nodes: []string{"etcd", "root", "gatehouse"}, Hosts: []string{"127.0.0.1"}, Valid: time.Hour}); err != nil {
		t.Fatal(err)
	}
	pem := func(f string) string { return filepath.Join(dir, f) }
	ca := pem(transport.CAFile)
	etcd := etcdtest.Start(t, 1, etcdtest.WithClientTLS(pem(transport.NodeCertFile("etcd")), pem(transport.NodeKeyFile("etcd")), ca))
	ep := etcd.Endpoint(0)
	if !strings.HasPrefix(ep, "https://") {
		t.Fatalf("endpoint %s is not https", ep)
	}
	tlsCfg, err := etcdClientTLS(clusterEtcdConfig{CAFile: ca, CertFile: pem(transport.NodeCertFile("root")), KeyFile: pem(transport.NodeKeyFile("root"))})
	if err != nil {
		t.Fatal(err)
	}
	enableEtcdAuth(t, ep, tlsCfg)

	masterKey := hex.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	etcdCfg := map[string]any{"ca_file": ca, "cert_file": pem(transport.NodeCertFile("gatehouse")), "key_file": pem(transport.NodeKeyFile("gatehouse")),
		"username": "gatehouse", "password": "etcd-password-1"}
	n := startClusterNode(t, "a", []string{ep}, masterKey, map[string]any{"cluster": map[string]any{
		"etcd_endpoints": []string{ep}, "node_id": "a", "listen": "127.0.0.1:0", "insecure": true, "etcd": etcdCfg,
	}})
	if !eventually(10*time.Second, func() bool { return strings.Contains(n.c.logs.String(), `"msg":"joined the cluster"`) }) {
		t.Fatalf("the node did not join through the secured etcd:\n%s", n.c.logs.String())
	}
	newClient(n.c.api).login(t, adminEmail, adminPassword)
	if strings.Contains(n.c.logs.String(), "etcd-password-1") {
		t.Error("the etcd password is in the node's log")
	}

	// The operations helpers reach it through the same settings' variables.
	helperEnv := []string{"GATEHOUSE_ETCD_CA_FILE=" + ca, "GATEHOUSE_ETCD_CERT_FILE=" + pem(transport.NodeCertFile("root")),
		"GATEHOUSE_ETCD_KEY_FILE=" + pem(transport.NodeKeyFile("root")), "GATEHOUSE_ETCD_USERNAME=root", "GATEHOUSE_ETCD_PASSWORD=root-password"}
	if code, stdout, stderr := runSplit(t, "", helperEnv, "etcd", "member", "list", "--endpoints", ep, "--timeout", "60s"); code != 0 || !strings.Contains(stdout, ep) {
		t.Errorf("etcd member list = %d:\n%s%s", code, stdout, stderr)
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	if code, stdout, stderr := runSplit(t, "", helperEnv, "etcd", "snapshot", "save", "--endpoints", ep, "--timeout", "60s", backup); code != 0 || !strings.Contains(stdout, "saved "+backup) {
		t.Errorf("etcd snapshot save = %d:\n%s%s", code, stdout, stderr)
	}

	without := func(drop ...string) map[string]any {
		m := map[string]any{}
		for k, v := range etcdCfg {
			m[k] = v
		}
		for _, k := range drop {
			delete(m, k)
		}
		return m
	}
	wrong := without()
	wrong["password"] = "not-the-password"
	for _, tt := range []struct {
		name string
		etcd map[string]any
		want string
	}{
		{"no etcd settings", map[string]any{}, "cluster.etcd_endpoints " + fmt.Sprintf("%q", ep) + " is https: set cluster.etcd.ca_file"},
		{"wrong password", wrong, "etcd refused this node's credentials"},
		{"no client certificate", without("cert_file", "key_file"), "does it accept this node's client certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := writeConfig(t, t.TempDir(), map[string]any{"cluster": map[string]any{
				"etcd_endpoints": []string{ep}, "node_id": "x", "listen": "127.0.0.1:0", "insecure": true, "etcd": tt.etcd,
			}})
			code, _, stderr := runSplit(t, "", []string{"GATEHOUSE_MASTER_KEY=" + masterKey}, "serve", "--config", cfg)
			if code == 0 || !strings.Contains(stderr, tt.want) {
				t.Errorf("serve = %d, want an error saying %q:\n%s", code, tt.want, stderr)
			}
			if strings.Contains(stderr, "not-the-password") || strings.Contains(stderr, "etcd-password-1") {
				t.Errorf("the etcd password is in the error:\n%s", stderr)
			}
		})
	}
}

// enableEtcdAuth turns etcd's authentication on at ep: a root user and a
// gatehouse user whose role may read and write /gatehouse.
func enableEtcdAuth(t *testing.T, ep string, tlsCfg *tls.Config) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, TLS: tlsCfg, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	steps := []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", "root-password"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "gatehouse", "etcd-password-1"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "gatehouse"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "gatehouse", "/gatehouse", clientv3.GetPrefixRangeEnd("/gatehouse"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserGrantRole(ctx, "gatehouse", "gatehouse"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("enable etcd auth, step %d: %v", i+1, err)
		}
	}
}
