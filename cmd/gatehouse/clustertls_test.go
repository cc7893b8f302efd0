package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"gatehouse/actors/cluster/etcdtest"
	"gatehouse/actors/cluster/transport"
)

// testCA is the test nodes' cluster CA, made once per test binary and
// kept in memory; each node gets its own copy of the files (clusterTLS).
var testCA struct {
	once      sync.Once
	cert, key []byte
	err       error
}

// clusterTLS writes the cluster CA and a certificate for node id (naming
// 127.0.0.1) into a temp dir of t and returns the cluster.tls section
// naming them.
func clusterTLS(t testing.TB, id string) map[string]any {
	t.Helper()
	testCA.once.Do(func() {
		dir, err := os.MkdirTemp("", "gatehouse-ca-")
		if err != nil {
			testCA.err = err
			return
		}
		defer os.RemoveAll(dir)
		if _, err := transport.WriteCerts(dir, transport.CertOptions{Nodes: []string{"unused"}, Hosts: []string{"127.0.0.1"}, Valid: 24 * time.Hour}); err != nil {
			testCA.err = err
			return
		}
		testCA.cert, testCA.err = os.ReadFile(filepath.Join(dir, transport.CAFile))
		if testCA.err == nil {
			testCA.key, testCA.err = os.ReadFile(filepath.Join(dir, transport.CAKeyFile))
		}
	})
	if testCA.err != nil {
		t.Fatal(testCA.err)
	}
	dir := t.TempDir()
	ca, caKey := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	for p, b := range map[string][]byte{ca: testCA.cert, caKey: testCA.key} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	certs := filepath.Join(dir, "node")
	if _, err := transport.WriteCerts(certs, transport.CertOptions{Nodes: []string{id}, Hosts: []string{"127.0.0.1"}, Valid: 24 * time.Hour,
		CAFile: ca, CAKeyFile: caKey}); err != nil {
		t.Fatal(err)
	}
	return map[string]any{"ca_file": ca, "cert_file": filepath.Join(certs, transport.NodeCertFile(id)),
		"key_file": filepath.Join(certs, transport.NodeKeyFile(id))}
}

// otherCA writes a CA unrelated to the test nodes' and a certificate of
// node id under it; it returns the cluster.tls section.
func otherCA(t testing.TB, id string) map[string]any {
	t.Helper()
	dir := t.TempDir()
	if _, err := transport.WriteCerts(dir, transport.CertOptions{Nodes: []string{id}, Hosts: []string{"127.0.0.1"}, Valid: time.Hour}); err != nil {
		t.Fatal(err)
	}
	return map[string]any{"ca_file": filepath.Join(dir, transport.CAFile), "cert_file": filepath.Join(dir, transport.NodeCertFile(id)),
		"key_file": filepath.Join(dir, transport.NodeKeyFile(id))}
}

// attackerEnv runs TestClusterAttackerProcess as a non-member process:
// its value is an attackSpec (JSON).
const attackerEnv = "GATEHOUSE_TEST_ATTACKER"

// attackSpec is what the non-member process tries against each target
// (a node's cluster address), over the current wire protocol: Admits
// forwarded admissions for KeyID (encodeAdmit, as a node forwards them),
// a blob chunk request for Ref and a copy request naming the attacker's
// own address, as replica's wire format spells them.
type attackSpec struct {
	Targets []string
	KeyID   string
	Admits  int
	Ref     string // hex SHA-256
	TLS     map[string]string
}

// attackResult is what it achieved: answers it got, and the pulls of its
// own blob service (a node fetching from it).
type attackResult struct {
	Admitted, NotOwner, Read, CopyAnswered, Pulls int
	Errors                                        []string
}

