package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// tlsNodeEnv starts this test binary as a node with TLS: its value is
// "CAFILE,CERTFILE,KEYFILE". The node counts the admissions and service
// calls it runs, and answers commands on stdin, one a line:
//
//	counts               → "ADMISSIONS CALLS"
//	forward ADDR KEY     → "ok CODE" or "err TEXT"
//	call ADDR SERVICE    → "ok ANSWER" or "err TEXT"
const tlsNodeEnv = "GATEHOUSE_TRANSPORT_TLS_NODE"

// countedService counts its calls and answers "ok".
const countedService = "counted"

func runTLSNode(files string) {
	f := strings.Split(files, ",")
	t, err := LoadTLS(f[0], f[1], f[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	adm := &countingAdmitter{}
	tr, err := Start("127.0.0.1:0", adm, 300*time.Millisecond, quietLogger(), WithTLS(t))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer tr.Close()
	var calls atomic.Int64
	if err := tr.Handle(countedService, func(context.Context, []byte) ([]byte, error) {
		calls.Add(1)
		return []byte("ok"), nil
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(tr.Addr())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		ctx := context.Background()
		switch {
		case len(w) == 1 && w[0] == "counts":
			fmt.Println(adm.calls.Load(), calls.Load())
		case len(w) == 3 && w[0] == "forward":
			if v, err := tr.Forward(ctx, w[1], w[2], newID()); err != nil {
				fmt.Println("err", err)
			} else {
				fmt.Println("ok", v.Code)
			}
		case len(w) == 3 && w[0] == "call":
			if out, err := tr.Call(ctx, w[1], w[2], []byte("x"), 300*time.Millisecond); err != nil {
				fmt.Println("err", err)
			} else {
				fmt.Println("ok", string(out))
			}
		default:
			fmt.Println("err unknown command")
		}
	}
}

// tlsNode is a runTLSNode child.
type tlsNode struct {
	addr string
	in   io.WriteCloser
	out  *bufio.Reader
}

func startTLSNode(t *testing.T, dir, node string) *tlsNode {
	t.Helper()
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), tlsNodeEnv+"="+strings.Join([]string{
		filepath.Join(dir, CAFile), filepath.Join(dir, NodeCertFile(node)), filepath.Join(dir, NodeKeyFile(node))}, ","))
	in, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); _ = child.Wait() })
	n := &tlsNode{in: in, out: bufio.NewReader(stdout)}
	n.addr = n.read(t)
	return n
}

func (n *tlsNode) read(t *testing.T) string {
	t.Helper()
	line, err := n.out.ReadString('\n')
	if err != nil {
		t.Fatalf("TLS node: %v", err)
	}
	return strings.TrimSpace(line)
}

func (n *tlsNode) do(t *testing.T, cmd string) string {
	t.Helper()
	fmt.Fprintln(n.in, cmd)
	return n.read(t)
}

func (n *tlsNode) counts(t *testing.T) (admissions, calls int) {
	t.Helper()
	w := strings.Fields(n.do(t, "counts"))
	a, _ := strconv.Atoi(w[0])
	c, _ := strconv.Atoi(w[1])
	return a, c
}

