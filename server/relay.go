package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
	"github.com/queenmq/queen/server/relay"
)

// groupHeader names the Raft group a relayed command or membership change
// is for.
const groupHeader = cluster.GroupHeader

// Refusal is the error another node's error answer (status, body) stands
// for: the table's sentinel for its code, with its text. An unknown code
// is a failed relay (raft.ErrForward). It is how package cluster reads a
// refused command (cluster.Options.Refusal).
func Refusal(status int, body []byte) error {
	var e struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	_ = json.Unmarshal(body, &e)
	for _, r := range errorTable {
		if r.code == e.Code {
			return &apiError{Kind: r.err, Msg: e.Error}
		}
	}
	return fmt.Errorf("%w: answered %d %s", raft.ErrForward, status, e.Code)
}

// proposeRelayed answers POST /internal/v1/propose: a command another node
// forwarded (package cluster), proposed on the group groupHeader names.
// Only a node (the cluster secret) may send one: a prepared push's frames
// carry producer subjects and sealed bits the sending node vouches for.
// A single group's leader in push maintenance refuses a prepared push
// (errLeaderSpools): the follower that prepared it spools it. Its results
// are counted where they are answered, on the forwarding node
// (countPushed).
func (s *Server) proposeRelayed(ctx *fasthttp.RequestCtx, p *params) {
	g, ok := s.relayedGroup(ctx, p)
	if !ok {
		return
	}
	t, err := command.EntryType(ctx.PostBody())
	if err != nil {
		s.writeError(ctx, fmt.Errorf("%w: %w", raft.ErrNotPreparable, err))
		return
	}
	if m, ok := s.broker.(Maintainer); ok && t == command.TypePushPrepared && s.groups.leaderKnownUnread() && pushMaintenance(m) {
		s.writeError(ctx, errLeaderSpools)
		return
	}
	start := time.Now()
	out, r, err := cluster.Answer(s.ctx, s.groups, g, ctx.PostBody())
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	if _, ok := r.Value.([]engine.PushResult); ok {
		s.prop.Hist(engine.PushCmd{}).UpdateDuration(start)
	}
	ctx.SetContentType("application/octet-stream")
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBody(out)
}

// nodeAsks checks a request another node sent on the cluster path to a
// route only a broker that is a B serves: 501 (cannot) on one that is
// not, as a node without groups answers, then relayedGroup's checks. It
// returns the broker as a B and the group the request names; false when
// it answered the request with the refusal.
func nodeAsks[B any](s *Server, ctx *fasthttp.RequestCtx, p *params, cannot string) (B, uint32, bool) {
	b, ok := s.broker.(B)
	if !ok {
		s.writeError(ctx, notImplemented(cannot))
		return b, 0, false
	}
	g, ok := s.relayedGroup(ctx, p)
	return b, g, ok
}

// relayedGroup checks a request another node sent on the cluster path
// (the cluster secret, its deadline) and reads the group it names; false
// when it answered the request with the refusal.
func (s *Server) relayedGroup(ctx *fasthttp.RequestCtx, p *params) (uint32, bool) {
	var err error
	switch {
	case !p.node:
		err = errClusterSecret
	case relay.Expired(ctx):
		err = errForwardExpired
	}
	g, perr := cluster.ParseGroup(ctx.Request.Header.Peek(groupHeader))
	if err == nil && perr != nil {
		err = badRequest(groupHeader + " must name a group")
	}
	if err != nil {
		s.writeError(ctx, err)
		return 0, false
	}
	return g, true
}

// GroupMembership is a grouped broker's membership (cluster.Host): each
// group's voters change on that group's leader. ReplicaCount is R, the
// voters each data group has, as the directory records it: 0 when every
// node hosts every group.
type GroupMembership interface {
	JoinGroup(g uint32, id, addr string, force bool) error
	JoinGroupNonvoter(g uint32, id, addr string, force bool) error
	LeaveGroup(g uint32, id string, force bool) error
	ReplicaCount() uint32
}

