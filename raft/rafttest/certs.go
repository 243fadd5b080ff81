package rafttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/queenmq/queen/raft"
)

// CA is a throwaway certificate authority, made at run time, for tests of
// the Raft transport's mutual TLS.
type CA struct {
	t    testing.TB
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertFile is the CA's certificate, PEM (--raft-tls-ca).
	CertFile string
}

// NewCA makes a CA whose files live in a temporary directory of t.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{t: t, dir: t.TempDir(), cert: cert, key: key}
	ca.CertFile = ca.write(name+"-ca.pem", "CERTIFICATE", der)
	return ca
}

// Issue signs a node certificate naming hosts (IPs or DNS names) for both
// server and client authentication, and returns its PEM files.
func (ca *CA) Issue(name string, hosts ...string) (certFile, keyFile string) {
	return ca.issue(name, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, hosts)
}

// IssueServerOnly signs a certificate that allows server authentication
// only (a wrong certificate for a node, which is also a client).
func (ca *CA) IssueServerOnly(name string, hosts ...string) (certFile, keyFile string) {
	return ca.issue(name, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, hosts)
}

func (ca *CA) issue(name string, usages []x509.ExtKeyUsage, hosts []string) (string, string) {
	ca.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(ca.t),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usages,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		ca.t.Fatal(err)
	}
	return ca.write(name+".pem", "CERTIFICATE", der), ca.write(name+"-key.pem", "PRIVATE KEY", keyDER)
}

// TLS is raft.LoadTLS of a fresh certificate for name naming hosts.
func (ca *CA) TLS(name string, hosts ...string) *tls.Config {
	ca.t.Helper()
	cert, key := ca.Issue(name, hosts...)
	conf, err := raft.LoadTLS(cert, key, ca.CertFile)
	if err != nil {
		ca.t.Fatal(err)
	}
	return conf
}

func (ca *CA) write(name, kind string, der []byte) string {
	ca.t.Helper()
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		ca.t.Fatal(err)
	}
	return p
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// ServerTLS is a server configuration presenting a fresh certificate for
// name naming hosts, asking nothing of clients (an HTTPS API listener).
func (ca *CA) ServerTLS(name string, hosts ...string) *tls.Config {
	ca.t.Helper()
	cert, key := ca.Issue(name, hosts...)
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		ca.t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
}

// ClientTLS is a client configuration that trusts this CA only.
func (ca *CA) ClientTLS() *tls.Config {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return &tls.Config{RootCAs: p, MinVersion: tls.VersionTLS12}
}
