package cluster_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/backup"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/rafttest"
)

// A Host's backup (the directory and every data group) restores into a
// new one-node Host that serves every group's state and takes writes at
// the next index.
func TestRestore_EveryGroupOfAHost(t *testing.T) {
	t.Parallel()
	c := openHosts(t, 1, 2)
	c.leaders(nil)
	h := c.h[0]
	for deadline := time.Now().Add(20 * time.Second); h.GroupCount() != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the directory never recorded the group count: %d", h.GroupCount())
		}
	}
	for g := uint32(1); g <= 2; g++ {
		for k := range 5 {
			push(t, h.Group(g), fmt.Sprintf("q%d", g), fmt.Sprintf("t%d", k))
		}
	}
	m := backup.Manifest{Node: "n1"}
	var snaps []*engine.Snapshot
	for _, n := range h.Replicas() {
		s, err := n.Engine().Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		snaps = append(snaps, s)
		m.Groups = append(m.Groups, backup.Group{ID: n.GroupID(), Index: s.Applied})
	}
	var file bytes.Buffer
	w, err := backup.NewWriter(&file, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		if err := w.WriteGroup(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	r, err := backup.NewReader(bytes.NewReader(file.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	addr := rafttest.FreeAddrs(t, 1)[0]
	dir := filepath.Join(t.TempDir(), "r1")
	opts := rafttest.Options("r1", dir)
	opts.RaftAddr = addr
	if err := raft.Restore(opts, r); err != nil {
		t.Fatalf("restore: %v", err)
	}
	restored := &hosts{t: t, g: 2, h: make([]*cluster.Host, 1), peers: []raft.Peer{{ID: "r1", Addr: addr}}, dirs: []string{dir}}
	t.Cleanup(func() { restored.stop(0) })
	rh := restored.start(0)
	restored.leaders(nil)
	if got := rh.GroupCount(); got != 2 {
		t.Fatalf("restored directory counts %d groups, want 2", got)
	}
	for g := uint32(1); g <= 2; g++ {
		q := fmt.Sprintf("q%d", g)
		if r := push(t, rh.Group(g), q, "t4"); r.Status != engine.Duplicate {
			t.Fatalf("group %d: t4 answered %d after the restore, want a duplicate", g, r.Status)
		}
		if r := push(t, rh.Group(g), q, "after"); r.Status != engine.Queued {
			t.Fatalf("group %d: a new push answered %d", g, r.Status)
		}
		if st := rh.Group(g).Status(); st.Voters != 1 || st.Applied <= m.Groups[g].Index {
			t.Fatalf("group %d: %+v, want one voter past index %d", g, st, m.Groups[g].Index)
		}
	}
}
