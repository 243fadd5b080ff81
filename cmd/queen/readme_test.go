package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The README's "Try it" walkthrough and its streaming example, run as a
// newcomer runs them (bash and curl) against a real node, answer what the
// README says they answer. A README that drifts from the broker fails here.
func TestREADME_TryItWalkthrough(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t)
	c.useShipped() // the README's node: CGO_ENABLED=0 go run ./cmd/queen serve
	addr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	n := c.addNode("n1", addr, nil, "--http", addr)
	n.start()
	c.waitLeader([]*qnode{n}, 30*time.Second)

	for _, tc := range []struct {
		section string
		// want are the answers in order: one line per command that prints,
		// each must contain every string listed for it.
		want [][]string
	}{
		{"## Try it", [][]string{
			{`"transaction_id":"o-1"`, `"status":"queued"`, `"queueName":"orders"`},
			{`"messages":[{`, `"transactionId":"o-1"`, `"data":{"id":1}`},
			{`"success":true`, `"transactionId":"o-1"`},
			{`"configured":true`, `"queue":"payments"`, `"retryLimit":0`},
			{`"transaction_id":"p-1"`, `"status":"queued"`},
			{`"success":true`, `"dlq":true`},
			{`"transactionId":"p-1"`, `"errorMessage":"card declined"`, `"total":1`},
			{`"replayed":true`},
			{`"queue":"payments"`, `"data":{"amount":5}`},
		}},
		{"### A streaming query", [][]string{
			{`"success":true`, `"state_ops_applied":1`, `"lease_released":true`, `"count":3`},
			{`"rows":[{"key":"tumb:60\u001f`, `"count":3`},
			{`"success":true`, `"queueName":"orders.counts","status":"queued"`},
			{`"queue":"orders.counts"`, `"count":3`},
		}},
	} {
		t.Run(strings.TrimLeft(tc.section, "# "), func(t *testing.T) {
			script := shBlock(t, string(readme), tc.section)
			// Every curl answer on a line of its own, then the script with
			// the README's address replaced by the node's.
			prelude := "set -e\ncurl() { command curl \"$@\"; echo; }\nB=" + addr + "\n"
			script = strings.ReplaceAll(script, "B=localhost:6632\n", "")
			out, err := exec.Command("bash", "-c", prelude+script).CombinedOutput()
			if err != nil {
				t.Fatalf("the walkthrough failed: %v\n%s", err, out)
			}
			var lines []string
			for _, l := range strings.Split(string(out), "\n") {
				if strings.TrimSpace(l) != "" {
					lines = append(lines, l)
				}
			}
			if len(lines) != len(tc.want) {
				t.Fatalf("%d answers, want %d:\n%s", len(lines), len(tc.want), out)
			}
			for i, want := range tc.want {
				if !json.Valid([]byte(lines[i])) {
					t.Errorf("answer %d is not JSON: %s", i+1, lines[i])
				}
				for _, w := range want {
					if !strings.Contains(lines[i], w) {
						t.Errorf("answer %d lacks %s:\n%s", i+1, w, lines[i])
					}
				}
			}
		})
	}
}

// shBlock returns the first ```sh block after the heading section.
func shBlock(t *testing.T, readme, section string) string {
	t.Helper()
	i := strings.Index(readme, "\n"+section+"\n")
	if i < 0 {
		t.Fatalf("README has no section %q", section)
	}
	rest := readme[i:]
	start := strings.Index(rest, "```sh\n")
	if start < 0 {
		t.Fatalf("no sh block after %q", section)
	}
	rest = rest[start+len("```sh\n"):]
	end := strings.Index(rest, "```")
	return rest[:end]
}
