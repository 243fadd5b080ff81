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
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/wire"
)

// The join and leave routes: a node joins or leaves one Raft group's
// membership (Membership), or every group's (GroupMembership), each change
// made by, or relayed to, the group's leader.

// Membership is implemented by brokers whose cluster can grow and shrink
// (raft.Node). The join and leave routes answer 501 without it.
// force makes a change the broker would refuse as a risk to its quorum.
type Membership interface {
	Join(id, addr string, force bool) error
	JoinNonvoter(id, addr string, force bool) error
	Leave(id string, force bool) error
}

// clustered reports whether the broker is a cluster of nodes (rather
// than one engine in process): other nodes send it reports.
func (s *Server) clustered() bool {
	_, ok := s.broker.(Membership)
	_, groups := s.broker.(GroupMembership)
	return ok || groups
}

// join adds a voter or a non-voter, or promotes a non-voter: POST
// /internal/v1/cluster/join {"id","addr","force","as"}.
func (s *Server) join(ctx *fasthttp.RequestCtx, _ *params) {
	s.membership(ctx, true)
}

// The suffrages a join asks for ("as"; a voter when absent).
const (
	asVoter    = "voter"
	asNonvoter = "nonvoter"
)

// leave removes a server: POST /internal/v1/cluster/leave {"id","force"}.
func (s *Server) leave(ctx *fasthttp.RequestCtx, _ *params) {
	s.membership(ctx, false)
}

