package main

// Network partitions for the fault-schedule test (chaos_test.go), on the
// namespaces of cluster_netns_linux_test.go. A node alone is cut off by
// taking its bridge port down; a bridge (two nodes that cannot reach each
// other, both reaching the third) marks the two nodes' ports isolated, which
// the bridge then forwards only to and from the third, non-isolated port.

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"testing"
)

// chaosLab is a netLab the nemesis can partition.
type chaosLab struct {
	*netLab
	c     *cluster
	state string // the partition in force, "" when whole
	undo  []func() error
}

// startNetnsChaos starts three nodes in namespaces, or says why it cannot.
func startNetnsChaos(t *testing.T, extra ...string) (*cluster, partitioner, string) {
	if why := netnsUnusable(); why != "" {
		return nil, nil, why
	}
	lab := newNetLab(t, 3)
	c := newCluster(t)
	lab.addNodes(c, extra...)
	for _, n := range c.nodes {
		n.start()
	}
	return c, &chaosLab{netLab: lab, c: c}, ""
}

func (l *chaosLab) cut(kind faultKind, leader int, rng *rand.Rand) string {
	l.heal()
	switch kind {
	case faultBridge:
		// The leader, when known, is the bridge half the time.
		mid := rng.IntN(3)
		if leader >= 0 && rng.IntN(2) == 0 {
			mid = leader
		}
		for i := range l.ns {
			if i != mid {
				l.isolate(i, true)
			}
		}
		l.state = l.c.nodes[(mid+1)%3].id + "|" + l.c.nodes[(mid+2)%3].id + " via " + l.c.nodes[mid].id
	default: // minority, majority: the node given is alone
		if leader < 0 {
			leader = rng.IntN(3)
		}
		l.netLab.cut(leader)
		i := leader
		l.undo = append(l.undo, func() error { return ipRun("link", "set", l.cutIf[i], "up") })
		l.state = l.c.nodes[leader].id + " alone"
	}
	return l.state
}

func (l *chaosLab) isolate(i int, on bool) {
	l.t.Helper()
	state := map[bool]string{true: "on", false: "off"}[on]
	if out, err := exec.Command("bridge", "link", "set", "dev", l.cutIf[i], "isolated", state).CombinedOutput(); err != nil {
		l.t.Fatalf("bridge link set dev %s isolated %s: %v: %s", l.cutIf[i], state, err, out)
	}
	if on {
		l.undo = append(l.undo, func() error {
			out, err := exec.Command("bridge", "link", "set", "dev", l.cutIf[i], "isolated", "off").CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		})
	}
}

func (l *chaosLab) heal() {
	for _, u := range l.undo {
		if err := u(); err != nil {
			l.t.Fatalf("heal %s: %v", l.state, err)
		}
	}
	l.undo, l.state = nil, ""
}