// TestClusterAttackerProcess is not a test of its own: run by
// TestClusterNonMemberRefused as a separate process (attackerEnv set),
// it plays a process that reaches --cluster-listen without being a member.
func TestClusterAttackerProcess(t *testing.T) {
	spec := os.Getenv(attackerEnv)
	if spec == "" {
		return // run by TestClusterNonMemberRefused only
	}
	var a attackSpec
	if err := json.Unmarshal([]byte(spec), &a); err != nil {
		t.Fatal(err)
	}
	var opts []transport.Option
	if a.TLS != nil {
		tl, err := transport.LoadTLS(a.TLS["ca_file"], a.TLS["cert_file"], a.TLS["key_file"])
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, transport.WithTLS(tl))
	}
	tr, err := transport.Start("127.0.0.1:0", nil, 500*time.Millisecond, slog.New(slog.DiscardHandler), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var pulls atomic.Int64
	if err := tr.Handle("blob", func(context.Context, []byte) ([]byte, error) {
		pulls.Add(1)
		return []byte{0}, nil // "no copy here"
	}); err != nil {
		t.Fatal(err)
	}
	ref, _ := hex.DecodeString(a.Ref)
	get := binary.AppendUvarint(binary.AppendUvarint(append([]byte{'G'}, ref...), 0), 1<<18)
	cp := append(binary.AppendUvarint(append([]byte{'C'}, ref...), 1000), tr.Addr()...)
	ctx := context.Background()
	var res attackResult
	var mu sync.Mutex
	var wg sync.WaitGroup
	// Everything at once: a refused request costs its whole timeout.
	tally := func(f func() (*int, error)) {
		wg.Go(func() {
			n, err := f()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.Errors = append(res.Errors, err.Error())
			} else if n != nil {
				*n++
			}
		})
	}
	for _, addr := range a.Targets {
		for i := range a.Admits {
			tally(func() (*int, error) {
				v, err := tr.Forward(ctx, addr, a.KeyID, uint64(i+1))
				if err != nil {
					return nil, err
				}
				if v.Code == transport.Admitted || v.Code == transport.Limited {
					return &res.Admitted, nil
				}
				return &res.NotOwner, nil
			})
		}
		tally(func() (*int, error) {
			out, err := tr.Call(ctx, addr, "blob", get, time.Second)
			if err != nil || len(out) < 2 || out[0] != 1 {
				return nil, err
			}
			return &res.Read, nil
		})
		tally(func() (*int, error) {
			if _, err := tr.Call(ctx, addr, "blob", cp, time.Second); err != nil {
				return nil, err
			}
			return &res.CopyAnswered, nil
		})
	}
	wg.Wait()
	time.Sleep(200 * time.Millisecond)
	res.Pulls = int(pulls.Load())
	b, _ := json.Marshal(res)
	fmt.Printf("ATTACK %s\n", b)
}

// attack runs the non-member process with spec and returns its result.
func attack(spec attackSpec) (attackResult, error) {
	var res attackResult
	b, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^TestClusterAttackerProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), attackerEnv+"="+string(b))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return res, fmt.Errorf("attacker process: %w\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^ATTACK (.*)$`).FindSubmatch(out)
	if m == nil {
		return res, fmt.Errorf("attacker process printed no result:\n%s", out)
	}
	return res, json.Unmarshal(m[1], &res)
}

