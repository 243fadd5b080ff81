package meter

import (
	"bytes"
	"errors"
	"testing"

	"github.com/queenmq/queen/server/diskspace"
)

func TestLabelValue_EscapesWhatTheTextFormatEscapes(t *testing.T) {
	if got, want := LabelValue("a\\b\"c\nd\te"), `a\\b\"c\nd`+"\te"; got != want {
		t.Fatalf("LabelValue: %q, want %q", got, want)
	}
}

// The storage gauges skip a directory that could not be read, and a node
// without a guard is never below its reserve.
func TestWriteStorage(t *testing.T) {
	v := diskspace.View{Guarded: true, Guard: diskspace.Status{MinFreeBytes: 100, Dirs: []diskspace.Dir{
		{Path: `/d"1`, Free: 50}, {Path: "/gone", Err: errors.New("no such directory")}}},
		Nodes: []diskspace.Report{{ID: "n2"}, {ID: "n3", OK: true}}}
	var b bytes.Buffer
	WriteStorage(&b, v)
	want := `queen_storage_free_bytes{dir="/d\"1"} 50
queen_storage_reserve_bytes 100
queen_storage_below_reserve 1
queen_storage_nodes_below_reserve 1
`
	if b.String() != want {
		t.Fatalf("guarded:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	WriteStorage(&b, diskspace.View{OK: true})
	if want := "queen_storage_reserve_bytes 0\nqueen_storage_below_reserve 0\nqueen_storage_nodes_below_reserve 0\n"; b.String() != want {
		t.Fatalf("no guard:\n%s\nwant:\n%s", b.String(), want)
	}
}
