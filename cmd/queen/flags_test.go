package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// newTestFlags is a flag set with one flag of each kind the commands use,
// and one that has an alias.
func newTestFlags() (*flag.FlagSet, *string, *int, *string) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	url := fs.String("url", "http://default", "node URL")
	n := fs.Int("max-body-bytes", 7, "a number")
	level := fs.String("log-level", "info", "a level")
	return fs, url, n, level
}

func TestParseEnvFlags_TheRule(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	t.Run("unset everywhere: the default", func(t *testing.T) {
		fs, url, n, _ := newTestFlags()
		if err := parseEnvFlags(fs, nil, env(nil)); err != nil {
			t.Fatal(err)
		}
		if *url != "http://default" || *n != 7 {
			t.Fatalf("url %q n %d, want the defaults", *url, *n)
		}
	})
	t.Run("QUEEN_<FLAG> sets it", func(t *testing.T) {
		fs, url, n, _ := newTestFlags()
		if err := parseEnvFlags(fs, nil, env(map[string]string{"QUEEN_URL": "http://env", "QUEEN_MAX_BODY_BYTES": "42"})); err != nil {
			t.Fatal(err)
		}
		if *url != "http://env" || *n != 42 {
			t.Fatalf("url %q n %d, want the environment's", *url, *n)
		}
	})
	t.Run("the command line wins", func(t *testing.T) {
		fs, url, _, _ := newTestFlags()
		if err := parseEnvFlags(fs, []string{"--url", "http://flag"}, env(map[string]string{"QUEEN_URL": "http://env"})); err != nil {
			t.Fatal(err)
		}
		if *url != "http://flag" {
			t.Fatalf("url %q, want the flag's", *url)
		}
	})
	t.Run("QUEEN_<FLAG> before an alias, the alias when alone", func(t *testing.T) {
		fs, _, _, level := newTestFlags()
		if err := parseEnvFlags(fs, nil, env(map[string]string{"QUEEN_LOG_LEVEL": "debug", "LOG_LEVEL": "error"})); err != nil {
			t.Fatal(err)
		}
		if *level != "debug" {
			t.Fatalf("level %q, want QUEEN_LOG_LEVEL's", *level)
		}
		fs, _, _, level = newTestFlags()
		if err := parseEnvFlags(fs, nil, env(map[string]string{"LOG_LEVEL": "error"})); err != nil {
			t.Fatal(err)
		}
		if *level != "error" {
			t.Fatalf("level %q, want LOG_LEVEL's", *level)
		}
	})
	t.Run("a bad value names its variable", func(t *testing.T) {
		fs, _, _, _ := newTestFlags()
		err := parseEnvFlags(fs, nil, env(map[string]string{"QUEEN_MAX_BODY_BYTES": "lots"}))
		if err == nil || !strings.Contains(err.Error(), "QUEEN_MAX_BODY_BYTES") || !strings.Contains(err.Error(), `"lots"`) {
			t.Fatalf("error %v, want one naming QUEEN_MAX_BODY_BYTES and the value", err)
		}
	})
	t.Run("only the flags named read the environment", func(t *testing.T) {
		fs, url, n, _ := newTestFlags()
		if err := parseEnvFlags(fs, nil, env(map[string]string{"QUEEN_URL": "http://env", "QUEEN_MAX_BODY_BYTES": "42"}), "url"); err != nil {
			t.Fatal(err)
		}
		if *url != "http://env" || *n != 7 {
			t.Fatalf("url %q n %d, want url from the environment and n its default", *url, *n)
		}
	})
	t.Run("usage lists the variables of the flags that read them", func(t *testing.T) {
		fs, _, _, _ := newTestFlags()
		if err := parseEnvFlags(fs, nil, env(nil), "url", "log-level"); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]string{
			"url":            "node URL (env QUEEN_URL)",
			"log-level":      "a level (env QUEEN_LOG_LEVEL, LOG_LEVEL)",
			"max-body-bytes": "a number",
		} {
			if got := fs.Lookup(name).Usage; got != want {
				t.Errorf("usage of --%s %q, want %q", name, got, want)
			}
		}
	})
}

