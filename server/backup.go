package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/backup"
	"github.com/queenmq/queen/raft"
)

// GET /api/v1/system/backup streams a backup file (engine/backup) of every
// Raft group: each group is read at one index, at or past its leader's
// read index when the request arrived, so every command answered before
// then is in it; writes go on meanwhile. Each group's state is a Pebble
// snapshot held only while it streams.
//
// With one group a follower relays the request to the leader, whose copy
// is streamed back through it; ?local=true has the follower serve its own
// copy instead, after the same read-index wait. With several groups
// (--groups) the groups' leaders are spread over the nodes: the node that
// receives the request serves every group from its own replicas, each
// after its read-index wait, which gives the same guarantee.
//
// The status is sent before the state is: a failure while streaming ends
// the body without the trailer, which every reader of the file refuses.

// inProcess is a broker that runs one engine in process (raft.Local in
// tests): its only group, 1, is backed up as it is.
type inProcess interface {
	Engine() *engine.Engine
}

// backupView is one group's state held for a backup.
type backupView struct {
	group uint32
	snap  *engine.Snapshot
}

func (s *Server) backup(ctx *fasthttp.RequestCtx, _ *params) {
	local := queryBool(ctx.QueryArgs(), "local", false)
	if !local && s.groups.leaderKnownUnread() {
		if st := s.broker.Status(); st.Role != "leader" {
			if !s.relayStream(ctx, st) {
				s.writeError(ctx, raft.ErrNotLeader)
			}
			return
		}
	}
	c, cancel := context.WithTimeout(s.ctx, readIndexTimeout)
	views, m, err := s.backupViews(c)
	cancel()
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	conn := ctx.Conn()
	timeout := s.opts.WriteTimeout
	ctx.SetContentType("application/octet-stream")
	ctx.Response.Header.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="queen-%s-%s.qbak"`,
		m.Node, m.Created.Format("20060102T150405Z")))
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer func() {
			for _, v := range views {
				v.snap.Close()
			}
		}()
		err := writeBackup(&deadlineWriter{w: w, conn: conn, timeout: timeout}, m, views)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			s.log.Warn("backup: stream ended early", "err", err)
			return
		}
		s.log.Info("backup: streamed", "groups", len(views))
	})
}

func writeBackup(w io.Writer, m backup.Manifest, views []backupView) error {
	bw, err := backup.NewWriter(w, m)
	if err != nil {
		return err
	}
	for _, v := range views {
		if err := bw.WriteGroup(v.snap); err != nil {
			return err
		}
	}
	return bw.Close()
}

// backupViews waits for each of this node's replicas to reach its group's
// read index, then holds a snapshot of it, and describes them.
func (s *Server) backupViews(ctx context.Context) (views []backupView, m backup.Manifest, err error) {
	defer func() {
		if err != nil {
			for _, v := range views {
				v.snap.Close()
			}
		}
	}()
	m = backup.Manifest{Created: time.Now().UTC(), Node: s.nodeID()}
	var replicas []*raft.Node
	if rb, ok := s.broker.(Replicated); ok {
		replicas = rb.Replicas()
	}
	if len(replicas) == 0 {
		eb, ok := s.broker.(inProcess)
		if !ok {
			return nil, m, notImplemented("this broker cannot be backed up")
		}
		snap, err := eb.Engine().Snapshot()
		if err != nil {
			return nil, m, err
		}
		views = append(views, backupView{group: 1, snap: snap})
	}
	for _, n := range replicas {
		if s.reads != nil {
			if err := s.reads.CatchUp(ctx, n); err != nil {
				return views, m, err
			}
		}
		snap, err := n.Engine().Snapshot()
		if err != nil {
			return views, m, err
		}
		views = append(views, backupView{group: n.GroupID(), snap: snap})
		if m.Members == nil {
			m.Members = n.Members()
		}
	}
	for _, v := range views {
		counts, err := v.snap.QueueCounts()
		if err != nil {
			return views, m, err
		}
		m.Groups = append(m.Groups, backup.Group{ID: v.group, Index: v.snap.Applied, Queues: counts})
	}
	return views, m, nil
}

// deadlineWriter pushes the connection's write deadline on as the stream
// makes progress: a backup takes as long as the store is large, and only a
// stalled client should time out.
type deadlineWriter struct {
	w       io.Writer
	conn    net.Conn
	timeout time.Duration
	last    time.Time
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	if now := time.Now(); now.Sub(d.last) > time.Second {
		d.last = now
		d.conn.SetWriteDeadline(now.Add(d.timeout))
	}
	return d.w.Write(p)
}

// relayStream relays a backup request to the leader and streams its answer
// back as it comes, without holding it: forwardAs reads a whole answer
// first. It reports false when there is nowhere to relay to.
func (s *Server) relayStream(ctx *fasthttp.RequestCtx, st raft.Status) bool {
	if len(ctx.Request.Header.Peek(forwardedHeader)) > 0 || st.LeaderHTTP == "" || st.Leader == st.ID {
		return false
	}
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	relayCopy(&ctx.Request, req)
	req.URI().SetScheme(s.relayScheme())
	req.SetHost(st.LeaderHTTP)
	req.Header.Set(forwardedHeader, st.ID)
	req.Header.Set(deadlineHeader, strconv.FormatInt(time.Now().Add(forwardTimeout).UnixMicro(), 10))
	conn, err := s.dialLeader(st.LeaderHTTP)
	if err == nil {
		err = sendRequest(conn, req)
	}
	resp := fasthttp.AcquireResponse()
	resp.StreamBody = true
	if err == nil {
		err = resp.Read(bufio.NewReaderSize(&deadlineReader{conn: conn, timeout: forwardTimeout}, 64<<10))
	}
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		fasthttp.ReleaseResponse(resp)
		s.log.Warn("backup: relay to leader", "leader", st.Leader, "addr", st.LeaderHTTP, "err", err)
		s.writeError(ctx, errors.Join(raft.ErrForward, err))
		return true
	}
	ctx.SetStatusCode(resp.StatusCode())
	for _, h := range []string{fasthttp.HeaderContentType, "Content-Disposition", "Retry-After"} {
		if v := resp.Header.Peek(h); len(v) > 0 {
			ctx.Response.Header.SetBytesV(h, v)
		}
	}
	ctx.SetBodyStream(&relayedBody{resp: resp, conn: conn}, -1)
	s.m.forwarded.Inc()
	return true
}

func sendRequest(conn net.Conn, req *fasthttp.Request) error {
	conn.SetWriteDeadline(time.Now().Add(forwardTimeout))
	bw := bufio.NewWriter(conn)
	if err := req.Write(bw); err != nil {
		return err
	}
	return bw.Flush()
}

// deadlineReader pushes the connection's read deadline on at every read:
// only a leader that stops sending times out.
type deadlineReader struct {
	conn    net.Conn
	timeout time.Duration
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	d.conn.SetReadDeadline(time.Now().Add(d.timeout))
	return d.conn.Read(p)
}

// relayedBody is the leader's answer being streamed; fasthttp closes it
// once sent (or the client left), which drops the connection to the leader.
type relayedBody struct {
	resp *fasthttp.Response
	conn net.Conn
}

func (b *relayedBody) Read(p []byte) (int, error) { return b.resp.BodyStream().Read(p) }

func (b *relayedBody) Close() error {
	b.conn.Close()
	b.resp.CloseBodyStream()
	fasthttp.ReleaseResponse(b.resp)
	return nil
}
