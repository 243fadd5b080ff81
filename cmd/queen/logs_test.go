package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// logLines reads a node's log (every start of it) as JSON records, skipping
// the harness's own "=== test:" lines.
func logLines(t *testing.T, n *qnode) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" || strings.HasPrefix(l, "=== test:") {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("%s: a log line that is not JSON (--log-format json): %q", n.id, l)
		}
		out = append(out, rec)
	}
	return out
}

// An operator's logs of a three-node start, a kill -9 of the leader and a
// shutdown (--log-format json): one timestamp per line (Raft's lines are the
// node's records, not text wrapped into msg), one "became leader" line per
// leadership with its term, the normal election timeouts below WARN, the
// dead peer's failures logged once per window with a count rather than on
// every heartbeat, and a last "stopped" line.
func TestServe_LogsAnOperatorCanRead(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process-level log test (about 15 s); skipped with -short")
	}
	c := startLoopback(t, 3, "--log-format", "json")
	leader := c.waitLeader(c.nodes, 30*time.Second)
	time.Sleep(time.Second) // a few heartbeats
	leader.kill()
	survivors := c.others(leader)
	next := c.waitLeader(survivors, 30*time.Second)
	time.Sleep(4 * time.Second) // ~6 heartbeats to the dead node fail meanwhile
	for _, n := range survivors {
		n.stop()
	}

	stamp := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d`)
	elected := map[string][]float64{}
	for _, n := range c.nodes {
		recs := logLines(t, n)
		peerFailures := 0
		for _, r := range recs {
			msg, _ := r["msg"].(string)
			level, _ := r["level"].(string)
			if stamp.MatchString(msg) {
				t.Errorf("%s: a timestamp inside msg: %q", n.id, msg)
			}
			if msg == "became leader" {
				term, _ := r["term"].(float64)
				if term == 0 {
					t.Errorf("%s: became leader without a term: %v", n.id, r)
				}
				elected[n.id] = append(elected[n.id], term)
			}
			if strings.Contains(msg, "starting election") && level != "INFO" && level != "DEBUG" {
				t.Errorf("%s: an election timeout at %s: %v", n.id, level, r)
			}
			if (level == "WARN" || level == "ERROR") && strings.Contains(fmt.Sprint(r), leader.id) && n != leader {
				peerFailures++
			}
		}
		if n != leader {
			if peerFailures > 6 {
				t.Errorf("%s logged %d warnings about the dead %s in ~5 s: not rate-limited", n.id, peerFailures, leader.id)
			}
			if last := recs[len(recs)-1]; last["msg"] != "stopped" || last["level"] != "INFO" {
				t.Errorf("%s: last line %v, want an INFO stopped", n.id, last)
			}
		}
	}
	if len(elected[leader.id]) == 0 || len(elected[next.id]) == 0 || elected[next.id][len(elected[next.id])-1] <= elected[leader.id][0] {
		t.Fatalf("became-leader lines %v: want the first leader %s and then %s in a later term", elected, leader.id, next.id)
	}
}
