package raft

import (
	"errors"
	"fmt"
	"testing"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/engine"
)

// Every error hashicorp/raft answers a proposal with while leaders change
// or the node stops becomes one of our transient sentinels (the edge's
// 503s), with its text: none reaches the edge unknown, as a 500.
func TestNode_MapErrorMakesRaftsTransientErrorsOurs(t *testing.T) {
	t.Parallel()
	n := &Node{}
	for _, e := range []error{hraft.ErrLeadershipLost, hraft.ErrRaftShutdown, hraft.ErrEnqueueTimeout,
		hraft.ErrLeadershipTransferInProgress, hraft.ErrAbortedByRestore,
		errors.New("unable to store logs within log store, err: disk full")} {
		got := n.mapError(e)
		if !Transient(got) || got.Error() == "" {
			t.Errorf("mapError(%v) = %v, want a transient sentinel", e, got)
		}
	}
	if !NotApplied(n.mapError(hraft.ErrLeadershipTransferInProgress)) {
		t.Error("a transfer's refusal: want certain that nothing was applied")
	}
	if NotApplied(n.mapError(hraft.ErrLeadershipLost)) {
		t.Error("leadership lost in flight: want an unknown outcome")
	}
}

// A queue frozen for a move refuses before writing: certain, and worth a
// retry once the move has placed it.
func TestErrors_QueueMovingIsNotAppliedAndTransient(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("group 2: %w", engine.ErrQueueMoving)
	if !NotApplied(err) || !Transient(err) {
		t.Fatalf("NotApplied %v, Transient %v", NotApplied(err), Transient(err))
	}
}
