package engine_test

import (
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
)

// PopCmd.Skip may answer true only when the pop would deliver nothing and
// write nothing: check it against the real pop and the store's digest.
func TestPopCmd_Skip(t *testing.T) {
	h := enginetest.MustOpen(t)
	check := func(name string, cmd engine.PopCmd, wantEmpty bool) {
		t.Helper()
		_, got := cmd.Skip(h.Engine, h.Now)
		if got != wantEmpty {
			t.Fatalf("%s: Skip = %v, want %v", name, got, wantEmpty)
		}
		before, _ := h.Digest()
		res := h.Pop(cmd)
		after, _ := h.Digest()
		if got && (len(res.Messages) > 0 || before != after) {
			t.Fatalf("%s: Skip said empty, but the pop delivered %d messages or wrote state", name, len(res.Messages))
		}
	}
	check("unknown queue, queue mode", engine.PopCmd{Queue: "q", Batch: 1}, true)
	check("unknown queue, named group (records its subscription)", engine.PopCmd{Queue: "q", Group: "g", Batch: 1}, false)
	h.PushOne("q", "", "m1", `{}`)
	check("first contact seeds a cursor", engine.PopCmd{Queue: "q", Batch: 1}, false) // delivers m1
	check("leased", engine.PopCmd{Queue: "q", Batch: 1}, true)
	check("leased, single partition route", engine.PopCmd{Queue: "q", Partition: "Default", Batch: 1}, true)
	h.Advance(2 * time.Minute)
	check("lease expired", engine.PopCmd{Queue: "q", Batch: 1}, false)
	res := h.Pop(engine.PopCmd{Queue: "q", Group: "g", Batch: 1})
	h.Ack(enginetest.AckMessages(res, "completed")...)
	check("named group consumed everything", engine.PopCmd{Queue: "q", Group: "g", Batch: 1}, true)
	h.PushOne("q", "", "m2", `{}`)
	check("new message", engine.PopCmd{Queue: "q", Group: "g", Batch: 1}, false)
	check("unknown partition", engine.PopCmd{Queue: "q", Partition: "nope", Batch: 1}, true)
	// A partition no pop has reached, holding no message: a later pop seeds
	// the same cursor, so there is nothing to run (a discovery pop over
	// several groups would otherwise be sent to every such group).
	h.Configure(engine.ConfigureCmd{Queue: "e"})
	check("empty partition, first contact, queue mode", engine.PopCmd{Queue: "e", Batch: 1}, true)
	check("empty queue, named group's first pop records its subscription", engine.PopCmd{Queue: "e", Group: "g2", Batch: 1}, false)
	check("empty queue, named group subscribed", engine.PopCmd{Queue: "e", Group: "g2", Batch: 1}, true)
}
