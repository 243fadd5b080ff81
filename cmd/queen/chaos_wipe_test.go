package main

import (
	"fmt"
	"math/rand/v2"
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
		var others []*qnode
		for _, n := range r.members() {
			if n != target && !r.isLeaving(n) {
				others = append(others, n)
			}
		}
		via := others[rng.IntN(len(others))]
		r.c.leaveForce(via, target.id, r.secretFile)
		if !slices.Contains(target.args, "--join") {
			target.args = append(slices.Clone(target.args), "--join", via.url(""))
		}
		target.start()
		// Until it has caught up, its store holds nothing, yet it counts as
		// a voter: killed then, it would refuse to start again, rightly (it
		// may have acknowledged the entry that added it). A join that starts
		// it as a non-voter and promotes it once caught up would let it
		// start again; until then the schedule waits for the catch-up.
		waitFor(r.t, 120*time.Second, target.id+" to catch up after its rejoin", func() (bool, string) {
			h, err := r.c.health(target)
			return err == nil && h.Code == 200 && h.Applied > 0, fmt.Sprint(h, err)
		})
		rec.target += " (refused, left, rejoined via " + via.id + ")"
	}
}
