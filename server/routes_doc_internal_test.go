package server

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The route table is written down twice besides routes.go: docs/api.md §15
// (with each route's callers) and the list in doc.go (with a note). These
// tests hold both to the router, so a route cannot be added, dropped or
// changed in one place only.

var updateRouteDocs = flag.Bool("update-route-docs", false, "rewrite doc.go's route list from the route table (go generate)")

const (
	apiDoc = "../docs/api.md"
	pkgDoc = "doc.go"
)

// routeRow is a route as the documents show it.
type routeRow struct {
	name, level, disk, read string
}

func (r *route) row() routeRow {
	disk := map[diskUse]string{reads: "reads", writesLittle: "little", addsData: "adds", perCommand: "per command"}[r.disk]
	return routeRow{r.name, r.level.String(), disk, r.read.String()}
}

// apiRows reads docs/api.md §15's table: "METHOD path" → row. Rows whose
// path is not a pattern in backquotes (OPTIONS on any path) are not routes
// of the table.
func apiRows(t *testing.T) map[string]routeRow {
	t.Helper()
	b, err := os.ReadFile(apiDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## 15. ")
	if !ok {
		t.Fatalf("%s has no section 15 (the route summary)", apiDoc)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var header []string
	rows := map[string]routeRow{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		if header == nil {
			header = cells
			if strings.Join(header[:min(6, len(header))], " ") != "Method Path Name Level Disk Read" {
				t.Fatalf("%s §15's table has the columns %q, want Method, Path, Name, Level, Disk, Read first", apiDoc, header)
			}
			continue
		}
		if len(cells) != len(header) {
			t.Fatalf("%s §15: %d cells in %q, want %d", apiDoc, len(cells), line, len(header))
		}
		path, ok := strings.CutPrefix(cells[1], "`")
		if !ok {
			continue
		}
		key := cells[0] + " " + strings.TrimSuffix(path, "`")
		if _, dup := rows[key]; dup {
			t.Errorf("%s §15 lists %s twice", apiDoc, key)
		}
		rows[key] = routeRow{cells[2], cells[3], cells[4], cells[5]}
	}
	return rows
}

// docs/api.md §15 lists every route of the router, and only those, with
// the router's name, access level, disk class and read consistency.
func TestRouteDocs_APITableIsTheRouters(t *testing.T) {
	t.Parallel()
	doc := apiRows(t)
	for _, r := range (&Server{}).routeTable() {
		key := r.method + " " + r.pattern
		got, ok := doc[key]
		delete(doc, key)
		switch want := r.row(); {
		case !ok:
			t.Errorf("%s §15 lacks the route %s: add | %s | `%s` | %s | %s | %s | %s | (callers) |",
				apiDoc, key, r.method, r.pattern, want.name, want.level, want.disk, want.read)
		case got != want:
			t.Errorf("%s §15 says %s is %+v, the router %+v", apiDoc, key, got, want)
		}
	}
	for key := range doc {
		t.Errorf("%s §15 lists %s, which the router does not serve", apiDoc, key)
	}
}

// doc.go's route list is generated from the table (go generate ./server);
// the notes after each row are kept by hand and survive a regeneration.
func TestRouteDocs_DocGoListIsGenerated(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(pkgDoc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	from, to := routeList(lines)
	if from < 0 {
		t.Fatalf("%s has no route list (lines \"//\\t\" under \"// # Routes\")", pkgDoc)
	}
	notes := map[string]string{}
	for _, l := range lines[from:to] {
		if f := strings.Fields(strings.TrimPrefix(l, "//")); len(f) >= 4 {
			notes[f[0]+" "+f[1]] = strings.Join(f[4:], " ")
		}
	}
	want := listRoutes((&Server{}).routeTable(), notes)
	if strings.Join(lines[from:to], "\n") == strings.Join(want, "\n") {
		return
	}
	if *updateRouteDocs {
		out := append(append(append([]string(nil), lines[:from]...), want...), lines[to:]...)
		if err := os.WriteFile(pkgDoc, []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's route list is not the route table's: run go generate ./server. Want:\n%s", pkgDoc, strings.Join(want, "\n"))
}

// routeList finds doc.go's route list: the run of "//\t" lines of the
// "# Routes" section; from is -1 when there is none.
func routeList(lines []string) (from, to int) {
	from, to = -1, -1
	section := false
	for i, l := range lines {
		switch {
		case l == "// # Routes":
			section = true
		case !section:
		case strings.HasPrefix(l, "//\t"):
			if from < 0 {
				from = i
			}
			to = i + 1
		case from >= 0 || strings.HasPrefix(l, "// # "):
			return from, to
		}
	}
	return from, to
}

// listRoutes writes the route list: method, pattern, level and read
// consistency in aligned columns, then the route's note.
func listRoutes(table []route, notes map[string]string) []string {
	width := 0
	for _, r := range table {
		width = max(width, len(r.pattern))
	}
	out := make([]string, len(table))
	for i, r := range table {
		row := r.row()
		line := fmt.Sprintf("//\t%-7s %-*s %-10s %-12s %s", r.method, width, r.pattern, row.level, row.read, notes[r.method+" "+r.pattern])
		out[i] = strings.TrimRight(line, " ")
	}
	return out
}
