package cluster_test

import (
	"slices"
	"testing"
)

// On R of N, a host's status of a group it does not host is role "none"
// with the leader and voters the directory records (its idle replica
// knows no leader; /health needs every group led to call the node
// healthy); of a group it hosts, its replica's own.
func TestHost_GroupStatusOfAGroupNotHosted(t *testing.T) {
	t.Parallel()
	c := openSpreadHosts(t, 4, 4, 3)
	l := c.h[0].Layout()
	for i, h := range c.h {
		for g := uint32(1); g <= 4; g++ {
			st := h.GroupStatus(g)
			member := slices.Contains(l.Groups[g].Members, c.peers[i].ID)
			if !st.HasLeader() || st.LeaderHTTP == "" || st.Voters != 3 || (st.Role == "none") == member {
				t.Fatalf("group %d on %s (member %v): %+v; want a leader with its address, 3 voters, role none only off the group",
					g, c.peers[i].ID, member, st)
			}
		}
	}
}
