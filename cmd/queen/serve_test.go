package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/queenmq/queen/raft/rafttest"
	"github.com/queenmq/queen/server/auth"
	"github.com/queenmq/queen/server/diskspace"
)

// A malformed QUEEN_ENCRYPTION_KEY stops `queen serve` before it opens its
// data directory or listens (fail closed): exit status 1 and a message that
// names the variable and its format without quoting the key. The control
// runs the same invocation with a well-formed key, which serves.
func TestServe_MalformedEncryptionKeyExits(t *testing.T) {
	t.Parallel()
	bin := queenBinary(t)
	for _, key := range []string{"abc", strings.Repeat("a1", 31) + "a"} { // 3 and 63 hex characters
		dir := filepath.Join(t.TempDir(), "data")
		addr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
		// The deadline only stops a binary that would serve instead of
		// exiting; a correct one exits at once.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, bin, "serve", "--data", dir, "--http", addr)
		cmd.Env = append(os.Environ(), "QUEEN_ENCRYPTION_KEY="+key)
		setDeathSignal(cmd)
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("key of %d characters: serve ended with %v, want exit status 1; output:\n%s", len(key), err, out)
		}
		for _, want := range []string{"QUEEN_ENCRYPTION_KEY", "64 hex characters"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("key of %d characters: output does not mention %q:\n%s", len(key), want, out)
			}
		}
		if strings.Contains(string(out), key) {
			t.Errorf("key of %d characters: output quotes the key:\n%s", len(key), out)
		}
		if strings.Contains(string(out), "queen serving") {
			t.Errorf("key of %d characters: the node served before exiting:\n%s", len(key), out)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("key of %d characters: the data directory was touched (stat: %v)", len(key), err)
		}
	}

	c := newCluster(t)
	c.env = []string{"QUEEN_ENCRYPTION_KEY=" + strings.Repeat("a1", 32)}
	addr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	n := c.addNode("n1", addr, nil, "--http", addr)
	n.start()
	waitFor(t, 60*time.Second, "the node with a well-formed key to serve /health", func() (bool, string) {
		code, body, err := c.do(2*time.Second, "GET", n.url("/health"), nil)
		return err == nil && code == http.StatusOK, fmt.Sprintf("%d %v %s", code, err, body)
	})
	n.stop()
}
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
			c, ok := parseOrError(t, tc.args, tc.env, tc.wantErr)
			if !ok {
				return
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

// The HTTP plane's flags and variables: HTTPS, CORS, JWT, and --join's
// need for the secret.
func TestParseServe_HTTPTrust(t *testing.T) {
	ca := rafttest.NewCA(t, "http")
	cert, key := ca.Issue("n1", "127.0.0.1")
	join := []string{"--raft", "127.0.0.1:7001", "--join", "http://127.0.0.1:6632"}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(serveConfig) string
		wantErr string
	}{
		{name: "defaults", check: func(c serveConfig) string {
			if c.httpTLS != nil || c.relayTLS != nil || c.auth.Enabled || len(c.corsOrigins) != 1 || c.corsOrigins[0] != "*" {
				return fmt.Sprintf("TLS %v relay %v auth %v cors %q", c.httpTLS != nil, c.relayTLS != nil, c.auth.Enabled, c.corsOrigins)
			}
			return ""
		}},
		{name: "HTTPS", args: []string{"--tls-cert", cert, "--tls-key", key, "--tls-ca", ca.CertFile}, check: func(c serveConfig) string {
			if c.httpTLS == nil || c.relayTLS == nil || c.relayTLS.RootCAs == nil {
				return "HTTPS or the relays' roots not set"
			}
			return ""
		}},
		{name: "HTTPS from the environment", env: map[string]string{"QUEEN_TLS_CERT": cert, "QUEEN_TLS_KEY": key}, check: func(c serveConfig) string {
			if c.httpTLS == nil {
				return "HTTPS not set"
			}
			return ""
		}},
		{name: "cert without key", args: []string{"--tls-cert", cert}, wantErr: "go together"},
		{name: "CA file without a certificate", args: []string{"--tls-cert", cert, "--tls-key", key, "--tls-ca", key}, wantErr: "no PEM certificate"},
		{name: "CORS list", args: []string{"--cors-origins", "https://a.example,https://b.example"}, check: func(c serveConfig) string {
			if len(c.corsOrigins) != 2 {
				return fmt.Sprintf("cors %q", c.corsOrigins)
			}
			return ""
		}},
		{name: "JWT", env: map[string]string{"JWT_ENABLED": "true", "JWT_SECRET": "an-hs256-secret-of-at-least-32-bytes!"}, check: func(c serveConfig) string {
			if !c.auth.Enabled || c.auth.Secret == "" {
				return "JWT not enabled"
			}
			return ""
		}},
		{name: "bad JWT variable", env: map[string]string{"JWT_ENABLED": "maybe"}, wantErr: "JWT_ENABLED"},
		{name: "join without a secret", args: join, wantErr: "--join needs the cluster secret"},
		{name: "join with a secret", args: append(append([]string{}, join...), "--cluster-secret", "s"), check: func(c serveConfig) string { return "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseOrError(t, tc.args, tc.env, tc.wantErr)
			if !ok {
				return
			}
			if msg := tc.check(c); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}

// The warnings an operator sees at start when something is open.
func TestWarnExposed(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    serveConfig
		want []string
	}{
		{"loopback, auth off", serveConfig{http: "127.0.0.1:6632"}, nil},
		{"all interfaces, auth off", serveConfig{http: "0.0.0.0:6632"}, []string{"open to anyone"}},
		{"all interfaces, auth on", serveConfig{http: "0.0.0.0:6632", auth: auth.Options{Enabled: true}}, nil},
		{"cluster with JWT, no secret", serveConfig{http: "127.0.0.1:6632", raftAddr: "127.0.0.1:7001", auth: auth.Options{Enabled: true}},
			[]string{"no cluster secret"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf strings.Builder
			warnExposed(slog.New(slog.NewTextHandler(&buf, nil)), tc.c)
			if got := strings.Count(buf.String(), "level=WARN"); got != len(tc.want) {
				t.Fatalf("%d warnings, want %d: %s", got, len(tc.want), buf.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("no warning saying %q: %s", w, buf.String())
				}
			}
		})
	}
}

// parseOrError parses serve's flags with env as the environment. With
// wantErr it checks the error names it and reports false; else it fails on
// any error.
func parseOrError(t *testing.T, args []string, env map[string]string, wantErr string) (serveConfig, bool) {
	t.Helper()
	c, err := parseServe(args, func(k string) string { return env[k] })
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("parseServe: %v, want an error containing %q", err, wantErr)
		}
		return c, false
	}
	if err != nil {
		t.Fatalf("parseServe: %v", err)
	}
	return c, true
}

