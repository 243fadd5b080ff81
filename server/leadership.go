package server

import (
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/raft"
)

// transferLeadership answers POST /api/v1/system/leadership/transfer: this
// node hands over the leadership of every Raft group it leads (an
// operator's step-down before maintenance, and the chaos suite's
// "transfer" fault). It acts on the node the request reaches and is never
// forwarded: on a follower it transfers nothing. 200
// {"transferred":[group ids]}; a group this node leads alone (no other
// voter to take it) is not transferred and not listed, and neither is
// anything on a broker without Raft (raft.Local: nobody to hand over to).
func (s *Server) transferLeadership(ctx *fasthttp.RequestCtx, _ *params) {
	var replicas []*raft.Node
	if b, ok := s.broker.(Replicated); ok {
		replicas = b.Replicas()
	}
	transferred := []uint32{}
	for _, n := range replicas {
		st := n.Status()
		if st.Role != "leader" || st.Voters < 2 {
			continue
		}
		// ErrNotLeader: it lost the leadership on its own since Status;
		// nothing to hand over.
		switch err := n.TransferLeadership(); {
		case err == nil:
			transferred = append(transferred, n.GroupID())
		case errors.Is(err, raft.ErrNotLeader):
		default:
			s.writeError(ctx, err)
			return
		}
	}
	w := startReply(ctx)
	w.Object("")
	w.Array("transferred")
	for _, g := range transferred {
		w.Int("", int64(g))
	}
	w.EndArray()
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}