// TestClusterNonMemberRefused: two nodes on mutual TLS (real processes,
// one etcd member). A process that is not a member, speaking the current
// wire protocol to their cluster addresses without a certificate, then
// with a certificate of another CA, is refused: it admits nothing on a
// key (the key's next request still has its whole hour), reads no blob by
// its SHA-256 and makes no node pull from it. A node with a certificate
// of another CA does not join: it stops at start, naming the refusal.
func TestClusterNonMemberRefused(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	up := upstream(t)
	masterKey := hex.EncodeToString([]byte("trusttrusttrusttrusttrusttrust12"))
	const limit = 50
	extra := map[string]any{
		"gateway":  map[string]any{"host": "127.0.0.1", "port": 0, "token": "gw-admin"},
		"services": map[string]any{"stub": map[string]any{"upstream": up}},
		"plans":    map[string]any{"standard": limit, "premium": limit},
	}
	a := startClusterNode(t, "a", etcd.Endpoints(), masterKey, extra)
	b := startClusterNode(t, "b", etcd.Endpoints(), masterKey, extra)
	for _, n := range []*clusterNode{a, b} {
		if !strings.Contains(n.c.logs.String(), `"tls":true`) {
			t.Fatalf("node %s did not start its transport on TLS:\n%s", n.id, n.c.logs.String())
		}
	}
	admin := newClient(a.c.api)
	admin.login(t, adminEmail, adminPassword)
	var k createdKey
	if code, err := admin.do("POST", "/api/keys", map[string]string{"name": "target"}, nil, &k); err != nil || code != 201 {
		t.Fatalf("create key = %d, %v", code, err)
	}
	var m struct{ SHA256 string }
	hdr := map[string]string{"Authorization": "Bearer gw-admin", "X-Gateway-User-Id": "alice"}
	if !eventually(10*time.Second, func() bool { // b may not be a member in a's eyes yet
		code, body := rawDo(t, "POST", a.c.gateway+"/v1/media/upload", []byte("\x89PNG\r\n\x1a\nsecret picture"), hdr)
		return code == 201 && json.Unmarshal(body, &m) == nil
	}) {
		t.Fatalf("media upload on a failed:\n%s", warnings(a.c.logs.String()))
	}

	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/gatehouse/members/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 2 {
		t.Fatalf("members in etcd = %v, %v", resp, err)
	}
	var targets []string
	for _, kv := range resp.Kvs {
		targets = append(targets, string(kv.Value))
	}

	const admits = 10
	var wg sync.WaitGroup
	for _, tc := range []struct {
		name string
		tls  map[string]any
	}{{"no certificate", nil}, {"another CA", otherCA(t, "mallory")}} {
		spec := attackSpec{Targets: targets, KeyID: k.ID, Admits: admits, Ref: m.SHA256}
		if tc.tls != nil {
			spec.TLS = map[string]string{}
			for key, v := range tc.tls {
				spec.TLS[key] = v.(string)
			}
		}
		wg.Go(func() {
			res, err := attack(spec)
			if err != nil {
				t.Error(err)
			} else if res.Admitted != 0 || res.NotOwner != 0 || res.Read != 0 || res.CopyAnswered != 0 || res.Pulls != 0 {
				t.Errorf("%s: a non-member got answers: %+v", tc.name, res)
			}
		})
	}
	wg.Wait()

	// The key's hour is whole: its next request leaves limit-1.
	req, _ := http.NewRequest("GET", b.c.api+"/api/proxy/stub/v1/ping", nil)
	req.Header.Set("X-API-Key", k.Key)
	hr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	hr.Body.Close()
	if rem := hr.Header.Get("X-RateLimit-Remaining"); hr.StatusCode != 200 || rem != strconv.Itoa(limit-1) {
		t.Errorf("the key's next request = %d, remaining %q; want 200 and %d (nothing admitted by the non-member)", hr.StatusCode, rem, limit-1)
	}

	// A node with another CA's certificate does not join.
	cfg := map[string]any{"cluster": map[string]any{"etcd_endpoints": etcd.Endpoints(), "node_id": "c", "listen": "127.0.0.1:0",
		"lease_ttl": fmt.Sprintf("%ds", ttlSeconds), "tls": otherCA(t, "c")}}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 20*time.Second) // a node that joined runs on: killed
	defer rcancel()
	cmd := exec.CommandContext(rctx, bin, "serve", "--config", writeConfig(t, t.TempDir(), cfg))
	cmd.Env = append(environWithout("GATEHOUSE_"), "GATEHOUSE_MASTER_KEY="+masterKey, "GATEHOUSE_ADMIN_EMAIL="+adminEmail,
		"GATEHOUSE_ADMIN_PASSWORD="+adminPassword)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if rctx.Err() != nil || err == nil || !strings.Contains(stderr.String(), "cluster: not joining: member ") ||
		!strings.Contains(stderr.String(), "TLS handshake with a member refused") {
		t.Errorf("a node of another CA = %v (killed after 20s: %v):\n%s", err, rctx.Err() != nil, lastLines(stderr.String(), 10))
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if resp, err := cli.Get(ctx, "/gatehouse/members/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 2 {
		t.Errorf("members after the other CA's node = %v, %v; want 2", resp, err)
	}
}

