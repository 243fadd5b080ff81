package raft

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// LoadTLS builds the mutual-TLS configuration of the Raft transport
// (Options.TLS) from PEM files: this node's certificate and key, and the
// cluster CA that signed every node's certificate. The one configuration
// serves both sides: the node listens with it (and requires a client
// certificate signed by the CA) and dials with it (and checks that the
// dialed node's certificate is signed by the CA and names the host of the
// Raft address it dialed, as an IP or DNS SAN).
//
// So each node's certificate must name the host of its own Raft address
// and allow both server and client authentication (extended key usages
// serverAuth and clientAuth, or none). LoadTLS checks that the certificate
// is signed by the CA and allows both, so a wrong file fails at start
// rather than at the first connection.
func LoadTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("raft: tls: load certificate %s and key %s: %w", certFile, keyFile, err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("raft: tls: read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("raft: tls: %s holds no PEM certificate", caFile)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("raft: tls: parse certificate %s: %w", certFile, err)
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
		if err != nil {
			return nil, fmt.Errorf("raft: tls: certificate %s does not verify against the CA %s for %s: %w",
				certFile, caFile, usageName(usage), err)
		}
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}, nil
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageClientAuth {
		return "client authentication"
	}
	return "server authentication"
}
