package server

import (
	"errors"
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
	"github.com/queenmq/queen/server/relay"
)

// A follower prepares the pushes it is sent (ARCHITECTURE.md, "Forwarding"):
// it decodes, validates, seals and compresses them as the leader would
// (raft.PrepareEntry), and sends the prepared command to the leader on the
// one path between nodes (package cluster, clusterpath.go's proposeRelayed). The
// leader writes its time over the entry's and proposes the bytes it got;
// the follower writes the client's answer from the results it gets back.

// errLeaderSpools is the leader's answer to a prepared push during push
// maintenance: the follower that prepared it buffers it in its own spool,
// as it would have had its applied state shown the switch already.
var errLeaderSpools = errors.New("server: push maintenance is on; buffer the push where it was received")

// codeLeaderSpools is errLeaderSpools' code in the error table.
const codeLeaderSpools = "push_maintenance"

// singleGroup is the group of a broker that runs one (raft.Node.GroupID).
const singleGroup uint32 = 1

// preparesFor reports whether this node prepares pushes for a leader, and
// the status that said so: it is a follower that knows its leader's HTTP
// address and shares the cluster secret with it, and the request is a
// client's (a request relayed to this node is never relayed again).
func (s *Server) preparesFor(ctx *fasthttp.RequestCtx, st raft.Status) bool {
	return s.cluster != nil && s.groups.leaderKnownUnread() && st.Role != "leader" && st.LeaderHTTP != "" &&
		st.Leader != st.ID && !relay.Forwarded(ctx)
}

// pushViaLeader answers a push this follower decoded and sealed: it
// prepares the items, has the leader propose them and writes the answer.
func (s *Server) pushViaLeader(ctx *fasthttp.RequestCtx, st raft.Status, items []engine.PushItem) {
	entry, err := raft.PrepareEntry(engine.PushCmd{Items: items})
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	if len(entry) > s.opts.MaxBodyBytes {
		// Many tiny items make an entry larger than their JSON (a minted
		// transaction id is 36 bytes in the entry and none in the body):
		// past the body limit the leader would refuse it, and it takes
		// the client's request under the same limit.
		if !s.forwardAs(ctx, st) {
			s.writeError(ctx, raft.ErrNotLeader)
		}
		return
	}
	r, applied, err := s.cluster.Forward(s.ctx, st.LeaderHTTP, singleGroup, entry)
	s.reads.NoteIndex(singleGroup, applied)
	var res []engine.PushResult
	if err == nil {
		var ok bool
		if res, ok = r.Value.([]engine.PushResult); !ok || len(res) != len(items) {
			err = fmt.Errorf("%w: the leader answered %d results for %d items", command.ErrCorrupt, len(res), len(items))
		}
	}
	switch {
	case err == nil:
		s.countPushed(res) // here, not on the leader that proposed it
		s.answerPush(ctx, items, res)
	case errors.Is(err, errNoSuchRoute) || errors.Is(err, errNotImplemented):
		// A leader of an older version, which takes prepared pushes on a
		// route of their own: relay the client's request.
		if !s.forwardAs(ctx, st) {
			s.writeError(ctx, raft.ErrNotLeader)
		}
	case errors.Is(err, errLeaderSpools):
		s.bufferPush(ctx, items)
	default:
		if errors.Is(err, raft.ErrForward) {
			s.log.Warn("forward to leader", "leader", st.Leader, "addr", st.LeaderHTTP, "err", err)
		}
		s.forwardOrFail(ctx, err) // a leader that no longer leads proposed nothing
	}
}
