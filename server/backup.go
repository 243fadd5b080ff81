package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
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
			relayed, err := s.relay.Stream(ctx, st)
			switch {
			case !relayed:
				s.writeError(ctx, raft.ErrNotLeader)
			case err != nil:
				s.writeError(ctx, err)
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
