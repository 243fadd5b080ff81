package server

import (
	"context"

	"github.com/valyala/fasthttp"
)

// RemoteReader is a broker that answers reads of its groups for nodes that
// do not host them (cluster.Host: with --replicas below the node count, a
// node keeps only R groups' state).
type RemoteReader interface {
	AnswerRead(ctx context.Context, g uint32, req []byte) ([]byte, error)
}

// answerRead answers POST /internal/v1/read: a read of the group
// groupHeader names, which another node sent because it does not host
// that group. This node answers from its replica once a heartbeat round
// confirms it leads the group, else 503 not_leader (the sender looks for
// the leader again). Only a node (the cluster secret) may ask.
func (s *Server) answerRead(ctx *fasthttp.RequestCtx, p *params) {
	rr, g, ok := nodeAsks[RemoteReader](s, ctx, p, "this broker answers no reads for other nodes")
	if !ok {
		return
	}
	c, cancel := context.WithTimeout(s.ctx, readIndexTimeout)
	defer cancel()
	out, err := rr.AnswerRead(c, g, ctx.PostBody())
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBody(out)
}
