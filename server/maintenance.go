package server

import (
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
	"github.com/queenmq/queen/server/wire"
)

// getMaintenance answers GET /api/v1/system/maintenance and .../pop.
func (s *Server) getMaintenance(ctx *fasthttp.RequestCtx, _ *params) {
	s.writeMaintenance(ctx, "")
}

// setMaintenance answers POST /api/v1/system/maintenance ({"enabled"}: push
// maintenance) and POST .../maintenance/pop (pop maintenance). The switch is
// cluster-wide: it is a replicated command.
func (s *Server) setMaintenance(ctx *fasthttp.RequestCtx, _ *params) {
	var enabled, has bool
	err := wire.DecodeObject(ctx.PostBody(), true, func(sc *wire.Scanner, key []byte) (err error) {
		if string(key) != "enabled" {
			return sc.Skip()
		}
		enabled, has, err = sc.OptBool("enabled")
		return err
	})
	_, ok := s.broker.(Maintainer)
	pop := strings.HasSuffix(string(ctx.Path()), "/pop")
	switch {
	case err != nil:
	case !has:
		err = badRequest("enabled (boolean) is required")
	case !ok:
		err = notImplemented("this broker has no maintenance mode")
	default:
		_, err = raft.Propose[struct{}](s.ctx, s.forwarding(ctx), command.Maintenance{Pop: pop, Enabled: enabled})
	}
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	// The answer, and this node's next pushes and pops, read the switch
	// as this node's replica has it: a switch its leader proposed is
	// waited for (relay.Reads.Settle; at once when this node proposed it).
	s.reads.Settle()
	msg := "Push maintenance mode "
	if pop {
		msg = "Pop maintenance mode "
	}
	if enabled {
		msg += "enabled"
	} else {
		msg += "disabled"
	}
	s.writeMaintenance(ctx, msg)
}

func (s *Server) writeMaintenance(ctx *fasthttp.RequestCtx, msg string) {
	var push, pop bool
	if m, ok := s.broker.(Maintainer); ok {
		push, pop = m.Maintenance()
	}
	var pending, failed int64
	if s.spool != nil {
		pending, failed = s.spool.Pending(), s.spool.Failed()
	}
	healthy := s.broker.Status().HasLeader()
	w := startReply(ctx)
	w.Object("")
	w.Bool("maintenanceMode", push)
	w.Bool("popMaintenanceMode", pop)
	w.Int("bufferedMessages", pending)
	w.Bool("bufferHealthy", s.spool != nil)
	w.Object("bufferStats")
	w.Int("pendingCount", pending)
	w.Int("failedCount", failed)
	w.Bool("dbHealthy", healthy)
	w.EndObject()
	if msg != "" {
		w.Str("message", msg)
	}
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}
