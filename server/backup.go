package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/backup"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/backups"
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
// receives the request serves every group it hosts from its own replicas,
// each after its read-index wait, which gives the same guarantee. A group
// it does not host (groups on R of N nodes: its replica here is idle, and
// empty) it asks of that group's leader on the cluster path
// (POST /internal/v1/backup, backupGroup: a backup file of that group
// alone) and copies into its own file as the stream comes, verified frame
// by frame on the way.
//
// The status is sent before the state is: a failure while streaming ends
// the body without the trailer, which every reader of the file refuses.

// inProcess is a broker that runs one engine in process (raft.Local in
// tests): its only group, 1, is backed up as it is.
type inProcess interface {
	Engine() *engine.Engine
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
	s.streamBackup(ctx, m, views, s.opts.WriteTimeout)
}

// backupGroup answers POST /internal/v1/backup (cluster.Client.Backup): a
// backup file of the one group the request names, from this node's
// replica once it has applied as far as the group's read index. A node
// that does not host the group refuses (not_leader: the asking node looks
// for the leader again). The asking node reads the groups of its file one
// after another, so this stream may wait, unread, while it writes the
// groups before it: it is allowed cluster.BackupIdle to stall.
func (s *Server) backupGroup(ctx *fasthttp.RequestCtx, p *params) {
	rb, g, ok := nodeAsks[Replicated](s, ctx, p, "this broker backs up no group for other nodes")
	if !ok {
		return
	}
	_ = rb
	n := s.reads.Replica(g)
	if n == nil || !s.hosts(g) {
		s.writeError(ctx, fmt.Errorf("%w: group %d is not hosted here", raft.ErrNotLeader, g))
		return
	}
	c, cancel := context.WithTimeout(s.ctx, readIndexTimeout)
	v, err := s.replicaView(c, n)
	cancel()
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	views := []backups.View{v}
	m := backup.Manifest{Created: time.Now().UTC(), Node: s.nodeID(), Members: n.Members()}
	if m.Groups, err = backups.Describe(views); err != nil {
		v.Close()
		s.writeError(ctx, err)
		return
	}
	s.streamBackup(ctx, m, views, cluster.BackupIdle)
}

// hosts reports whether this node serves group g from its own replica
// (every group, unless groups are on R of N nodes).
func (s *Server) hosts(g uint32) bool {
	hg, ok := s.broker.(hostsGroups)
	return !ok || hg.Hosts(g)
}

// groupLister is a broker of several groups, not all of which it may
// hold a replica of (cluster.Host): Groups lists them all.
type groupLister interface{ Groups() []uint32 }

// backupGroups are the groups a backup of b holds: every group of a
// broker of several, else those of its replicas.
func backupGroups(b any, replicas []*raft.Node) []uint32 {
	if gl, ok := b.(groupLister); ok {
		return gl.Groups()
	}
	gs := make([]uint32, len(replicas))
	for i, n := range replicas {
		gs[i] = n.GroupID()
	}
	return gs
}

// streamBackup sends the backup file of views, described by m, as the
// answer, closing the views once sent; a write may stall up to timeout.
func (s *Server) streamBackup(ctx *fasthttp.RequestCtx, m backup.Manifest, views []backups.View, timeout time.Duration) {
	conn := ctx.Conn()
	ctx.SetContentType("application/octet-stream")
	ctx.Response.Header.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="queen-%s-%s.qbak"`,
		m.Node, m.Created.Format("20060102T150405Z")))
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer backups.CloseAll(views)
		err := backups.Write(&backups.DeadlineWriter{W: w, Conn: conn, Timeout: timeout}, m, views)
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

// backupViews holds each group's state for a backup: a snapshot of this
// node's replica once it has reached its group's read index, or, for a
// group this node does not host, the group's leader's backup of it; and
// describes them.
func (s *Server) backupViews(ctx context.Context) (views []backups.View, m backup.Manifest, err error) {
	defer func() {
		if err != nil {
			backups.CloseAll(views)
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
		views = append(views, backups.Local(1, snap))
	}
	if len(replicas) > 0 {
		m.Members = replicas[0].Members()
	}
	for _, g := range backupGroups(s.broker, replicas) {
		var v backups.View
		if n := s.reads.Replica(g); n != nil && s.hosts(g) {
			v, err = s.replicaView(ctx, n)
		} else {
			v, err = s.leaderView(ctx, g)
		}
		if err != nil {
			return views, m, err
		}
		views = append(views, v)
	}
	m.Groups, err = backups.Describe(views)
	return views, m, err
}

// replicaView holds a snapshot of n once it has applied as far as its
// group's read index.
func (s *Server) replicaView(ctx context.Context, n *raft.Node) (backups.View, error) {
	if s.reads != nil {
		if err := s.reads.CatchUp(ctx, n); err != nil {
			return backups.View{}, err
		}
	}
	snap, err := n.Engine().Snapshot()
	if err != nil {
		return backups.View{}, err
	}
	return backups.Local(n.GroupID(), snap), nil
}

// leaderView opens group g's backup from its leader (backupGroup), read
// up to its manifest. A leader that has just handed over, or one not
// known yet, is looked for again until ctx ends.
func (s *Server) leaderView(ctx context.Context, g uint32) (backups.View, error) {
	if s.cluster == nil {
		return backups.View{}, notImplemented(fmt.Sprintf("group %d is not hosted here, and without the cluster secret no other node is asked", g))
	}
	for {
		err := raft.ErrNoLeader
		if st := s.groups.status(g); st.LeaderHTTP != "" && st.Leader != s.nodeID() {
			var body *cluster.Stream
			if body, err = s.cluster.Backup(ctx, st.LeaderHTTP, g); err == nil {
				v, err := backups.Remote(g, body)
				if err != nil {
					return backups.View{}, fmt.Errorf("backup: group %d from %s: %w", g, st.Leader, err)
				}
				return v, nil
			}
		}
		if !errors.Is(err, raft.ErrNotLeader) && !errors.Is(err, raft.ErrNoLeader) && !errors.Is(err, raft.ErrForward) {
			return backups.View{}, err
		}
		select {
		case <-ctx.Done():
			return backups.View{}, errors.Join(err, fmt.Errorf("backup: no leader of group %d answered", g))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
