package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A malformed QUEEN_ENCRYPTION_KEY stops `queen serve` before it opens its
// data directory or listens (fail closed): exit status 1 and a message that
// names the variable and its format without quoting the key. The control
// runs the same invocation with a well-formed key, which serves.
func TestServe_MalformedEncryptionKeyExits(t *testing.T) {
	bin := queenBinary(t)
	for _, key := range []string{"abc", strings.Repeat("a1", 31) + "a"} { // 3 and 63 hex characters
		t.Setenv("QUEEN_ENCRYPTION_KEY", key)
		dir := filepath.Join(t.TempDir(), "data")
		addr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
		// The deadline only stops a binary that would serve instead of
		// exiting; a correct one exits at once.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, bin, "serve", "--data", dir, "--http", addr)
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

	t.Setenv("QUEEN_ENCRYPTION_KEY", strings.Repeat("a1", 32))
	c := newCluster(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	n := c.addNode("n1", addr, nil, "--http", addr)
	n.start()
	waitFor(t, 60*time.Second, "the node with a well-formed key to serve /health", func() (bool, string) {
		code, body, err := c.do(2*time.Second, "GET", n.url("/health"), nil)
		return err == nil && code == http.StatusOK, fmt.Sprintf("%d %v %s", code, err, body)
	})
	n.stop()
}