// queen serve reads its flags by the rule, its older names and Queen's.
func TestParseServe_Environment(t *testing.T) {
	c, _ := parseOrError(t, nil, map[string]string{"QUEEN_DATA": "/d1", "QUEEN_DATA_DIR": "/d2"}, "")
	if c.data != "/d1" {
		t.Errorf("data %q with QUEEN_DATA and QUEEN_DATA_DIR, want QUEEN_DATA's", c.data)
	}
	c, _ = parseOrError(t, nil, map[string]string{"QUEEN_DATA_DIR": "/d2"}, "")
	if c.data != "/d2" {
		t.Errorf("data %q with QUEEN_DATA_DIR, want it", c.data)
	}
	c, _ = parseOrError(t, []string{"--data", "/flag"}, map[string]string{"QUEEN_DATA": "/d1"}, "")
	if c.data != "/flag" {
		t.Errorf("data %q with --data and QUEEN_DATA, want the flag's", c.data)
	}
	c, _ = parseOrError(t, nil, map[string]string{"HOST": "127.0.0.1", "PORT": "7000"}, "")
	if c.http != "127.0.0.1:7000" {
		t.Errorf("http %q from HOST and PORT, want 127.0.0.1:7000", c.http)
	}
	c, _ = parseOrError(t, nil, map[string]string{"PORT": "7000"}, "")
	if c.http != "0.0.0.0:7000" {
		t.Errorf("http %q from PORT alone, want 0.0.0.0:7000", c.http)
	}
	c, _ = parseOrError(t, nil, map[string]string{"QUEEN_HTTP": "127.0.0.2:7001", "HOST": "127.0.0.1", "PORT": "7000"}, "")
	if c.http != "127.0.0.2:7001" {
		t.Errorf("http %q with QUEEN_HTTP, HOST and PORT, want QUEEN_HTTP's", c.http)
	}
	c, _ = parseOrError(t, nil, map[string]string{"QUEEN_NODE_ID": "n7", "QUEEN_RAFT_ADDR": "127.0.0.1:7100"}, "")
	if c.nodeID != "n7" || c.raftAddr != "127.0.0.1:7100" {
		t.Errorf("node-id %q raft %q, want n7 and QUEEN_RAFT_ADDR's", c.nodeID, c.raftAddr)
	}
	c, _ = parseOrError(t, nil, map[string]string{"QUEEN_MAX_BODY_BYTES": "1048576"}, "")
	if c.maxBody != 1<<20 {
		t.Errorf("max body %d from QUEEN_MAX_BODY_BYTES, want 1 MiB", c.maxBody)
	}
	// Before the rule a bad QUEEN_MAX_BODY_BYTES was silently the default.
	parseOrError(t, nil, map[string]string{"QUEEN_MAX_BODY_BYTES": "64MB"}, "QUEEN_MAX_BODY_BYTES")
	parseOrError(t, nil, map[string]string{"QUEEN_SNAPSHOT_INTERVAL": "often"}, "QUEEN_SNAPSHOT_INTERVAL")
}

// queen leave takes the URL, token and secret from the environment, but
// never the node to remove: in a node's own shell QUEEN_NODE_ID names it.
func TestLeave_NodeIDNeverFromTheEnvironment(t *testing.T) {
	t.Setenv("QUEEN_NODE_ID", "node1")
	err := leave(nil)
	if err == nil || !strings.Contains(err.Error(), "--node-id is required") {
		t.Fatalf("leave with QUEEN_NODE_ID set and no --node-id: %v, want --node-id is required", err)
	}
}

