package cluster_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestHost_AReplicaServesOnlyOnceCaughtUp: a node that joins three hosts
// of three groups is made a voter of some of them. The directory's record
// listing it does not make it serve such a group from its replica: it
// first asks to be caught up (SetReadCatchUp) and, until that returns, the
// group is Joining (a read barrier waits for the replica) and not hosted
// (reads go to the leader). A failed catch-up is tried again; a finished
// one makes the group hosted. Serving on the record alone let a
// linearizable read run on a replica its barrier had skipped.
func TestHost_AReplicaServesOnlyOnceCaughtUp(t *testing.T) {
	t.Parallel()
	c := openSpreadHosts(t, 3, 3, 3)
	release := make(chan struct{})
	var mu sync.Mutex
	calls := map[uint32]int{}
	hook := func(ctx context.Context, g uint32) error {
		mu.Lock()
		calls[g]++
		first := calls[g] == 1
		mu.Unlock()
		if first {
			return errors.New("the leader could not be asked (a test's refusal)")
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	n4 := c.join()
	h := c.h[n4]
	h.SetReadCatchUp(hook)
	id := c.peers[n4].ID

	// The record lists the new node for some group g, and its catch-up has
	// been asked again after the first one failed.
	var g uint32
	waitForLong(t, "the record to list "+id+" among a group's voters and its catch-up to be under way", 60*time.Second, func() bool {
		for _, lg := range h.Layout().Groups[1:] {
			mu.Lock()
			asked := calls[lg.ID]
			mu.Unlock()
			if slices.Contains(lg.Members, id) && asked >= 2 && h.Joining(lg.ID) {
				g = lg.ID
				return true
			}
		}
		return false
	})
	for range 5 { // stays so while the catch-up has not returned
		if h.Hosts(g) || !h.Joining(g) {
			t.Fatalf("group %d: hosted %v, joining %v while its catch-up has not returned", g, h.Hosts(g), h.Joining(g))
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(release)
	waitForLong(t, "the caught-up group to be served from the replica", 30*time.Second, func() bool {
		return h.Hosts(g) && !h.Joining(g)
	})
}
