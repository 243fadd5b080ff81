package queen_test

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImports keeps the layering of ARCHITECTURE.md true: imports point inward
// (cmd -> server -> cluster -> raft -> engine -> internal), leaf packages import nothing
// of ours but internal/, internal/ imports nothing of ours, and
// each third-party library stays behind the one layer that owns it. cluster,
// the manager of a node's groups, sits above raft, one replica of one group:
// raft never imports it, and it reaches hashicorp/raft only through raft's
// exported API (so it cannot touch a Node's unexported fields either).
func TestImports(t *testing.T) {
	const module = "github.com/queenmq/queen"
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkg struct {
		ImportPath   string
		Imports      []string
		TestImports  []string
		XTestImports []string
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list returned no packages")
	}
	rel := func(path string) string { return strings.TrimPrefix(strings.TrimPrefix(path, module), "/") }
	under := func(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }
	ours := func(path string) bool { return path == module || strings.HasPrefix(path, module+"/") }
	leaves := []string{"engine/keyspace", "engine/segment", "engine/cursor", "engine/backup", "server/auth", "server/diskspace", "server/listener", "server/memory"}

	for _, p := range pkgs {
		from := rel(p.ImportPath)
		check := func(imp string, inTest bool) {
			to := rel(imp)
			bad := func(why string) { t.Errorf("%s imports %s: %s", from, imp, why) }
			if ours(imp) {
				switch {
				case under(from, "engine") && (under(to, "raft") || under(to, "cluster") || under(to, "server") || under(to, "cmd")):
					bad("engine must not import raft, cluster, server or cmd")
				case under(from, "raft") && (under(to, "cluster") || under(to, "server") || under(to, "cmd")):
					bad("raft must not import cluster, server or cmd")
				case under(from, "cluster") && (under(to, "server") || under(to, "cmd")):
					bad("cluster must not import server or cmd")
				case under(from, "server") && under(to, "cmd"):
					bad("server must not import cmd")
				case strings.HasPrefix(from, "server/") && to == "server" && !strings.HasSuffix(from, "test"):
					bad("server's sub-packages are cut by concern: server imports them, never the reverse")
				case under(to, "fuzz") || (under(to, "bench") && !under(from, "cmd")):
					bad("nothing imports fuzz, and only cmd imports bench (queen bench)")
				case strings.HasSuffix(to, "test") && strings.Contains(to, "/") && !inTest && !under(from, "bench") && !strings.HasSuffix(from, "test"):
					bad("test helper packages are imported only from _test.go files")
				}
				switch {
				case under(from, "internal") && !inTest:
					bad("internal packages are the roots: they import no project package")
				case under(to, "internal"):
					// Every package may use the roots, leaves included.
				case slices.Contains(leaves, from) && !inTest:
					bad("leaf packages import no project package but internal/")
				}
				return
			}
			switch {
			case strings.HasPrefix(imp, "github.com/valyala/fasthttp") || strings.HasPrefix(imp, "github.com/fasthttp/"):
				if !under(from, "server") && !under(from, "cluster") && !under(from, "bench") && !(under(from, "cmd") && inTest) {
					bad("only server and cluster import fasthttp")
				}
			case strings.HasPrefix(imp, "github.com/hashicorp/raft"):
				if !under(from, "raft") && !under(from, "bench") && !under(from, "fuzz") {
					bad("only raft imports hashicorp/raft")
				}
			case strings.HasPrefix(imp, "github.com/golang-jwt/jwt") || strings.HasPrefix(imp, "github.com/MicahParks/"):
				if !under(from, "server/auth") && !inTest {
					bad("only server/auth verifies tokens")
				}
			case strings.HasPrefix(imp, "github.com/anishathalye/porcupine"):
				if !inTest {
					bad("porcupine checks test histories: only _test.go files import it")
				}
			case strings.HasPrefix(imp, "github.com/cockroachdb/pebble"):
				if !under(from, "engine") && !under(from, "raft/logstore") && !under(from, "bench") {
					bad("only engine and raft/logstore import pebble")
				}
			}
		}
		for _, imp := range p.Imports {
			check(imp, false)
		}
		for _, imp := range append(append([]string{}, p.TestImports...), p.XTestImports...) {
			check(imp, true)
		}
	}
}