// writeTestCerts writes a CA and certificates for nodes in a new dir.
func writeTestCerts(t *testing.T, nodes ...string) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := WriteCerts(dir, CertOptions{Nodes: nodes, Hosts: []string{"127.0.0.1", "localhost"}, Valid: time.Hour}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestTLSOnlyMembers: with mutual TLS, nodes whose certificates the
// cluster CA signed forward admissions and call services to each other;
// a process speaking the same wire protocol without a certificate (this
// test process's plaintext transport) or with a certificate of another
// CA is refused both ways: no admission runs, no service is called, and
// a probe names the refusal.
func TestTLSOnlyMembers(t *testing.T) {
	ca1 := writeTestCerts(t, "a", "b")
	ca2 := writeTestCerts(t, "x")
	a, b := startTLSNode(t, ca1, "a"), startTLSNode(t, ca1, "b")
	x := startTLSNode(t, ca2, "x")

	// Members talk, both ways.
	if got := b.do(t, "forward "+a.addr+" k1"); got != fmt.Sprint("ok ", Admitted) {
		t.Fatalf("member b forwards to a: %s", got)
	}
	if got := a.do(t, "call "+b.addr+" "+countedService); got != "ok ok" {
		t.Fatalf("member a calls b: %s", got)
	}
	admA, callsA := a.counts(t)
	if admA != 1 || callsA != 0 {
		t.Fatalf("a ran %d admissions and %d calls, want 1 and 0", admA, callsA)
	}

	// A plaintext process speaking the wire protocol (encodeAdmit, a
	// service Call): refused.
	ctx := context.Background()
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if v, err := local.Forward(short, a.addr, "k1", newID()); !errors.Is(err, ErrForward) {
		t.Errorf("plaintext forward to a TLS node = %+v, %v; want ErrForward", v, err)
	}
	if out, err := local.Call(ctx, a.addr, countedService, []byte("x"), 300*time.Millisecond); !errors.Is(err, ErrCall) {
		t.Errorf("plaintext call to a TLS node = %q, %v; want ErrCall", out, err)
	}
	// A node of another CA: refused, and it refuses a member.
	for _, cmd := range []string{"forward " + a.addr + " k1", "call " + a.addr + " " + countedService} {
		if got := x.do(t, cmd); !strings.HasPrefix(got, "err ") {
			t.Errorf("other CA's node: %s = %s, want an error", cmd, got)
		}
	}
	if got := a.do(t, "forward "+x.addr+" k1"); !strings.HasPrefix(got, "err ") {
		t.Errorf("member forwards to the other CA's node = %s, want an error", got)
	}
	if adm, calls := a.counts(t); adm != admA || calls != callsA {
		t.Errorf("a ran %d admissions and %d calls after the non-members', want %d and %d", adm, calls, admA, callsA)
	}
	if adm, calls := x.counts(t); adm != 0 || calls != 0 {
		t.Errorf("the other CA's node ran %d admissions and %d calls, want none", adm, calls)
	}

	// Probes: a member's certificate passes, another CA's is refused
	// (by the member, and by the prober: the member's is unknown to it).
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	load := func(dir, node string) *TLS {
		tl, err := LoadTLS(filepath.Join(dir, CAFile), filepath.Join(dir, NodeCertFile(node)), filepath.Join(dir, NodeKeyFile(node)))
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	if err := load(ca1, "b").Probe(pctx, a.addr); err != nil {
		t.Errorf("member's Probe = %v", err)
	}
	if err := load(ca2, "x").Probe(pctx, a.addr); !errors.Is(err, ErrPeerRefused) {
		t.Errorf("other CA's Probe = %v, want ErrPeerRefused", err)
	}
	mixed := load(ca1, "b")
	mixed.client.RootCAs = load(ca2, "x").client.RootCAs // trusts x's CA, presents a's CA's certificate
	if err := mixed.Probe(pctx, a.addr); !errors.Is(err, ErrPeerRefused) {
		t.Errorf("Probe of a server the CA did not sign = %v, want ErrPeerRefused", err)
	}
	if err := mixed.Probe(pctx, x.addr); !errors.Is(err, ErrPeerRefused) {
		t.Errorf("Probe with a certificate the server's CA did not sign = %v, want ErrPeerRefused", err)
	}
}

// TestLoadTLS: files that cannot secure the transport are refused with
// ErrTLS, naming the file.
func TestLoadTLS(t *testing.T) {
	ca1, ca2 := writeTestCerts(t, "a"), writeTestCerts(t, "b")
	p := func(dir, name string) string { return filepath.Join(dir, name) }
	tests := []struct {
		name, ca, cert, key, want string
	}{
		{"ok", p(ca1, CAFile), p(ca1, "a.pem"), p(ca1, "a-key.pem"), ""},
		{"no CA file", p(ca1, "none.pem"), p(ca1, "a.pem"), p(ca1, "a-key.pem"), "none.pem"},
		{"CA file without a certificate", p(ca1, "a-key.pem"), p(ca1, "a.pem"), p(ca1, "a-key.pem"), "holds no PEM certificate"},
		{"key of another certificate", p(ca1, CAFile), p(ca1, "a.pem"), p(ca2, "b-key.pem"), "b-key.pem"},
		{"certificate of another CA", p(ca1, CAFile), p(ca2, "b.pem"), p(ca2, "b-key.pem"), "does not chain to the CA"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl, err := LoadTLS(tt.ca, tt.cert, tt.key)
			if tt.want == "" {
				if err != nil || tl.VerifyHost("127.0.0.1") != nil || tl.VerifyHost("10.9.9.9") == nil {
					t.Errorf("LoadTLS = %v; hosts: %v", err, tl.VerifyHost("127.0.0.1"))
				}
				return
			}
			if !errors.Is(err, ErrTLS) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("LoadTLS = %v, want ErrTLS naming %q", err, tt.want)
			}
		})
	}
	if _, err := WriteCerts(ca1, CertOptions{Nodes: []string{"a"}, Hosts: []string{"127.0.0.1"}, Valid: time.Hour}); err == nil {
		t.Error("WriteCerts replaced existing files")
	}
	if _, err := WriteCerts(t.TempDir(), CertOptions{Nodes: []string{"../a"}, Hosts: []string{"127.0.0.1"}, Valid: time.Hour}); err == nil {
		t.Error("WriteCerts took a node name with a path")
	}
	// New node certificates under an existing CA.
	more := t.TempDir()
	if _, err := WriteCerts(more, CertOptions{Nodes: []string{"c"}, Hosts: []string{"127.0.0.1"}, Valid: time.Hour,
		CAFile: p(ca1, CAFile), CAKeyFile: p(ca1, CAKeyFile)}); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTLS(p(ca1, CAFile), p(more, "c.pem"), p(more, "c-key.pem")); err != nil {
		t.Errorf("a certificate issued by the existing CA: %v", err)
	}
}
