package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Mutual TLS between nodes. With TLS (WithTLS), every connection the
// transport accepts or opens is TLS 1.3, and both ends present a
// certificate signed by the cluster CA: the listener refuses a client
// without one (tls.RequireAndVerifyClientCert), and a node refuses a
// server whose certificate is not signed by the CA or does not name the
// address it dialled (the address the node advertises in etcd: an IP SAN
// for an IP). protoactor remote opens its connections in one place (the
// endpoint writer's grpc.Dial with the configured DialOptions) and serves
// them from one grpc.Server (the configured ServerOptions): the
// credentials set here cover both. The files are read once, at Start: a
// certificate is rotated by replacing the files and restarting the nodes
// one at a time (docs/cluster.md, "Trust model").

// ErrTLS reports certificate files that cannot secure the transport.
var ErrTLS = errors.New("transport: bad TLS files")

// ErrPeerRefused reports a member that refused this node's certificate
// or presented one the cluster CA did not sign (Probe).
var ErrPeerRefused = errors.New("transport: TLS handshake with a member refused")

// TLS is the transport's mutual TLS: the cluster CA and this node's
// certificate, loaded by LoadTLS. Safe for concurrent use.
type TLS struct {
	server, client *tls.Config
	leaf           *x509.Certificate
}

// LoadTLS reads the cluster CA bundle (PEM, one or more certificates: an
// old and a new CA during a rollover), this node's certificate (PEM, the
// leaf first, intermediates after) and its private key. The certificate
// must chain to a CA of the bundle and allow both server and client
// authentication. An error wraps ErrTLS and names the file.
func LoadTLS(caFile, certFile, keyFile string) (*TLS, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%w: CA file: %w", ErrTLS, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%w: CA file %s holds no PEM certificate", ErrTLS, caFile)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: certificate %s and key %s: %w", ErrTLS, certFile, keyFile, err)
	}
	leaf := pair.Leaf
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("%w: certificate %s: %w", ErrTLS, certFile, err)
		}
		inter.AddCert(c)
	}
	for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{use}}); err != nil {
			return nil, fmt.Errorf("%w: certificate %s does not chain to the CA in %s for %s: %w",
				ErrTLS, certFile, caFile, map[x509.ExtKeyUsage]string{x509.ExtKeyUsageServerAuth: "server authentication",
					x509.ExtKeyUsageClientAuth: "client authentication"}[use], err)
		}
	}
	return &TLS{
		server: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool},
		client: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair}, RootCAs: pool},
		leaf:   leaf,
	}, nil
}

// VerifyHost checks that the certificate names host (an IP address or a
// DNS name), as the other nodes check when they dial it.
func (t *TLS) VerifyHost(host string) error { return t.leaf.VerifyHostname(host) }

// NotAfter is when the certificate expires.
func (t *TLS) NotAfter() time.Time { return t.leaf.NotAfter }

// Option configures Start.
type Option func(*options)

type options struct {
	tls *TLS
}

// WithTLS secures every connection of the transport with t (see TLS).
// Without it the transport is plaintext and unauthenticated: anything
// that reaches its address is heard.
func WithTLS(t *TLS) Option { return func(o *options) { o.tls = t } }

// remoteOptions are protoactor remote's options for o.
func (o options) remoteOptions() []remote.ConfigOption {
	srv := []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessage)}
	var dial []grpc.DialOption
	if o.tls != nil {
		srv = append(srv, grpc.Creds(credentials.NewTLS(o.tls.server)))
		dial = append(dial, grpc.WithTransportCredentials(credentials.NewTLS(o.tls.client)))
	} else {
		dial = append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	return []remote.ConfigOption{
		remote.WithServerOptions(srv...),
		remote.WithDialOptions(dial...),
		remote.WithCallOptions(grpc.MaxCallSendMsgSize(MaxMessage)),
	}
}

// Probe opens a TLS connection to the member at addr and checks that
// both ends accept the other's certificate: ErrPeerRefused (wrapped, with
// the reason) if either refuses, another error if addr cannot be reached.
// A node probes the members before it joins, so that a node with a
// certificate of another CA stops at start instead of taking shards no
// member can reach.
func (t *TLS) Probe(ctx context.Context, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("probe %s: %w", addr, err)
	}
	cfg := t.client.Clone()
	cfg.ServerName = host
	cfg.NextProtos = []string{"h2"}
	d := tls.Dialer{Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if isTLSRefusal(err) {
			return fmt.Errorf("%w: %s: %w", ErrPeerRefused, addr, err)
		}
		return fmt.Errorf("probe %s: %w", addr, err)
	}
	defer conn.Close()
	// In TLS 1.3 the server checks the client's certificate after the
	// client's handshake ends: its refusal arrives as an alert on the
	// first read. A server that accepted waits for the HTTP/2 preface,
	// so the read times out.
	_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	switch {
	case err == nil, errors.As(err, &ne) && ne.Timeout():
		return nil
	case isTLSRefusal(err):
		return fmt.Errorf("%w: %s refused this node's certificate: %w", ErrPeerRefused, addr, err)
	}
	return fmt.Errorf("probe %s: %w", addr, err)
}

// isTLSRefusal: a certificate error here or a TLS alert from the peer.
func isTLSRefusal(err error) bool {
	var (
		alert   tls.AlertError
		unknown x509.UnknownAuthorityError
		invalid x509.CertificateInvalidError
		host    x509.HostnameError
		verify  *tls.CertificateVerificationError
		remote  *net.OpError
	)
	if errors.As(err, &alert) || errors.As(err, &unknown) || errors.As(err, &invalid) || errors.As(err, &host) || errors.As(err, &verify) {
		return true
	}
	// A peer's alert is a net.OpError "remote error" (its alert type is
	// crypto/tls's own).
	return errors.As(err, &remote) && remote.Op == "remote error"
}
