package placement

import (
	"cmp"
	"slices"
)

// Node is a node of the cluster as the directory sees it.
type Node struct {
	ID string
	// Live: the node answered recently enough to hold replicas.
	Live bool
	// Leaving: an operator asked it to leave (queen leave); its replicas
	// move away before it goes.
	Leaving bool
}

// Group is a Raft group and its voters.
type Group struct {
	ID     uint32
	Voters []string
}

// Step adds a voter to a group and then removes one: Add catches up and
// becomes a voter before Remove is removed. Either may be "" (a group
// short of voters only gains; one with too many only loses).
type Step struct {
	Group  uint32
	Add    string
	Remove string
}

// Plan is the steps that bring groups to r voters each on eligible nodes
// (live, not leaving), spread evenly (the package doc's rules), in the
// order they should run. It does not change groups. With fewer eligible
// nodes than r, each group gets every eligible node and keeps what else it
// has.
func Plan(groups []Group, nodes []Node, r int) []Step {
	p := newPlanner(groups, nodes)
	for _, g := range p.groups {
		p.repair(g, r)
	}
	for _, g := range p.groups {
		p.resize(g, r)
	}
	p.spread()
	return p.steps
}

// planner is a plan being made: the layout as it will be after the steps
// so far.
type planner struct {
	groups   []*Group // by id; Voters are copies the plan changes
	eligible []string // sorted
	ok       map[string]bool
	load     map[string]int // replicas per node, after the steps so far
	steps    []Step
}

func newPlanner(groups []Group, nodes []Node) *planner {
	p := &planner{ok: map[string]bool{}, load: map[string]int{}}
	for _, n := range nodes {
		if n.Live && !n.Leaving {
			p.eligible = append(p.eligible, n.ID)
			p.ok[n.ID] = true
		}
	}
	slices.Sort(p.eligible)
	for _, g := range groups {
		c := &Group{ID: g.ID, Voters: slices.Clone(g.Voters)}
		slices.Sort(c.Voters)
		p.groups = append(p.groups, c)
		for _, v := range c.Voters {
			p.load[v]++
		}
	}
	slices.SortFunc(p.groups, func(a, b *Group) int { return cmp.Compare(a.ID, b.ID) })
	return p
}

// repair replaces g's voters on nodes that are not eligible, while an
// eligible node is free to take the replica; past that, a dead voter is
// only removed if g keeps r voters without it.
func (p *planner) repair(g *Group, r int) {
	for _, v := range slices.Clone(g.Voters) {
		if p.ok[v] {
			continue
		}
		if to := p.least(g); to != "" {
			p.step(g, to, v)
		} else if len(g.Voters) > r {
			p.step(g, "", v)
		}
	}
}

// resize brings g to r voters where the eligible nodes allow.
func (p *planner) resize(g *Group, r int) {
	for len(g.Voters) < r {
		to := p.least(g)
		if to == "" {
			return
		}
		p.step(g, to, "")
	}
	for len(g.Voters) > r {
		p.step(g, "", p.most(g.Voters))
	}
}

// spread moves replicas from the most loaded eligible node to the least
// loaded until they differ by at most one.
func (p *planner) spread() {
	if len(p.eligible) < 2 {
		return
	}
	for {
		hi := p.most(p.eligible)
		lo := p.leastOf(p.eligible, nil)
		if p.load[hi]-p.load[lo] < 2 {
			return
		}
		moved := false
		for _, g := range p.groups {
			if slices.Contains(g.Voters, hi) && !slices.Contains(g.Voters, lo) {
				p.step(g, lo, hi)
				moved = true
				break
			}
		}
		if !moved {
			return // cannot happen: hi holds more groups than lo, one lacks lo
		}
	}
}

// least is the least loaded eligible node that is not a voter of g, ""
// when every eligible node is.
func (p *planner) least(g *Group) string {
	return p.leastOf(p.eligible, g.Voters)
}

func (p *planner) leastOf(ids, skip []string) string {
	best := ""
	for _, id := range ids { // sorted: ties go to the lowest id
		if slices.Contains(skip, id) {
			continue
		}
		if best == "" || p.load[id] < p.load[best] {
			best = id
		}
	}
	return best
}

// most is the most loaded of ids (sorted), ties to the lowest id.
func (p *planner) most(ids []string) string {
	best := ""
	for _, id := range ids {
		if best == "" || p.load[id] > p.load[best] {
			best = id
		}
	}
	return best
}

// step records a step and applies it to the layout.
func (p *planner) step(g *Group, add, remove string) {
	p.steps = append(p.steps, Step{Group: g.ID, Add: add, Remove: remove})
	if add != "" {
		g.Voters = append(g.Voters, add)
		slices.Sort(g.Voters)
		p.load[add]++
	}
	if remove != "" {
		g.Voters = slices.DeleteFunc(g.Voters, func(v string) bool { return v == remove })
		p.load[remove]--
	}
}

// Leaders names a leader for each group (in the order given) among its
// voters so that leaderships spread over the nodes as evenly as the
// voters allow: groups in id order each take the voter that leads the
// fewest so far, ties broken by rotating with the group's id so that no
// node is always first. Deterministic, as Plan is: every node names the
// same. A group without voters gets "".
func Leaders(groups []Group) []string {
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(groups[a].ID, groups[b].ID) })
	led := map[string]int{}
	out := make([]string, len(groups))
	for _, i := range order {
		voters := slices.Sorted(slices.Values(groups[i].Voters))
		if len(voters) == 0 {
			continue
		}
		fewest := -1
		var tied []string
		for _, v := range voters {
			switch k := led[v]; {
			case fewest < 0 || k < fewest:
				fewest, tied = k, []string{v}
			case k == fewest:
				tied = append(tied, v)
			}
		}
		pick := tied[int(groups[i].ID)%len(tied)]
		led[pick]++
		out[i] = pick
	}
	return out
}