// changeGroups joins a node to every group, or removes it from every
// group: on this node for the groups it leads, through each other group's
// leader (the join or leave route with groupHeader) for the rest. A join
// goes to the directory first and a leave to it last, so that a node is
// never in a data group the directory does not count it in. A request
// naming a group (relayed) changes that group only. Each change is
// idempotent, so a join retried after a failure part way finishes it.
//
// With the data groups on R of N nodes (joinsDirectoryOnly), a join is
// the directory's only: the directory's leader moves data-group replicas
// onto the new node. A leave (not forced) of a node whose replicas have
// somewhere to go drains it (cluster.Host.Drain): its replicas move to other
// nodes, add-then-remove, before the directory's leader removes it; the
// answer waits up to drainWait, then says they are still moving (503
// draining: asking again waits again). Otherwise, and when forced, a
// leave is from every group (one the node is not a voter of takes no
// change, raft.Node.Leave).
func (s *Server) changeGroups(ctx *fasthttp.RequestCtx, gm GroupMembership, c membershipChange) error {
	if h := ctx.Request.Header.Peek(groupHeader); len(h) > 0 {
		g, err := strconv.ParseUint(string(h), 10, 32)
		if err != nil {
			return badRequest(groupHeader + " must name a group")
		}
		return c.in(gm, uint32(g))
	}
	if d, ok := gm.(Drainer); ok && !c.join && !c.force && d.Drainable(c.id) {
		ctx, cancel := context.WithTimeout(s.ctx, drainWait)
		defer cancel()
		return d.Drain(ctx, c.id)
	}
	groups := s.groups.list() // the directory first
	if c.join && joinsDirectoryOnly(gm, s.groups.layout(), c.id) {
		groups = groups[:1]
	}
	if !c.join {
		slices.Reverse(groups)
	}
	for _, g := range groups {
		err := c.in(gm, g)
		var nl *raft.NotLeaderError
		if errors.As(err, &nl) && nl.Status.LeaderHTTP != "" {
			err = s.relayMembership(nl.Status.LeaderHTTP, g, c)
		}
		if err != nil {
			return fmt.Errorf("group %d: %w", g, err)
		}
	}
	return nil
}

// Drainer is a broker whose nodes leave by having their replicas moved
// first (cluster.Host with its groups on R of N nodes).
type Drainer interface {
	Drainable(id string) bool
	Drain(ctx context.Context, id string) error
}

// drainWait bounds how long a leave's answer waits for the leaving node's
// replicas to move (queen leave waits a little longer).
const drainWait = 50 * time.Second

// joinsDirectoryOnly reports whether node id joins the directory only:
// the directory records R (issue 30, "R of N") and, with id, the cluster
// has more nodes than R, so every data group has its R voters elsewhere.
// While the nodes are no more than R (a cluster below R after a loss),
// a joiner takes a voter in every group, as before R.
func joinsDirectoryOnly(gm GroupMembership, l raft.Layout, id string) bool {
	r := gm.ReplicaCount()
	if r == 0 {
		return false
	}
	n := len(l.Nodes)
	if !slices.ContainsFunc(l.Nodes, func(x raft.LayoutNode) bool { return x.ID == id }) {
		n++
	}
	return int(r) < n
}

// membershipChange is one join or leave the membership routes were asked
// for: a join adds id at addr as a voter, or as a non-voter.
type membershipChange struct {
	join, nonvoter bool
	id, addr       string
	force          bool
}

// in makes the change in group g, on this node (its leader).
func (c membershipChange) in(gm GroupMembership, g uint32) error {
	switch {
	case c.join && c.nonvoter:
		return gm.JoinGroupNonvoter(g, c.id, c.addr, c.force)
	case c.join:
		return gm.JoinGroup(g, c.id, c.addr, c.force)
	}
	return gm.LeaveGroup(g, c.id, c.force)
}

// relayMembership asks the leader of group g at addr to change that
// group's membership.
func (s *Server) relayMembership(addr string, g uint32, c membershipChange) error {
	path := cluster.LeavePath
	if c.join {
		path = cluster.JoinPath
	}
	as := asVoter
	if c.nonvoter {
		as = asNonvoter
	}
	body, err := json.Marshal(map[string]any{"id": c.id, "addr": c.addr, "force": c.force, "as": as})
	if err != nil {
		return err
	}
	// A membership change commits a configuration entry: the apply
	// timeout bounds it on the leader.
	status, answer, err := s.relay.PostGroup(addr, path, g, body, 2*forwardTimeout)
	if err != nil {
		return errors.Join(raft.ErrForward, fmt.Errorf("group %d at %s: %w", g, addr, err))
	}
	if status != fasthttp.StatusOK {
		return Refusal(status, answer)
	}
	return nil
}