// --max-inflight-body-bytes and QUEEN_MAX_INFLIGHT_BODY_BYTES: 0 (the
// server's default) when unset, the flag over the variable, a malformed
// variable refused.
func TestParseServe_MaxInflightBodyBytes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    int64
		wantErr string
	}{
		{name: "unset: the server's default", want: 0},
		{name: "flag", args: []string{"--max-inflight-body-bytes", "268435456"}, want: 256 << 20},
		{name: "environment", env: map[string]string{"QUEEN_MAX_INFLIGHT_BODY_BYTES": "134217728"}, want: 128 << 20},
		{name: "flag over environment", args: []string{"--max-inflight-body-bytes", "268435456"},
			env: map[string]string{"QUEEN_MAX_INFLIGHT_BODY_BYTES": "134217728"}, want: 256 << 20},
		{name: "malformed environment", env: map[string]string{"QUEEN_MAX_INFLIGHT_BODY_BYTES": "1GiB"}, wantErr: "QUEEN_MAX_INFLIGHT_BODY_BYTES"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseOrError(t, tc.args, tc.env, tc.wantErr)
			if ok && c.maxInflight != tc.want {
				t.Errorf("maxInflight = %d, want %d", c.maxInflight, tc.want)
			}
		})
	}
}

// --min-free-bytes (QUEEN_MIN_FREE_BYTES) takes bytes or a binary unit;
// the default is the package's, and 0 turns the guard off.
func TestParseServe_MinFreeBytes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    uint64
		wantErr string
	}{
		{name: "default", want: diskspace.DefaultMinFreeBytes},
		{name: "bytes", args: []string{"--min-free-bytes", "1048576"}, want: 1 << 20},
		{name: "MiB", args: []string{"--min-free-bytes", "64MiB"}, want: 64 << 20},
		{name: "short unit, any case", args: []string{"--min-free-bytes", "2g"}, want: 2 << 30},
		{name: "environment", env: map[string]string{"QUEEN_MIN_FREE_BYTES": "1 GiB"}, want: 1 << 30},
		{name: "flag over environment", args: []string{"--min-free-bytes", "0"}, env: map[string]string{"QUEEN_MIN_FREE_BYTES": "1GiB"}, want: 0},
		{name: "decimal unit", args: []string{"--min-free-bytes", "512MB"}, wantErr: `unknown unit "MB"`},
		{name: "no number", args: []string{"--min-free-bytes", "MiB"}, wantErr: "want a number of bytes"},
		{name: "negative", args: []string{"--min-free-bytes", "-1"}, wantErr: "want a number of bytes"},
		{name: "overflow", args: []string{"--min-free-bytes", "20000000TiB"}, wantErr: "too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseOrError(t, tc.args, tc.env, tc.wantErr)
			if ok && c.minFree != tc.want {
				t.Errorf("min free %d, want %d", c.minFree, tc.want)
			}
		})
	}
}