// TestClusterInsecure: cluster mode without cluster.tls and without
// cluster.insecure does not start, naming the keys; with
// cluster.insecure: true it starts and warns, at every start.
func TestClusterInsecure(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	vars := []string{"GATEHOUSE_ETCD_ENDPOINTS=" + etcd.Endpoint(0), "GATEHOUSE_MASTER_KEY=" + testMasterKey,
		"GATEHOUSE_ADMIN_EMAIL=" + adminEmail, "GATEHOUSE_ADMIN_PASSWORD=" + adminPassword}
	args := []string{"serve", "--config", writeConfig(t, t.TempDir(), nil), "--node-id", "n1", "--cluster-listen", "127.0.0.1:0"}
	code, _, stderr := runSplit(t, "", vars, args...)
	if code == 0 || !strings.Contains(stderr, "cluster.tls.ca_file must be set in cluster mode, with cluster.tls.cert_file and cluster.tls.key_file") ||
		!strings.Contains(stderr, "cluster.insecure: true") {
		t.Errorf("cluster mode without TLS = exit %d:\n%s", code, stderr)
	}
	for range 2 {
		c := startServe(t, "", append(environWithout("GATEHOUSE_"), append(vars, "GATEHOUSE_CLUSTER_INSECURE=true")...), args...)
		var warn struct{ Level, Msg string }
		for _, line := range strings.Split(c.logs.String(), "\n") {
			if strings.Contains(line, "cluster transport without TLS") {
				_ = json.Unmarshal([]byte(line), &warn)
			}
		}
		if warn.Level != "WARN" || !strings.Contains(c.logs.String(), `"tls":false`) {
			t.Errorf("an insecure start logged no WARN (%+v):\n%s", warn, c.logs.String())
		}
		c.stop(t)
	}
}

// docsClusterPath is the cluster guide whose loopback recipe the tests run.
const docsClusterPath = "../../docs/cluster.md"

