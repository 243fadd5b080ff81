package placement_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/queenmq/queen/raft/placement"
)

func nodes(ids ...string) []placement.Node {
	var ns []placement.Node
	for _, id := range ids {
		ns = append(ns, placement.Node{ID: id, Live: true})
	}
	return ns
}

func empty(g int) []placement.Group {
	var gs []placement.Group
	for i := 1; i <= g; i++ {
		gs = append(gs, placement.Group{ID: uint32(i)})
	}
	return gs
}

// apply carries a plan out as a caller would, failing the test on a step
// that could not run or that leaves a group with fewer voters than it
// had (an add always comes before its remove).
func apply(t *testing.T, groups []placement.Group, nodes []placement.Node, steps []placement.Step) []placement.Group {
	t.Helper()
	out := make([]placement.Group, len(groups))
	byID := map[uint32]*placement.Group{}
	for i, g := range groups {
		out[i] = placement.Group{ID: g.ID, Voters: slices.Clone(g.Voters)}
		byID[g.ID] = &out[i]
	}
	eligible := map[string]bool{}
	for _, n := range nodes {
		eligible[n.ID] = n.Live && !n.Leaving
	}
	for _, s := range steps {
		g := byID[s.Group]
		if g == nil {
			t.Fatalf("step %+v: no such group", s)
		}
		if s.Add != "" {
			if !eligible[s.Add] || slices.Contains(g.Voters, s.Add) {
				t.Fatalf("step %+v: adds %s to %v (eligible %v)", s, s.Add, g.Voters, eligible[s.Add])
			}
			g.Voters = append(g.Voters, s.Add)
		}
		if s.Remove != "" {
			i := slices.Index(g.Voters, s.Remove)
			if i < 0 {
				t.Fatalf("step %+v: removes %s, not a voter of %v", s, s.Remove, g.Voters)
			}
			g.Voters = slices.Delete(g.Voters, i, i+1)
		}
	}
	return out
}

// check asserts what a plan promises: every group has r voters (or every
// eligible node, if fewer), all eligible; the eligible nodes' loads
// differ by at most one and none is above ceil(G·r/N); planning again
// changes nothing.
func check(t *testing.T, groups []placement.Group, nodes []placement.Node, r int) {
	t.Helper()
	var eligible []string
	for _, n := range nodes {
		if n.Live && !n.Leaving {
			eligible = append(eligible, n.ID)
		}
	}
	want := min(r, len(eligible))
	load := map[string]int{}
	for _, g := range groups {
		if len(g.Voters) != want {
			t.Fatalf("group %d has voters %v, want %d", g.ID, g.Voters, want)
		}
		for _, v := range g.Voters {
			if !slices.Contains(eligible, v) {
				t.Fatalf("group %d keeps voter %s, which is not eligible", g.ID, v)
			}
			load[v]++
		}
	}
	ceil := (len(groups)*want + len(eligible) - 1) / len(eligible)
	lo, hi := len(groups), 0
	for _, id := range eligible {
		lo, hi = min(lo, load[id]), max(hi, load[id])
	}
	if hi-lo > 1 || hi > ceil {
		t.Fatalf("loads %v: spread %d..%d, bound %d", load, lo, hi, ceil)
	}
	if again := placement.Plan(groups, nodes, r); len(again) != 0 {
		t.Fatalf("a placed layout plans again: %+v", again)
	}
}

// Four nodes, four groups of three: each node hosts three groups.
func TestPlan_FromNothing(t *testing.T) {
	ns := nodes("n1", "n2", "n3", "n4")
	got := apply(t, empty(4), ns, placement.Plan(empty(4), ns, 3))
	check(t, got, ns, 3)
}

// A fifth node joins a placed cluster: it receives its share (12
// replicas over 5 nodes: 3,3,2,2,2), moved from the others, and the
// moves are only as many as that takes.
func TestPlan_JoinAddsCapacity(t *testing.T) {
	ns := nodes("n1", "n2", "n3", "n4")
	placed := apply(t, empty(4), ns, placement.Plan(empty(4), ns, 3))
	ns = append(ns, placement.Node{ID: "n5", Live: true})
	steps := placement.Plan(placed, ns, 3)
	if len(steps) != 2 {
		t.Errorf("a joining node with a share of 2 took %d steps: %+v", len(steps), steps)
	}
	for _, s := range steps {
		if s.Add != "n5" || s.Remove == "" {
			t.Errorf("step %+v: want a replica moved onto n5", s)
		}
	}
	check(t, apply(t, placed, ns, steps), ns, 3)
}

