package transport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Certificates for a cluster (gatehouse cluster certs): a CA and one
// certificate per node, ECDSA P-256, each node's allowed for server and
// client authentication and naming the hosts the nodes are reached at.

// CAFile and CAKeyFile name the CA's certificate and key files that
// WriteCerts writes in its directory.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
)

// NodeCertFile and NodeKeyFile name a node's certificate and key files.
func NodeCertFile(node string) string { return node + ".pem" }

// NodeKeyFile names a node's private key file.
func NodeKeyFile(node string) string { return node + "-key.pem" }

// CertOptions says what WriteCerts makes.
type CertOptions struct {
	// Nodes name the node certificates (one each; the names go in the
	// subject, and in the file names).
	Nodes []string
	// Hosts are the IP addresses and DNS names every node certificate
	// names: the hosts of the nodes' cluster.listen addresses.
	Hosts []string
	// Valid is how long the certificates are valid (the CA for twice as
	// long).
	Valid time.Duration
	// CAKeyFile, if set, is an existing CA's key and CAFile its
	// certificate: new node certificates under the same CA (adding a
	// node, renewing). Empty: a new CA.
	CAFile, CAKeyFile string
}

// WriteCerts writes into dir (created 0700 if absent) a new CA (ca.pem,
// ca-key.pem), or reads the one named in o, and a certificate and key for
// each node (NODE.pem, NODE-key.pem). Keys are written 0600. It refuses
// to replace a file. It returns the paths written.
func WriteCerts(dir string, o CertOptions) ([]string, error) {
	if len(o.Nodes) == 0 || len(o.Hosts) == 0 || o.Valid <= 0 {
		return nil, errors.New("certs: nodes, hosts and a validity are required")
	}
	for _, n := range o.Nodes {
		if n == "" || n == "." || n == ".." || filepath.Base(n) != n {
			return nil, fmt.Errorf("certs: node name %q is not a file name", n)
		}
	}
	targets := []string{}
	if o.CAFile == "" {
		targets = append(targets, CAFile, CAKeyFile)
	}
	for _, n := range o.Nodes {
		targets = append(targets, NodeCertFile(n), NodeKeyFile(n))
	}
	for _, name := range targets {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return nil, fmt.Errorf("certs: %s exists: files are never replaced (another directory; or, to issue under that CA, its certificate and key)", filepath.Join(dir, name))
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	var written []string
	write := func(name string, typ string, der []byte, mode os.FileMode) error {
		p := filepath.Join(dir, name)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return fmt.Errorf("certs: %w", err)
		}
		if err := pem.Encode(f, &pem.Block{Type: typ, Bytes: der}); err != nil {
			f.Close()
			return fmt.Errorf("certs: write %s: %w", p, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("certs: write %s: %w", p, err)
		}
		written = append(written, p)
		return nil
	}
	now := time.Now().Add(-5 * time.Minute) // some clock skew between machines
	ca, caKey, err := loadCA(o.CAFile, o.CAKeyFile)
	if err != nil {
		return nil, err
	}
	if ca == nil {
		if ca, caKey, err = newCA(now, 2*o.Valid); err != nil {
			return nil, err
		}
		der, err := x509.MarshalECPrivateKey(caKey)
		if err != nil {
			return nil, fmt.Errorf("certs: %w", err)
		}
		if err := write(CAFile, "CERTIFICATE", ca.Raw, 0o644); err != nil {
			return nil, err
		}
		if err := write(CAKeyFile, "EC PRIVATE KEY", der, 0o600); err != nil {
			return nil, err
		}
	}
	for _, node := range o.Nodes {
		cert, key, err := issue(ca, caKey, node, o.Hosts, now, o.Valid)
		if err != nil {
			return nil, err
		}
		if err := write(NodeCertFile(node), "CERTIFICATE", cert, 0o644); err != nil {
			return nil, err
		}
		if err := write(NodeKeyFile(node), "EC PRIVATE KEY", key, 0o600); err != nil {
			return nil, err
		}
	}
	return written, nil
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certs: serial: %w", err)
	}
	return n, nil
}

func newCA(now time.Time, valid time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: CA key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: "gatehouse cluster CA " + now.UTC().Format("2006-01-02")},
		NotBefore: now, NotAfter: now.Add(valid),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: CA certificate: %w", err)
	}
	return ca, key, nil
}

// loadCA reads an existing CA (both files), or returns nil without them.
func loadCA(certFile, keyFile string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	if certFile == "" && keyFile == "" {
		return nil, nil, nil
	}
	read := func(p, typ string) ([]byte, error) {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("certs: %w", err)
		}
		blk, _ := pem.Decode(b)
		if blk == nil || blk.Type != typ {
			return nil, fmt.Errorf("certs: %s holds no PEM %s", p, typ)
		}
		return blk.Bytes, nil
	}
	cder, err := read(certFile, "CERTIFICATE")
	if err != nil {
		return nil, nil, err
	}
	kder, err := read(keyFile, "EC PRIVATE KEY")
	if err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(cder)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %s: %w", certFile, err)
	}
	key, err := x509.ParseECPrivateKey(kder)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %s: %w", keyFile, err)
	}
	if !key.PublicKey.Equal(ca.PublicKey) {
		return nil, nil, fmt.Errorf("certs: %s is not the key of %s", keyFile, certFile)
	}
	return ca, key, nil
}

// issue makes a node certificate (DER) and its key (DER, SEC 1).
func issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, node string, hosts []string, now time.Time, valid time.Duration) (cert, key []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: key of %s: %w", node, err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: node},
		NotBefore: now, NotAfter: now.Add(valid),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	cert, err = x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: certificate of %s: %w", node, err)
	}
	key, err = x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: key of %s: %w", node, err)
	}
	return cert, key, nil
}