// --max-conns and --max-conns-per-ip (QUEEN_MAX_CONNS,
// QUEEN_MAX_CONNS_PER_IP): 0, the server's default, when unset; negative
// refused.
func TestParseServe_MaxConns(t *testing.T) {
	for _, tc := range []struct {
		name         string
		args         []string
		env          map[string]string
		conns, perIP int
		wantErr      string
	}{
		{name: "unset: the server's defaults"},
		{name: "flags", args: []string{"--max-conns", "1000", "--max-conns-per-ip", "100"}, conns: 1000, perIP: 100},
		{name: "environment", env: map[string]string{"QUEEN_MAX_CONNS": "2000", "QUEEN_MAX_CONNS_PER_IP": "2000"}, conns: 2000, perIP: 2000},
		{name: "negative", args: []string{"--max-conns", "-1"}, wantErr: "--max-conns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseOrError(t, tc.args, tc.env, tc.wantErr)
			if ok && (c.maxConns != tc.conns || c.maxConnsPerIP != tc.perIP) {
				t.Errorf("maxConns, maxConnsPerIP = %d, %d; want %d, %d", c.maxConns, c.maxConnsPerIP, tc.conns, tc.perIP)
			}
		})
	}
}

// The HTTP server returns only when it cannot go on: whatever it returns,
// nil included, serve ends with an error, so the process exits non-zero
// and a supervisor restarts it. A signal is a clean stop.
func TestAwaitStop(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGTERM
	if err := awaitStop(log, sigs, make(chan error), nil); err != nil {
		t.Errorf("after SIGTERM: %v, want nil", err)
	}
	boom := errors.New("accept: boom")
	for _, served := range []error{boom, nil} {
		errc := make(chan error, 1)
		errc <- serveFailure(served)
		err := awaitStop(log, make(chan os.Signal), errc, nil)
		if err == nil {
			t.Errorf("Serve returned %v: awaitStop = nil, want an error", served)
		}
		if served != nil && !errors.Is(err, served) {
			t.Errorf("awaitStop = %v, want it to wrap %v", err, served)
		}
	}
}
