package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"

	nodes "github.com/queenmq/queen/cluster" // the test harness has a type cluster
)

// secretFrom returns the cluster secret given as a value or as a file
// (exclusive); the file's trailing newline is dropped.
func secretFrom(value, file string) (string, error) {
	if file == "" {
		return value, nil
	}
	if value != "" {
		return "", fmt.Errorf("--cluster-secret and --cluster-secret-file are exclusive")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--cluster-secret-file: %w", err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("--cluster-secret-file %s is empty", file)
	}
	return s, nil
}

// loadHTTPTrust loads the HTTP API's certificate (--tls-cert and --tls-key
// together) and the roots this node verifies other nodes' HTTPS with.
func (c *serveConfig) loadHTTPTrust(cert, key, ca string) error {
	if (cert == "") != (key == "") {
		return fmt.Errorf("--tls-cert and --tls-key go together")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		c.httpTLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	roots, err := trustedRoots(ca, c.raftCA)
	if err != nil {
		return err
	}
	if c.httpTLS != nil {
		c.relayTLS = roots
	}
	return nil
}

// trustedRoots is a client configuration that trusts the system roots and
// the CA certificates in files (PEM; empty names are skipped).
func trustedRoots(files ...string) (*tls.Config, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read CA: %w", err)
		}
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", f)
		}
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// warnExposed logs, once at start, what is open to anyone who can reach
// this node.
func warnExposed(log *slog.Logger, c serveConfig) {
	if !c.auth.Enabled && !loopback(c.http) {
		log.Warn("the HTTP API is open to anyone who can reach it: authentication is off (JWT_ENABLED) and it listens beyond loopback",
			"http", c.http)
	}
	if c.auth.Enabled && c.raftAddr != "" && c.clusterSecret == "" {
		log.Warn("JWT is on but no cluster secret is set: a follower cannot replay pushes it buffered during maintenance, and joins and leaves need an admin token")
	}
}

// loopback reports whether a listen address host:port is on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// postMembership sends a cluster membership request (path nodes.JoinPath
// or nodes.LeavePath) with the cluster secret, or else a bearer token.
func postMembership(client *http.Client, url, path, body, secret, token string) (*http.Response, error) {
	req, err := http.NewRequest("POST", strings.TrimSuffix(url, "/")+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		req.Header.Set(nodes.SecretHeader, secret)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return client.Do(req)
}