// The README's configuration table is the list `queen serve -h` prints:
// every flag has its row, with the variable the rule gives it and the
// other names it is read from, and no row names a flag that is gone.
func TestREADME_ConfigurationTableIsServeFlags(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(queenBinary(t), "serve", "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("queen serve -h: %v\n%s", err, out)
	}
	help := map[string][]string{} // flag -> its variables, the rule's first
	entry := regexp.MustCompile(`(?m)^  -(\S+)(?: \S+)?\n\s+(.*)$`)
	vars := regexp.MustCompile(`\(env ([A-Z0-9_, ]+)\)`)
	for _, m := range entry.FindAllStringSubmatch(string(out), -1) {
		v := vars.FindStringSubmatch(m[2])
		if v == nil {
			t.Errorf("queen serve -h: --%s names no variable: %s", m[1], m[2])
			continue
		}
		help[m[1]] = strings.Split(v[1], ", ")
	}
	if len(help) < 20 {
		t.Fatalf("read %d flags from queen serve -h, want them all:\n%s", len(help), out)
	}

	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := bytes.Cut(readme, []byte("\n## Configuration\n"))
	if !ok {
		t.Fatal("README has no Configuration section")
	}
	section, _, _ = bytes.Cut(section, []byte("\n## "))
	row := regexp.MustCompile("(?m)^\\| `--([a-z-]+)` \\| `([A-Z0-9_]+)` \\|(.*)$")
	rows := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(section), -1) {
		name, variable, rest := m[1], m[2], m[3]
		rows[name] = true
		names, known := help[name]
		if !known {
			t.Errorf("README row for --%s, which queen serve does not have", name)
			continue
		}
		if variable != names[0] {
			t.Errorf("README gives --%s the variable %s, queen serve reads %s", name, variable, names[0])
		}
		for _, alias := range names[1:] {
			if !strings.Contains(rest, alias) {
				t.Errorf("README row for --%s does not mention %s, which it is also read from", name, alias)
			}
		}
	}
	for name := range help {
		if !rows[name] {
			t.Errorf("README has no row for --%s", name)
		}
	}
}

// With --peers and --join both given (one template for every replica),
// the nodes --peers lists found the cluster and any other joins it.
func TestParseServe_PeersAndJoin(t *testing.T) {
	args := func(id string) []string {
		return []string{"--node-id", id, "--raft", "127.0.0.1:7004", "--cluster-secret", "s",
			"--peers", "n1@127.0.0.1:7001,n2@127.0.0.1:7002,n3@127.0.0.1:7003", "--join", "http://127.0.0.1:6632"}
	}
	c, _ := parseOrError(t, args("n2"), nil, "")
	if c.join != "" || len(c.peers) != 3 {
		t.Errorf("n2, which --peers lists: join %q and %d peers, want no join and 3 peers", c.join, len(c.peers))
	}
	c, _ = parseOrError(t, args("n4"), nil, "")
	if c.join != "http://127.0.0.1:6632" || len(c.peers) != 0 {
		t.Errorf("n4, which --peers does not list: join %q and %d peers, want the join and no peers", c.join, len(c.peers))
	}
}

// --groups above 1 needs what the groups share (the Raft listener) and
// what nodes relay with (the cluster secret); QUEEN_GROUPS sets it too.
func TestParseServe_Groups(t *testing.T) {
	peers := []string{"--node-id", "n1", "--peers", "n1@127.0.0.1:7001,n2@127.0.0.1:7002,n3@127.0.0.1:7003"}
	parseOrError(t, []string{"--groups", "0"}, nil, "bad --groups 0")
	parseOrError(t, []string{"--groups", "3"}, nil, "--groups 3 needs --raft")
	parseOrError(t, peers, map[string]string{"QUEEN_GROUPS": "3"}, "needs the cluster secret")
	parseOrError(t, []string{"--groups", "2", "--raft", "127.0.0.1:7004", "--join", "http://127.0.0.1:6632", "--cluster-secret", "s"}, nil, "")
	c, _ := parseOrError(t, append(peers, "--cluster-secret", "s"), map[string]string{"QUEEN_GROUPS": "3"}, "")
	if c.groups != 3 || c.raftAddr != "127.0.0.1:7001" {
		t.Fatalf("groups %d raft %q, want 3 and n1's --peers address", c.groups, c.raftAddr)
	}
	if c, _ := parseOrError(t, nil, nil, ""); c.groups != 1 {
		t.Fatalf("default --groups %d, want 1", c.groups)
	}
	// One node with its own Raft listener may run several groups.
	parseOrError(t, []string{"--groups", "4", "--raft", "127.0.0.1:7004"}, nil, "")
}

