package meter

import (
	"bytes"
	"errors"
	"strconv"
	"testing"

	"github.com/queenmq/queen/raft"
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

// voterLayout is a layout of nodes n1..nodes whose groups have the voters
// given, the directory first.
func voterLayout(nodes int, voters ...[]string) raft.Layout {
	var l raft.Layout
	for i := range nodes {
		l.Nodes = append(l.Nodes, raft.LayoutNode{ID: "n" + strconv.Itoa(i+1)})
	}
	for g, v := range voters {
		l.Groups = append(l.Groups, raft.LayoutGroup{ID: uint32(g), Members: v})
	}
	return l
}

// Each group's voters are written, the directory's too; a data group
// below R counts, and the directory below min(5, nodes); a group whose
// voters are not on record here (none) is written as 0 and not counted;
// with R 0 (every group on every node) no data group counts.
func TestWriteVoters(t *testing.T) {
	three := []string{"n1", "n2", "n3"}
	for _, c := range []struct {
		name     string
		l        raft.Layout
		replicas uint32
		want     string
	}{
		{"healthy", voterLayout(3, three, three, three), 3, `queen_raft_group_voters{group="0"} 3
queen_raft_group_voters{group="1"} 3
queen_raft_group_voters{group="2"} 3
queen_groups_under_replicated 0
`},
		{"a node removed from three", voterLayout(2, []string{"n1", "n2"}, []string{"n1", "n2"}, []string{"n2", "n1"}), 3, `queen_raft_group_voters{group="0"} 2
queen_raft_group_voters{group="1"} 2
queen_raft_group_voters{group="2"} 2
queen_groups_under_replicated 2
`},
		{"directory below five of seven, one group unknown", voterLayout(7, []string{"n1", "n2", "n3", "n4"}, three, nil, []string{"n4", "n5"}), 3, `queen_raft_group_voters{group="0"} 4
queen_raft_group_voters{group="1"} 3
queen_raft_group_voters{group="2"} 0
queen_raft_group_voters{group="3"} 2
queen_groups_under_replicated 2
`},
		{"every group on every node", voterLayout(4, three, three), 0, `queen_raft_group_voters{group="0"} 3
queen_raft_group_voters{group="1"} 3
queen_groups_under_replicated 1
`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			WriteVoters(&b, c.l, c.replicas)
			if b.String() != c.want {
				t.Fatalf("got:\n%s\nwant:\n%s", b.String(), c.want)
			}
		})
	}
}
