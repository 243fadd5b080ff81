package server

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/wire"
)

// A Mover moves queues between Raft groups (cluster.Host): the placement's
// epoch, the moves under way, the queues each group holds, and the move
// itself.
type Mover interface {
	MoveQueue(ctx context.Context, queue string, to uint32, progress func(cluster.MoveProgress)) error
	StartMove(ctx context.Context, queue string, to uint32) error
	Moves() []cluster.Move
	PlacementEpoch(queue string) uint64
	QueuesPlaced(group uint32) uint64
}

// A Loader reports the data groups' loads as the directory records them
// (cluster.Host.Load): each group's leader's last report.
type Loader interface {
	Load(group uint32) cluster.Load
}

// loads are the data groups' load reports by group id (nil on a broker
// without them).
func (s *Server) loads(groups []uint32) map[uint32]cluster.Load {
	l, ok := s.broker.(Loader)
	if !ok {
		return nil
	}
	byGroup := map[uint32]cluster.Load{}
	for _, g := range groups {
		if g == raft.Directory {
			continue
		}
		r := l.Load(g)
		if r.At == 0 {
			continue
		}
		byGroup[g] = r
	}
	return byGroup
}

// queueLoad is queue's part of its group's report, when the report names
// it (the group's hottest queues only).
func queueLoad(r cluster.Load, queue string) (cluster.QueueLoad, bool) {
	for _, q := range r.Queues {
		if q.Queue == queue {
			return q, true
		}
	}
	return cluster.QueueLoad{}, false
}

// epochOf is a queue's placement epoch: 1 on a broker whose queues do not
// move.
func (s *Server) epochOf(queue string) uint64 {
	if m, ok := s.broker.(Mover); ok {
		return m.PlacementEpoch(queue)
	}
	return 1
}

// placement answers GET /api/v1/system/placement: the nodes, R (the
// voters each data group has on R of N nodes, 0 when every group is on
// every node), each Raft group's members and leader, and each queue's
// group, as this node knows them (docs/api.md, "Placement"), the moves
// under way and the load signal as the directory records them.
func (s *Server) placement(ctx *fasthttp.RequestCtx, _ *params) {
	qs, err := s.broker.Queues()
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	l := s.groups.layout()
	ids := make([]uint32, len(l.Groups))
	for i, g := range l.Groups {
		ids[i] = g.ID
	}
	loads := s.loads(ids)
	w := startReply(ctx)
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
	var r uint32 // every group on every node
	if gm, ok := s.broker.(GroupMembership); ok {
		r = gm.ReplicaCount()
	}
	w.Int("replicas", int64(r))
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
		if r, ok := loads[g.ID]; ok {
			w.Float("msgsPerSec", r.MsgsPerSec)
			w.Float("bytesPerSec", r.BytesPerSec)
			w.Int("loadAt", r.At/1000)
		}
		w.EndObject()
	}
	w.EndArray()
	w.Array("queues")
	for _, q := range qs {
		w.Object("")
		w.Str("queue", q.Name)
		g := s.groups.holder(q.Name)
		w.Int("group", int64(g))
		w.Int("epoch", int64(s.epochOf(q.Name)))
		if r, ok := queueLoad(loads[g], q.Name); ok {
			w.Float("msgsPerSec", r.MsgsPerSec)
			w.Float("bytesPerSec", r.BytesPerSec)
		}
		w.EndObject()
	}
	w.EndArray()
	w.Array("moves")
	if m, ok := s.broker.(Mover); ok {
		for _, mv := range m.Moves() {
			w.Object("")
			w.Str("queue", mv.Queue)
			w.Int("from", int64(mv.From))
			w.Int("to", int64(mv.To))
			w.Int("epoch", int64(mv.Epoch+1))
			w.Int("startedAt", mv.StartedAt/1000)
			w.EndObject()
		}
	}
	w.EndArray()
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// moveQueue answers POST /api/v1/system/queues/{queue}/move {"group": g}:
// it moves the queue to group g (cluster.Host.MoveQueue) and answers once the
// queue lives there, with what was copied. The move runs on this node,
// whichever it is (its commands are relayed to the groups' leaders); while
// it runs, GET /api/v1/system/placement lists it under "moves" on every
// node. The request's own deadline does not bound it: a move undone half
// way because a client gave up would be work thrown away.
func (s *Server) moveQueue(ctx *fasthttp.RequestCtx, p *params) {
	var (
		group int64
		has   bool
	)
	err := wire.DecodeObject(ctx.PostBody(), false, func(sc *wire.Scanner, key []byte) (err error) {
		if string(key) != "group" {
			return sc.Skip()
		}
		group, has, err = sc.OptInt("group")
		return err
	})
	m, ok := s.broker.(Mover)
	switch {
	case err != nil:
	case !has || group < 1 || group > 1<<31:
		err = badRequest("group (a data group id, 1 or more) is required")
	case !ok:
		err = notImplemented("queues move between Raft groups only on a node started with --groups")
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	queue := p.get("queue")
	var last cluster.MoveProgress
	if err := m.MoveQueue(s.ctx, queue, uint32(group), func(mp cluster.MoveProgress) { last = mp }); err != nil {
		// A node that is not a voter of the queue's group cannot copy it:
		// the move runs on that group's leader.
		if !s.forwardNotLeader(ctx, err) {
			s.writeError(ctx, err)
		}
		return
	}
	w := startReply(ctx)
	w.Object("")
	w.Str("queue", queue)
	w.Int("from", int64(last.From))
	w.Int("group", int64(last.To))
	w.Int("epoch", int64(last.Epoch))
	w.Int("chunks", int64(last.Chunks))
	w.Int("bytes", last.Bytes)
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// startMove answers POST /internal/v1/move (cluster.Client.StartMove): the
// directory leader's balancer asks this node, a voter of the queue's
// group, to move the queue to the group groupHeader names, since the copy
// reads a replica of the source and the directory's leader may host none
// (groups on R of N nodes). It answers 202 once the move is recorded and
// runs it on (cluster.Host.StartMove); a node that hosts no replica of the
// queue's group refuses (not_leader). Only a node (the cluster secret)
// may ask.
func (s *Server) startMove(ctx *fasthttp.RequestCtx, p *params) {
	m, to, ok := nodeAsks[Mover](s, ctx, p, "queues move between Raft groups only on a node started with --groups")
	if !ok {
		return
	}
	var queue string
	err := wire.DecodeObject(ctx.PostBody(), false, func(sc *wire.Scanner, key []byte) (err error) {
		if string(key) != "queue" {
			return sc.Skip()
		}
		queue, _, err = sc.OptString("queue")
		return err
	})
	if err == nil && queue == "" {
		err = badRequest("queue is required")
	}
	if err == nil {
		c, cancel := context.WithTimeout(s.ctx, moveStartWait)
		err = m.StartMove(c, queue, to)
		cancel()
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startReply(ctx)
	w.Object("")
	w.Str("queue", queue)
	w.Int("group", int64(to))
	w.EndObject()
	sendReply(ctx, fasthttp.StatusAccepted, w)
}

// moveStartWait bounds how long startMove waits for the move to be
// recorded: within the asking node's cluster.Timeout.
const moveStartWait = 8 * time.Second
