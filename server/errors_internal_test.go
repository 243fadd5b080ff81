package server

import (
	"errors"
	"fmt"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// Every row of the table answers with a code and a text, and is the row
// its own sentinel finds (no earlier row shadows it).
func TestErrorTable_EveryRowHasACodeAndAText(t *testing.T) {
	t.Parallel()
	for _, r := range errorTable {
		row, msg, ok := classify(r.err)
		switch {
		case r.code == "" || r.status < 400:
			t.Errorf("%v: code %q status %d, want a code and an error status", r.err, r.code, r.status)
		case !ok || row.code != r.code:
			t.Errorf("%v: classified as %q, want its own row %q", r.err, row.code, r.code)
		case msg == "":
			t.Errorf("%v (%s): empty public text", r.err, r.code)
		}
		if got := publicText(fmt.Errorf("wrapped: %w", r.err)); got == "" {
			t.Errorf("%v wrapped: empty public text", r.err)
		}
	}
	if got := itemError(errors.New("a cause no row knows")); got == "" {
		t.Error("an unknown item error has an empty text")
	}
}

// Every Raft error a retry may cure is a 503 (Retry-After) with its own
// code and text, never a 500; and what raft.NotApplied calls certain is
// either transient or a client error.
func TestErrorTable_RaftTransientErrorsAre503(t *testing.T) {
	t.Parallel()
	sentinels := []error{raft.ErrNoLeader, raft.ErrNotLeader, raft.ErrLeadershipLost, raft.ErrTimeout,
		raft.ErrLeadershipTransfer, raft.ErrRestored, raft.ErrOutcomeUnknown, raft.ErrResultType,
		raft.ErrShutdown, raft.ErrNotPreparable, raft.ErrForward, raft.ErrQuorumRisk, raft.ErrHandshake,
		raft.ErrInUse, raft.ErrFaulted, raft.ErrShutdownStuck, raft.ErrSpansGroups, raft.ErrPlaced,
		raft.ErrLayout, raft.ErrNoState,
		&raft.NotLeaderError{Group: 2}, &raft.UnknownError{Group: 2, Err: raft.ErrTimeout}}
	transient := 0
	for _, e := range sentinels {
		row, msg, ok := classify(e)
		if raft.Transient(e) {
			transient++
			if !ok || row.status != fasthttp.StatusServiceUnavailable || row.code == "" || msg == "" {
				t.Errorf("%v: transient, answered %d %q %q; want 503 with a code and a text", e, row.status, row.code, msg)
			}
		}
		if raft.NotApplied(e) && !raft.Transient(e) && (!ok || row.status >= 500) {
			t.Errorf("%v: a certain refusal answered %d %q; want a 4xx", e, row.status, row.code)
		}
	}
	if transient < 10 {
		t.Errorf("%d transient sentinels, want the ten raft.Transient names", transient)
	}
	if !raft.NotApplied(fmt.Errorf("x: %w", engine.ErrInvalid)) || raft.NotApplied(&raft.UnknownError{Err: raft.ErrNotLeader}) {
		t.Error("raft.NotApplied: an invalid command is certain, an unknown part is not")
	}
}