func (s *Server) membership(ctx *fasthttp.RequestCtx, join bool) {
	m, ok := s.broker.(Membership)
	gm, grouped := s.broker.(GroupMembership)
	if !ok && !grouped {
		s.writeError(ctx, notImplemented("this broker has no cluster membership"))
		return
	}
	var id, addr string
	var force bool
	as := asVoter
	voter := false // whether a join left id a voter (of the directory, with groups)
	err := wire.DecodeObject(ctx.PostBody(), false, func(sc *wire.Scanner, key []byte) (err error) {
		switch string(key) {
		case "id":
			id, _, err = sc.OptString("id")
		case "addr":
			addr, _, err = sc.OptString("addr")
		case "force":
			force, _, err = sc.OptBool("force")
		case "as":
			as, _, err = sc.OptString("as")
		default:
			err = sc.Skip()
		}
		return err
	})
	switch {
	case err != nil:
	case id == "":
		err = badRequest("id is required")
	case join && addr == "":
		err = badRequest("addr (the node's Raft host:port) is required")
	case as != asVoter && as != asNonvoter:
		err = badRequest(`as must be "voter" (the default) or "nonvoter"`)
	default:
		voter, err = s.membershipAgain(ctx, join, join || force, func() (bool, error) {
			switch {
			case grouped:
				return s.changeGroups(ctx, gm, membershipChange{join: join, nonvoter: as == asNonvoter, id: id, addr: addr, force: force})
			case join && as == asNonvoter:
				return false, m.JoinNonvoter(id, addr, force)
			case join:
				err := m.Join(id, addr, force)
				return err == nil, err
			}
			return false, m.Leave(id, force)
		})
	}
	if err != nil {
		s.forwardOrFail(ctx, err) // a follower relays the change to the leader
		return
	}
	w := startReply(ctx)
	w.Object("")
	w.Bool("success", true)
	w.Str("id", id)
	if join {
		// A directory at its most voters takes a joiner as a non-voter
		// (cluster/voters.go): the answer says which it is.
		w.Bool("voter", voter)
	}
	// What this node had applied once the change was made (the
	// directory's, with groups): a non-voter that joined waits until it
	// has applied as much before it asks to be promoted.
	w.Int("applied", int64(s.broker.Status().Applied))
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// membershipRetry bounds how long a membership change is made again while
// it is refused for a reason that passes (membershipAgain); membershipPause
// is the wait between tries.
const (
	membershipRetry = 20 * time.Second
	membershipPause = 250 * time.Millisecond
)

// membershipAgain makes a membership change (change), and makes it again
// while it is refused for a reason that passes: no leader yet, a leader
// handing over, a relay to a group's leader that failed. An operator's
// forced leave right after a node died meets the elections the death
// causes (503 no_leader or forward_failed for a second or two); the server
// retries, not the operator's shell. A change is idempotent: made again
// after an attempt whose outcome is unknown (a relay that failed may have
// been applied), a leave that finds the node gone from the directory
// (raft.ErrUnknownMember) is the change made, not a node that was never a
// member. A change another node relayed (one group's, groupHeader) is not
// retried here: its sender retries it; nor a leave that is not forced (retry
// false), which may drain the node's replicas first and has a wait of its
// own (changeGroups).
func (s *Server) membershipAgain(ctx *fasthttp.RequestCtx, join, retry bool, change func() (bool, error)) (bool, error) {
	relayed := !retry || len(ctx.Request.Header.Peek(groupHeader)) > 0
	deadline := time.Now().Add(membershipRetry)
	uncertain := false
	for {
		voter, err := change()
		switch {
		case err == nil:
			return voter, nil
		case uncertain && !join && errors.Is(err, raft.ErrUnknownMember):
			return false, nil
		case relayed || time.Now().After(deadline) || !passes(err):
			return voter, err
		}
		uncertain = uncertain || !errors.Is(err, raft.ErrNoLeader) && !errors.Is(err, raft.ErrNotLeader) &&
			!errors.Is(err, raft.ErrLeadershipTransfer)
		select {
		case <-s.ctx.Done():
			return voter, err
		case <-time.After(membershipPause):
		}
	}
}

// passes reports whether a membership change refused with err may be made
// by trying again shortly (membershipAgain). Not this node's leadership
// when a leader is known (a NotLeaderError with its address, or
// raft.ErrNotLeader from a node that knows one): the edge forwards the
// change there.
func passes(err error) bool {
	if nl := (*raft.NotLeaderError)(nil); errors.As(err, &nl) {
		return nl.Status.LeaderHTTP == ""
	}
	for _, e := range []error{raft.ErrNoLeader, raft.ErrLeadershipTransfer, raft.ErrLeadershipLost, raft.ErrTimeout, raft.ErrForward} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
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
	// Voter reports whether id is a voter of group g as this node knows
	// its configuration (on g's leader, after a change it made).
	Voter(g uint32, id string) bool
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
//
// voter says whether a join left the node a voter of the directory (of the
// group named, when relayed): on R of N the directory takes at most five.
func (s *Server) changeGroups(ctx *fasthttp.RequestCtx, gm GroupMembership, c membershipChange) (voter bool, err error) {
	if h := ctx.Request.Header.Peek(groupHeader); len(h) > 0 {
		g, err := strconv.ParseUint(string(h), 10, 32)
		if err != nil {
			return false, badRequest(groupHeader + " must name a group")
		}
		if err := c.in(gm, uint32(g)); err != nil {
			return false, err
		}
		return c.join && gm.Voter(uint32(g), c.id), nil
	}
	if d, ok := gm.(Drainer); ok && !c.join && !c.force && d.Drainable(c.id) {
		ctx, cancel := context.WithTimeout(s.ctx, drainWait)
		defer cancel()
		return false, d.Drain(ctx, c.id)
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
		v := err == nil && c.join && gm.Voter(g, c.id)
		var nl *raft.NotLeaderError
		if errors.As(err, &nl) && nl.Status.LeaderHTTP != "" {
			v, err = s.relayMembership(nl.Status.LeaderHTTP, g, c)
		}
		if err != nil {
			return false, fmt.Errorf("group %d: %w", g, err)
		}
		if g == raft.Directory {
			voter = v
		}
	}
	return voter, nil
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
// group's membership; voter is what its answer says of a join.
func (s *Server) relayMembership(addr string, g uint32, c membershipChange) (voter bool, err error) {
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
		return false, err
	}
	// A membership change commits a configuration entry: the apply
	// timeout bounds it on the leader.
	status, answer, err := s.relay.PostGroup(addr, path, g, body, 2*forwardTimeout)
	if err != nil {
		return false, errors.Join(raft.ErrForward, fmt.Errorf("group %d at %s: %w", g, addr, err))
	}
	if status != fasthttp.StatusOK {
		return false, Refusal(status, answer)
	}
	var a struct {
		Voter bool `json:"voter"`
	}
	_ = json.Unmarshal(answer, &a) // a leader of an earlier release says nothing: not a voter, as far as this answer knows
	return a.Voter, nil
}
