package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"time"
)

// wipe applies the wipe fault to a founder (chaos_test.go, faultWipe): kill
// -9, its data directory deleted, started again with the same flags. The
// heal checks that it refused to start (a non-zero exit naming the lost
// store: it never ran Raft, so it voted for nobody), removes its old store
// through another member and starts it with --join, so that it comes back
// as a new member.
func (r *chaosRun) wipe(rec *faultRecord, target *qnode, rng *rand.Rand) func() {
	target.kill()
	if err := os.RemoveAll(target.dir); err != nil {
		r.t.Fatalf("wipe %s: %v", target.id, err)
	}
	target.start()
	return func() {
		target.awaitRefusal(60*time.Second, "while the others hold the cluster's state")
		// Through a founder: a joiner whose `queen leave` answered an error
		// stays among the members, though the directory may have removed it
		// (seed 770431809: the forced leave went through such a node, which
		// relayed it from its stale records for 30 s, then exited).
		var others []*qnode
		for _, n := range r.c.nodes {
			if n != target && !r.isLeaving(n) {
				others = append(others, n)
			}
		}
		via := others[rng.IntN(len(others))]
		r.c.leaveForce(via, target.id, r.secretFile)
		if !slices.Contains(target.args, "--join") {
			target.args = append(slices.Clone(target.args), "--join", peerURL(via))
		}
		target.start()
		// It joins as a non-voter and is promoted once caught up. Until
		// then its old store's vote is gone and its new one does not count:
		// a second fault on another node meanwhile would leave a majority
		// of the voters down, an outage no schedule of single faults is
		// meant to cause. So the schedule waits until it is a voter again.
		// With groups, /health's members are every group's voters: the
		// directory's are in the placement's first row. A data group the
		// forced leave left with two voters gets its third (a replica
		// placed on the new store, or on a joiner) by a replica step of its
		// own, after the rejoin: a wipe of one of its two voters before then
		// left it without a quorum for good, and the next forced leave
		// answered no_leader (seeds 696684825, 662035008). So the schedule
		// waits for every group to have its three voters again too.
		waitFor(r.t, 120*time.Second, target.id+" to catch up and vote again after its rejoin, and every group to have three voters", func() (bool, string) {
			h, err := r.c.health(target)
			if err != nil || h.Code != 200 || h.Applied == 0 || chaosGroups() <= 1 {
				return err == nil && h.Code == 200 && h.Applied > 0 && slices.Contains(h.Members, target.id), fmt.Sprint(h, h.Members, err)
			}
			code, b, err := r.c.do(3*time.Second, "GET", target.url("/api/v1/system/placement"), nil)
			var p chaosPlacement
			if err == nil && code == http.StatusOK {
				err = json.Unmarshal(b, &p)
			}
			if err != nil || code != http.StatusOK || len(p.Groups) == 0 || p.Groups[0].ID != 0 {
				return false, fmt.Sprintf("placement: %d %s %v", code, b, err)
			}
			for _, g := range p.Groups[1:] {
				if len(g.Members) < 3 {
					return false, fmt.Sprintf("group %d has voters %v", g.ID, g.Members)
				}
			}
			return slices.Contains(p.Groups[0].Members, target.id), fmt.Sprint("directory voters ", p.Groups[0].Members)
		})
		rec.target += " (refused, left, rejoined via " + via.id + ")"
	}
}

// peerURL is the URL other nodes reach n's HTTP API at: its --advertise in
// network namespaces (the driver reaches it by another address), else the
// driver's.
func peerURL(n *qnode) string {
	if i := slices.Index(n.args, "--advertise"); i >= 0 && i+1 < len(n.args) {
		return n.scheme + "://" + n.args[i+1]
	}
	return n.url("")
}