// A dead node's replicas are re-created on the others, each group back
// to three voters; one that leaves is treated the same.
func TestPlan_LossAndLeaveAreRepaired(t *testing.T) {
	for _, leave := range []bool{false, true} {
		t.Run(fmt.Sprintf("leave=%v", leave), func(t *testing.T) {
			ns := nodes("n1", "n2", "n3", "n4", "n5")
			placed := apply(t, empty(5), ns, placement.Plan(empty(5), ns, 3))
			if leave {
				ns[2].Leaving = true
			} else {
				ns[2].Live = false
			}
			steps := placement.Plan(placed, ns, 3)
			for _, s := range steps {
				if s.Remove == "n3" && s.Add == "" {
					t.Errorf("step %+v removes n3 without a replacement", s)
				}
			}
			check(t, apply(t, placed, ns, steps), ns, 3)
		})
	}
}

// With fewer live nodes than R, each group keeps its dead voters rather
// than fall below what it had, and holds every live node.
func TestPlan_TooFewNodesKeepsWhatItHas(t *testing.T) {
	ns := nodes("n1", "n2", "n3")
	placed := apply(t, empty(2), ns, placement.Plan(empty(2), ns, 3))
	ns[0].Live = false
	if steps := placement.Plan(placed, ns, 3); len(steps) != 0 {
		t.Fatalf("nowhere to move to, yet planned %+v", steps)
	}
}

// Random layouts, nodes and R: every plan keeps its promises, and the
// same input in another order plans the same steps (no map order).
func TestPlan_Random(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		n := 1 + rng.IntN(7)
		var ns []placement.Node
		for k := range n {
			ns = append(ns, placement.Node{ID: fmt.Sprintf("n%d", k), Live: rng.IntN(5) > 0, Leaving: rng.IntN(8) == 0})
		}
		ns = append(ns, placement.Node{ID: "spare", Live: true}) // at least one eligible
		r := 1 + rng.IntN(4)
		gs := empty(1 + rng.IntN(8))
		for k := range gs {
			for _, nd := range ns {
				if rng.IntN(3) == 0 {
					gs[k].Voters = append(gs[k].Voters, nd.ID)
				}
			}
		}
		steps := placement.Plan(gs, ns, r)
		shuffled := slices.Clone(gs)
		rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		rns := slices.Clone(ns)
		rng.Shuffle(len(rns), func(a, b int) { rns[a], rns[b] = rns[b], rns[a] })
		if again := placement.Plan(shuffled, rns, r); !slices.Equal(steps, again) {
			t.Fatalf("case %d: the same input in another order planned differently:\n%+v\n%+v", i, steps, again)
		}
		got := apply(t, gs, ns, steps)
		if !enoughEligible(ns, r) {
			continue // checked by the bounded cases above
		}
		check(t, got, ns, r)
	}
}

func enoughEligible(ns []placement.Node, r int) bool {
	k := 0
	for _, n := range ns {
		if n.Live && !n.Leaving {
			k++
		}
	}
	return k >= r
}

func TestLeaders_SpreadOverTheVoters(t *testing.T) {
	// Groups of three voters laid out by Plan: leaderships per node differ
	// by at most one (5 nodes × 5 groups: one each; 5 × 10: two each).
	for _, c := range []struct{ nodes, groups int }{{5, 5}, {5, 10}, {6, 6}, {4, 4}} {
		var ns []placement.Node
		for i := range c.nodes {
			ns = append(ns, placement.Node{ID: fmt.Sprintf("n%d", i+1), Live: true})
		}
		groups := make([]placement.Group, c.groups)
		for i := range groups {
			groups[i].ID = uint32(i + 1)
		}
		for _, s := range placement.Plan(groups, ns, 3) {
			groups[s.Group-1].Voters = append(groups[s.Group-1].Voters, s.Add)
		}
		leaders := placement.Leaders(groups)
		led := map[string]int{}
		for i, l := range leaders {
			if !slices.Contains(groups[i].Voters, l) {
				t.Fatalf("group %d's leader %q is not one of its voters %v", groups[i].ID, l, groups[i].Voters)
			}
			led[l]++
		}
		lo, hi := c.groups, 0
		for _, n := range ns {
			lo, hi = min(lo, led[n.ID]), max(hi, led[n.ID])
		}
		if hi-lo > 1 {
			t.Fatalf("%d nodes, %d groups: leaders per node %v", c.nodes, c.groups, led)
		}
		// The same input names the same leaders, whatever the order given.
		rev := slices.Clone(groups)
		slices.Reverse(rev)
		again := placement.Leaders(rev)
		slices.Reverse(again)
		if !slices.Equal(again, leaders) {
			t.Fatalf("leaders depend on the order given: %v vs %v", again, leaders)
		}
	}
	if got := placement.Leaders([]placement.Group{{ID: 1}}); got[0] != "" {
		t.Fatalf("a group without voters is led by %q", got[0])
	}
}