// --replicas is R: at least 1, possibly more than the founders (the
// groups gain voters as nodes join), and with one group only what it is
// anyway, every node. Unset, a founder's first start takes 3, a lone
// founder's too (its groups gain voters as nodes join); a joiner's is the
// cluster's, in its directory.
func TestParseServe_Replicas(t *testing.T) {
	peers := func(n int) []string {
		var list []string
		for i := range n {
			list = append(list, fmt.Sprintf("n%d@127.0.0.1:%d", i+1, 7001+i))
		}
		return []string{"--node-id", "n1", "--cluster-secret", "s", "--data", t.TempDir(), "--peers", strings.Join(list, ",")}
	}
	grouped := append(peers(4), "--groups", "4")
	parseOrError(t, append(grouped, "--replicas", "0"), nil, "bad --replicas 0")
	parseOrError(t, append(grouped, "--replicas", "-2"), nil, "bad --replicas -2")
	parseOrError(t, grouped, map[string]string{"QUEEN_REPLICAS": "0"}, "bad --replicas 0")
	parseOrError(t, append(peers(3), "--replicas", "2"), nil, "--replicas 2 needs --groups above 1")
	parseOrError(t, []string{"--raft", "127.0.0.1:7004", "--replicas", "3", "--join", "http://127.0.0.1:6632", "--cluster-secret", "s"}, nil, "--replicas 3 needs --groups above 1")
	if c, _ := parseOrError(t, append(peers(3), "--replicas", "3"), nil, ""); c.replicaCount() != 0 {
		t.Errorf("--groups 1 --replicas 3 of 3: R %d, want 0 (one group is a plain node)", c.replicaCount())
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want int
	}{
		{append(peers(4), "--groups", "4"), nil, 3},
		{append(peers(2), "--groups", "4"), nil, 3},
		{append(peers(5), "--groups", "4", "--replicas", "5"), nil, 5},
		{append(peers(2), "--groups", "4", "--replicas", "5"), nil, 5},
		{append(peers(4), "--groups", "4"), map[string]string{"QUEEN_REPLICAS": "2"}, 2},
		{[]string{"--groups", "4", "--raft", "127.0.0.1:7004", "--data", t.TempDir()}, nil, 3},
		{[]string{"--groups", "4", "--raft", "127.0.0.1:7004", "--replicas", "1"}, nil, 1},
		{[]string{"--groups", "2", "--raft", "127.0.0.1:7004", "--replicas", "2"}, nil, 2},
		// A joiner from the founders' template: the cluster's R stands.
		{[]string{"--node-id", "n9", "--groups", "4", "--raft", "127.0.0.1:7009", "--cluster-secret", "s", "--replicas", "3",
			"--peers", "n1@127.0.0.1:7001,n2@127.0.0.1:7002,n3@127.0.0.1:7003", "--join", "http://127.0.0.1:6632"}, nil, 0},
	} {
		c, _ := parseOrError(t, tc.args, tc.env, "")
		if got := c.replicaCount(); got != tc.want {
			t.Errorf("%v %v: R %d, want %d", tc.args, tc.env, got, tc.want)
		}
	}
	// A founder restarted on its data directory passes no default: a
	// cluster from before --replicas keeps every group on every node.
	args := append(peers(4), "--groups", "4")
	c, _ := parseOrError(t, args, nil, "")
	if err := os.MkdirAll(filepath.Join(c.data, "raft"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := c.replicaCount(); got != 0 {
		t.Errorf("a founder with a Raft log: R %d, want 0", got)
	}
	c, _ = parseOrError(t, append(args, "--replicas", "3"), nil, "")
	if got := c.replicaCount(); got != 3 {
		t.Errorf("a founder with a Raft log and --replicas 3: R %d, want 3", got)
	}
}
