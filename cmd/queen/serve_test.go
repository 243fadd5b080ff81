package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/queenmq/queen/raft/rafttest"
)

func TestParseServe_RaftTrust(t *testing.T) {
	ca := rafttest.NewCA(t, "cluster")
	cert, key := ca.Issue("n1", "127.0.0.1")
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	os.WriteFile(secretFile, []byte("from a file\n"), 0o600)
	crlf := filepath.Join(dir, "secret-crlf")
	os.WriteFile(crlf, []byte("windows\r\n"), 0o600)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	raft := []string{"--raft", "127.0.0.1:7001"}
	tlsFlags := []string{"--raft-tls-cert", cert, "--raft-tls-key", key, "--raft-tls-ca", ca.CertFile}

	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		tls     bool
		secret  string
		wantErr string
	}{
		{name: "none", args: raft},
		{name: "all three TLS flags", args: append(append([]string{}, raft...), tlsFlags...), tls: true},
		{name: "TLS from the environment", args: raft, tls: true,
			env: map[string]string{"QUEEN_RAFT_TLS_CERT": cert, "QUEEN_RAFT_TLS_KEY": key, "QUEEN_RAFT_TLS_CA": ca.CertFile}},
		{name: "two of three", args: append(append([]string{}, raft...), tlsFlags[:4]...), wantErr: "go together: 2 of the 3"},
		{name: "TLS without --raft", args: tlsFlags, wantErr: "need --raft"},
		{name: "TLS files that do not verify", args: append(append([]string{}, raft...), "--raft-tls-cert", cert, "--raft-tls-key", key,
			"--raft-tls-ca", rafttest.NewCA(t, "other").CertFile), wantErr: "does not verify"},
		{name: "secret flag", args: []string{"--cluster-secret", "s3cret"}, secret: "s3cret"},
		{name: "secret from the environment", env: map[string]string{"QUEEN_CLUSTER_SECRET": "envsecret"}, secret: "envsecret"},
		{name: "secret file drops the newline", args: []string{"--cluster-secret-file", secretFile}, secret: "from a file"},
		{name: "secret file drops CRLF", args: []string{"--cluster-secret-file", crlf}, secret: "windows"},
		{name: "empty secret file", args: []string{"--cluster-secret-file", empty}, wantErr: "is empty"},
		{name: "missing secret file", args: []string{"--cluster-secret-file", filepath.Join(dir, "nope")}, wantErr: "no such file"},
		{name: "secret and secret file", args: []string{"--cluster-secret", "x", "--cluster-secret-file", secretFile}, wantErr: "exclusive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseServe(tc.args, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseServe: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseServe: %v", err)
			}
			if got := c.raftTLS != nil; got != tc.tls {
				t.Errorf("raft TLS set = %v, want %v", got, tc.tls)
			}
			if c.clusterSecret != tc.secret {
				t.Errorf("cluster secret = %q, want %q", c.clusterSecret, tc.secret)
			}
		})
	}
}