// TestClusterDocsRecipeTLS: the loopback recipe of docs/cluster.md makes
// the certificates with gatehouse cluster certs as written, and nodes
// started with the TLS flags of its serve loop join on mutual TLS and
// forward admissions to each other.
func TestClusterDocsRecipeTLS(t *testing.T) {
	md, err := os.ReadFile(docsClusterPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(md)
	certs := regexp.MustCompile("(?m)^\\$G cluster certs .*$").FindString(doc)
	serve := regexp.MustCompile("(?m)^  \\$G serve .*(\\n    .*)*$").FindString(doc)
	if certs == "" || serve == "" {
		t.Fatalf("%s: no `$G cluster certs` line, or no `$G serve` loop", docsClusterPath)
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sh := exec.Command("bash", "-c", "set -eu; G="+bin+"; "+certs)
	sh.Dir = dir
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", certs, err, out)
	}
	flags := regexp.MustCompile(`--cluster-tls-[a-z-]+ \S+`).FindAllString(serve, -1)
	if len(flags) != 3 {
		t.Fatalf("the serve loop names %d --cluster-tls-* flags, want 3:\n%s", len(flags), serve)
	}
	etcd := etcdtest.Start(t, 1)
	up := upstream(t)
	var nodes []*child
	for i := 1; i <= 2; i++ {
		args := []string{"serve", "--config", writeConfig(t, t.TempDir(), map[string]any{"services": map[string]any{"stub": map[string]any{"upstream": up}}}),
			"--node-id", fmt.Sprintf("node%d", i), "--cluster-listen", "127.0.0.1:0"}
		for _, f := range flags {
			name, val, _ := strings.Cut(strings.ReplaceAll(f, "$i", strconv.Itoa(i)), " ")
			args = append(args, name, val)
		}
		env := append(environWithout("GATEHOUSE_"), "GATEHOUSE_ETCD_ENDPOINTS="+etcd.Endpoint(0), "GATEHOUSE_MASTER_KEY="+testMasterKey,
			"GATEHOUSE_ADMIN_EMAIL="+adminEmail, "GATEHOUSE_ADMIN_PASSWORD="+adminPassword)
		c := startServe(t, dir, env, args...)
		if !strings.Contains(c.logs.String(), `"tls":true`) {
			t.Fatalf("node%d: no TLS transport:\n%s", i, c.logs.String())
		}
		nodes = append(nodes, c)
	}
	admin := newClient(nodes[0].api)
	admin.login(t, adminEmail, adminPassword)
	var k createdKey
	if code, err := admin.do("POST", "/api/keys", map[string]string{"name": "recipe"}, nil, &k); err != nil || code != 201 {
		t.Fatalf("create key = %d, %v", code, err)
	}
	// Both nodes admit the key's requests: one of them forwards to the
	// other, the key's owner, over TLS.
	for _, c := range nodes {
		cl := newClient(c.api)
		var code int
		if !eventually(5*time.Second, func() bool {
			code, _ = cl.do("GET", "/api/proxy/stub/v1/ping", nil, map[string]string{"X-API-Key": k.Key}, nil)
			return code == 200
		}) {
			t.Fatalf("proxied request on %s = %d:\n%s", c.api, code, warnings(c.logs.String()))
		}
	}
	for _, c := range nodes {
		if bytes.Contains([]byte(c.logs.String()), []byte("TLS handshake")) {
			t.Errorf("TLS errors logged:\n%s", warnings(c.logs.String()))
		}
	}
}

// TestClusterTLSFiles: TLS files that could not secure the transport stop
// the start with an error naming the key and the file: a certificate of
// another CA than ca_file's, one that does not name the address the node
// advertises, a missing file.
func TestClusterTLSFiles(t *testing.T) {
	own, other := clusterTLS(t, "n1"), otherCA(t, "n1")
	farDir := t.TempDir()
	ca := own["ca_file"].(string)
	if _, err := transport.WriteCerts(farDir, transport.CertOptions{Nodes: []string{"n1"}, Hosts: []string{"10.9.9.9"}, Valid: time.Hour,
		CAFile: ca, CAKeyFile: filepath.Join(filepath.Dir(ca), "ca-key.pem")}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		ca, cert, key string
		want1, want2  string
	}{
		{"another CA", ca, other["cert_file"].(string), other["key_file"].(string), "cluster.tls (ca_file ", "does not chain to the CA in"},
		{"another host", ca, filepath.Join(farDir, "n1.pem"), filepath.Join(farDir, "n1-key.pem"),
			"cluster.tls.cert_file " + filepath.Join(farDir, "n1.pem") + ": the other nodes reach this one at 127.0.0.1", "10.9.9.9"},
		{"no key file", ca, own["cert_file"].(string), filepath.Join(farDir, "none.pem"), "cluster.tls (ca_file ", "none.pem"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runSplit(t, "", []string{"GATEHOUSE_ETCD_ENDPOINTS=" + freeAddr(t), "GATEHOUSE_MASTER_KEY=" + testMasterKey},
				"serve", "--config", writeConfig(t, t.TempDir(), nil), "--node-id", "n1", "--cluster-listen", "127.0.0.1:0",
				"--cluster-tls-ca-file", tt.ca, "--cluster-tls-cert-file", tt.cert, "--cluster-tls-key-file", tt.key)
			if code == 0 || !strings.Contains(stderr, tt.want1) || !strings.Contains(stderr, tt.want2) {
				t.Errorf("exit %d, stderr:\n%s\nwant %q and %q", code, stderr, tt.want1, tt.want2)
			}
		})
	}
}
