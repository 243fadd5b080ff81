package cluster_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenmq/queen/raft"
)

// describeLayout is l in one line, for the failures and for comparing
// two nodes' layouts.
func describeLayout(l raft.Layout) string {
	var b strings.Builder
	for _, n := range l.Nodes {
		fmt.Fprintf(&b, "%s@%s live=%v ", n.ID, n.HTTP, n.Live)
	}
	for _, g := range l.Groups {
		fmt.Fprintf(&b, "g%d%v leader=%q ", g.ID, g.Members, g.Leader)
	}
	return b.String()
}

// laidOut reports whether l lists the servers ids at http-<id>, live
// unless down, and groups each with every id as a member and leaders[g]
// as its leader.
func laidOut(l raft.Layout, ids []string, down string, groups []uint32, leaders map[uint32]string) bool {
	if len(l.Nodes) != len(ids) || len(l.Groups) != len(groups) {
		return false
	}
	for i, n := range l.Nodes {
		if n.ID != ids[i] || n.HTTP != "http-"+ids[i] || n.Live != (n.ID != down) {
			return false
		}
	}
	for i, g := range l.Groups {
		if g.ID != groups[i] || !slices.Equal(g.Members, ids) || g.Leader != leaders[g.ID] {
			return false
		}
	}
	return true
}

// versionsUnless answers a version read at http-<id> for any id whose
// host is not down.
type versionsUnless struct {
	mu   sync.Mutex
	down map[string]bool
}

func (v *versionsUnless) NodeVersion(_ context.Context, addr string) (raft.NodeVersion, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	id, ok := strings.CutPrefix(addr, "http-")
	if !ok || v.down[id] {
		return raft.NodeVersion{}, fmt.Errorf("%w: nobody at %s", raft.ErrForward, addr)
	}
	return raft.NodeVersion{ID: id, Command: 1}, nil
}

func TestHost_LayoutListsEveryGroupItsMembersAndLeader(t *testing.T) {
	t.Parallel()
	versions := &versionsUnless{down: map[string]bool{}}
	c := openHostsWith(t, 3, 2, func(o *raft.Options) { o.Versions, o.VersionInterval = versions, 50*time.Millisecond })
	c.relayInProcess() // followers announce their addresses through it
	ids, groups := []string{"n1", "n2", "n3"}, []uint32{0, 1, 2}
	want := func(down string) {
		t.Helper()
		var last string
		if !eventually(func() bool {
			leaders, ok := c.agreedLeaders()
			if !ok {
				return false
			}
			named := map[uint32]string{}
			for g, i := range leaders {
				named[uint32(g)] = c.peers[i].ID
			}
			for _, h := range c.h {
				if h == nil {
					continue
				}
				if l := h.Layout(); !laidOut(l, ids, down, groups, named) {
					last = describeLayout(l)
					return false
				}
			}
			return true
		}) {
			t.Fatalf("timed out waiting for every host's layout (%s down); the last: %s", cmp.Or(down, "none"), last)
		}
	}
	want("")
	versions.mu.Lock()
	versions.down["n3"] = true
	versions.mu.Unlock()
	c.stop(2)
	want("n3")
}
