package server

import (
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/server/reply"
)

// placementEpoch is every queue's placement epoch. Queues do not move
// between groups yet: a move (issue 30, "Queues move live") will bump its
// queue's epoch, so that a node holding an older placement knows it is
// stale.
const placementEpoch = 1

// placement answers GET /api/v1/system/placement: the nodes, each Raft
// group's members and leader, and each queue's group, as this node knows
// them (docs/api.md, "Placement"). The moves under way: none, until
// queues move.
func (s *Server) placement(ctx *fasthttp.RequestCtx, _ *params) {
	qs, err := s.broker.Queues()
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	l := s.groups.layout()
	w := reply.Start(ctx)
	w.Object("")
	w.Array("nodes")
	for _, n := range l.Nodes {
		w.Object("")
		w.Str("id", n.ID)
		w.Str("http", n.HTTP)
		w.Bool("live", n.Live)
		w.EndObject()
	}
	w.EndArray()
	w.Array("groups")
	for _, g := range l.Groups {
		w.Object("")
		w.Int("id", int64(g.ID))
		w.Array("members")
		for _, m := range g.Members {
			w.Str("", m)
		}
		w.EndArray()
		w.Str("leader", g.Leader)
		w.EndObject()
	}
	w.EndArray()
	w.Array("queues")
	for _, q := range qs {
		w.Object("")
		w.Str("queue", q.Name)
		w.Int("group", int64(s.groups.holder(q.Name)))
		w.Int("epoch", placementEpoch)
		w.EndObject()
	}
	w.EndArray()
	w.Array("moves")
	w.EndArray()
	w.EndObject()
	reply.Send(ctx, fasthttp.StatusOK, w)
}
