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
	"strings"
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
// With spare, a fourth namespace is built for the nodes join faults start
// (one at a time: each joiner leaves before the next joins), and spawn
// makes them.
func startNetnsChaos(t *testing.T, spare bool, extra ...string) (*cluster, partitioner, spawner, string) {
	if why := netnsUnusable(); why != "" {
		return nil, nil, nil, why
	}
	n := 3
	if spare {
		n++
	}
	lab := newNetLab(t, n)
	c := newCluster(t)
	lab.addNodes(c, 3, extra...)
	for _, n := range c.nodes {
		n.start()
	}
	spawn := func(id string, via int) *qnode {
		return lab.node(c, 3, id, append([]string{"--join", fmt.Sprintf("http://%s:%d", lab.nodeIP[via], labHTTPPort)}, extra...)...)
	}
	return c, &chaosLab{netLab: lab, c: c}, spawn, ""
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
		var cut []string
		for i := range l.ns {
			if i != mid {
				l.isolate(i, true)
				cut = append(cut, l.name(i))
			}
		}
		l.state = strings.Join(cut, "|") + " via " + l.name(mid)
	default: // minority, majority: the node given is alone
		if leader < 0 {
			leader = rng.IntN(3)
		}
		l.netLab.cut(leader)
		i := leader
		l.undo = append(l.undo, func() error { return ipRun("link", "set", l.cutIf[i], "up") })
		l.state = l.name(leader) + " alone"
	}
	return l.state
}

// name is the node in namespace i: a founder, or the joiner in the spare
// namespace.
func (l *chaosLab) name(i int) string {
	if i < 3 {
		return l.c.nodes[i].id
	}
	return "ns4 (the joiners)"
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
