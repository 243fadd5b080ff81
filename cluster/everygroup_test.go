package cluster_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// billingEverywhere gives consumer group billing a cursor in queue q<g> of
// each of c's three groups, then freezes q2 in group 2 with no move
// recorded (a stray freeze: group 2's leader thaws it after MoveTimeout).
func billingEverywhere(t *testing.T, c *hosts) {
	t.Helper()
	for g := uint32(1); g <= 3; g++ {
		q := fmt.Sprintf("q%d", g)
		c.place(q, g)
		if _, err := patientAs[[]engine.PushResult](c, c.h[0], engine.PushCmd{Items: []engine.PushItem{{Queue: q, Payload: []byte(`1`)}}}); err != nil {
			t.Fatalf("push %s: %v", q, err)
		}
		// The pop gives billing a cursor in q's group; one whose outcome
		// an election left unknown is asked again, which may find the
		// message leased: the cursors are counted below.
		if _, err := c.again(c.h[0], engine.PopCmd{Queue: q, Group: "billing", Batch: 1, Partitions: 1}); err != nil {
			t.Fatalf("pop %s: %v", q, err)
		}
	}
	waitFor(t, "billing to have a cursor in each group", func() bool {
		cursors, err := c.h[0].Cursors(time.Now().UnixMicro(), "billing")
		return err == nil && len(cursors) == 3
	})
	if r, err := c.patient(c.h[0], engine.FreezeQueueCmd{Group: 2, Queue: "q2", Epoch: 5}); err != nil || r.Err != nil || r.Value != true {
		t.Fatalf("freeze: %v %v %v", r.Value, err, r.Err)
	}
}

// A consumer group's command over every group (Host.everyGroup) that
// meets a queue frozen for a move in one group waits for the freeze, as a
// command of that queue does, and its answer counts each group's rows
// once: a group that applied it before the refusal is not asked again.
// (Before, the whole command was asked again, and answered 1 cursor of 3.)
func TestHost_ACommandOverEveryGroupCountsEachGroupOnceAfterAFreeze(t *testing.T) {
	t.Parallel()
	c := openOutboxHosts(t)
	billingEverywhere(t, c)
	deleted, err := patientAs[engine.GroupDeleted](c, c.h[0], engine.DeleteGroupCmd{Group: "billing"})
	if err != nil || deleted.Cursors != 3 {
		t.Fatalf("delete billing over every group: %+v, %v; want its 3 cursors, one a group", deleted, err)
	}
}

// When the freeze outlasts MoveWait, the groups that applied the command
// keep it, and the answer says its outcome is unknown (503
// outcome_unknown at the edge), not that nothing was applied: before, it
// was group 2's refusal (queue_moving), which raft.NotApplied reads as
// certain.
func TestHost_ACommandOverEveryGroupAppliedInPartIsNotAnsweredNotApplied(t *testing.T) {
	t.Parallel()
	c := openHostsOf(t, 3, 3, 0, func(o *raft.Options) {
		o.Versions, o.VersionInterval = allCurrent{}, 50*time.Millisecond
	}, func(c *hosts) {
		// The stray freeze outlasts every wait for it.
		c.tune = func(o *cluster.HostOptions) { o.MoveWait, o.MoveTimeout = 200*time.Millisecond, time.Hour }
	})
	c.leaders(preferredLeaders)
	c.relayInProcess()
	c.addressesKnown()
	c.atMaxVersion()
	billingEverywhere(t, c)
	_, err := c.patient(c.h[0], engine.DeleteGroupCmd{Group: "billing"})
	if !errors.Is(err, raft.ErrOutcomeUnknown) || raft.NotApplied(err) {
		t.Fatalf("delete billing while q2 stays frozen: %v, want an outcome unknown", err)
	}
	waitFor(t, "billing's cursors in groups 1 and 3 to be deleted, group 2's kept", func() bool {
		cursors, err := c.h[0].Cursors(time.Now().UnixMicro(), "billing")
		return err == nil && len(cursors) == 1 && cursors[0].Queue == "q2"
	})
}
