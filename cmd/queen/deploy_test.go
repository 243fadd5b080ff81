package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The files under deploy/ and compose.yaml are read by tools this machine
// does not run (Prometheus, Grafana, Kubernetes, Docker), so what can drift
// from the broker is checked here: every metric they query is one a running
// node exports, and every flag they pass is one `queen serve` knows.

var deployMetric = regexp.MustCompile(`\bqueen_[a-z_]+\b`)

// TestDeploy_MetricsExist: each queen_* name in the alert rules and the
// dashboard is in a node's /metrics/prometheus (a histogram's _bucket
// series by its own name).
func TestDeploy_MetricsExist(t *testing.T) {
	t.Parallel()
	alerts := readRepoFile(t, "deploy/prometheus/alerts.yaml")
	dashboard := readRepoFile(t, "deploy/grafana/queen.json")
	var d struct {
		Title  string
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal([]byte(dashboard), &d); err != nil {
		t.Fatalf("deploy/grafana/queen.json is not JSON: %v", err)
	}
	var exprs []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	if len(exprs) == 0 {
		t.Fatal("the dashboard has no queries")
	}

	c := startLoopback(t, 1)
	n := c.waitLeader(c.nodes, 30*time.Second)
	// A push and a pop, so the per-route series exist as they do on any
	// node that has served traffic.
	c.mustPush(c.nodes, 10*time.Second, []pushItem{{Queue: "deploy", Payload: json.RawMessage(`1`)}})
	if code, body, err := c.do(10*time.Second, "GET", n.url("/api/v1/pop/queue/deploy?batch=1"), nil); err != nil || code != 200 {
		t.Fatalf("pop: %d %v %s", code, err, body)
	}
	code, body, err := c.do(10*time.Second, "GET", n.url("/metrics/prometheus"), nil)
	if err != nil || code != 200 {
		t.Fatalf("GET /metrics/prometheus: %d %v", code, err)
	}
	exported := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if name, _, _ := strings.Cut(line, "{"); !strings.HasPrefix(line, "#") && name != "" {
			name, _, _ = strings.Cut(name, " ")
			exported[name] = true
		}
	}
	for file, text := range map[string]string{"deploy/prometheus/alerts.yaml": alerts, "deploy/grafana/queen.json": strings.Join(exprs, "\n")} {
		names := slices.Compact(slices.Sorted(slices.Values(deployMetric.FindAllString(text, -1))))
		if len(names) < 5 {
			t.Errorf("%s names only %v", file, names)
		}
		for _, name := range names {
			if !exported[name] {
				t.Errorf("%s uses %s, which the node does not export", file, name)
			}
		}
	}
}

// TestDeploy_FlagsExist: each --flag compose.yaml and the Kubernetes
// manifest pass to `queen serve` is one its -h lists.
func TestDeploy_FlagsExist(t *testing.T) {
	t.Parallel()
	help, _ := exec.Command(queenBinary(t), "serve", "-h").CombinedOutput()
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z-]+)`).FindAllStringSubmatch(string(help), -1) {
		known[m[1]] = true
	}
	if !known["data"] || !known["peers"] {
		t.Fatalf("could not read the flags of queen serve -h:\n%s", help)
	}
	flag := regexp.MustCompile(`"?--([a-z][a-z-]*)[ =",]`)
	for _, file := range []string{"compose.yaml", "deploy/kubernetes/queen.yaml"} {
		var used []string
		for _, line := range strings.Split(readRepoFile(t, file), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			for _, m := range flag.FindAllStringSubmatch(line, -1) {
				used = append(used, m[1])
			}
		}
		if !slices.Contains(used, "peers") || !slices.Contains(used, "raft") {
			t.Errorf("%s passes %v: no --peers and --raft, so the flag scan missed them", file, used)
		}
		for _, f := range used {
			if !known[f] {
				t.Errorf("%s passes --%s, which queen serve does not know", file, f)
			}
		}
	}
}

func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
