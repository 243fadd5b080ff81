package analytics

// The analytics minutes between nodes: a query's series over every node,
// and the shipments by which followers send the leader their own minutes
// and receive the other nodes' (docs/api.md §11, ARCHITECTURE.md
// "Analytics").

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/queenmq/queen/server/wire"
)

// Ship sends this node's (id's) next shipment to leader through post,
// which posts a body to the leader's POST /internal/v1/cluster/analytics
// and returns the body of its 200 answer; it records the reply. Nothing is
// sent when there is nothing worth sending (outbox).
func (a *Analytics) Ship(id, leader string, post func(body []byte) ([]byte, error)) error {
	sh, worth := a.outbox(id, leader)
	if !worth {
		return nil
	}
	body, err := json.Marshal(&sh)
	if err != nil {
		return err
	}
	answer, err := post(body)
	if err != nil {
		return err
	}
	var reply shipReply
	if err := json.Unmarshal(answer, &reply); err != nil || reply.Instance == "" {
		return fmt.Errorf("leader answered %.200q", answer)
	}
	var through int64
	if n := len(sh.Minutes); n > 0 {
		through = sh.Minutes[n-1].At
	}
	a.shipped(id, leader, through, &reply)
	return nil
}

// Receive keeps another node's shipment, the body of a POST
// /internal/v1/cluster/analytics, on this node (self, the leader) and
// returns the reply's body. Bad input is a *wire.Error.
func (a *Analytics) Receive(self string, body []byte) ([]byte, error) {
	var sh shipment
	if err := json.Unmarshal(body, &sh); err != nil {
		return nil, &wire.Error{Kind: wire.ErrInvalidJSON, Msg: "Invalid JSON: " + err.Error()}
	}
	reply, err := a.receive(self, &sh)
	if err != nil {
		return nil, err
	}
	return json.Marshal(&reply)
}

// nodeSeries is one node's minutes in a query's range.
type nodeSeries struct {
	id      string
	port    int
	minutes []minuteRecord
	totals  nodeMinute
}

// series returns every node's minutes from..to (unix minutes), this
// node's first (as self), then the others by id.
func (a *Analytics) series(self string, from, to int64) []nodeSeries {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := []nodeSeries{{id: self, port: a.port, minutes: a.self.span(from, to), totals: a.self.totals}}
	for id, r := range a.peers {
		out = append(out, nodeSeries{id: id, port: r.port, minutes: r.span(from, to), totals: r.totals})
	}
	slices.SortFunc(out[1:], func(x, y nodeSeries) int { return strings.Compare(x.id, y.id) })
	return out
}

// shipment is one node's minutes (oldest first) and running totals: what a
// follower sends the leader about itself, and what the leader sends back
// about the other nodes. Have (from a follower) is the newest minute it
// holds of each other node.
type shipment struct {
	ID      string           `json:"id"`
	Port    int              `json:"port"`
	Minutes []minuteRecord   `json:"minutes"`
	Totals  nodeMinute       `json:"totals"`
	Have    map[string]int64 `json:"have,omitempty"`
}

// shipReply is the leader's answer to a shipment: its process instance,
// and the minutes of the other nodes (itself included) the follower lacks,
// at most analyticsShipMinutes of them; More says there are others.
type shipReply struct {
	Instance string     `json:"instance"`
	Nodes    []shipment `json:"nodes,omitempty"`
	More     bool       `json:"more,omitempty"`
}

// outbox returns the next shipment for leader, and whether it is worth
// sending: the minutes the leader does not have yet (up to
// analyticsShipMinutes; a new leader gets everything), or a pull of the
// leader's copies that its last reply said were not all sent.
func (a *Analytics) outbox(id, leader string) (shipment, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if leader != a.shipLeader {
		a.shipLeader, a.shipInstance, a.shipThrough, a.pullMore = leader, "", 0, true
	}
	i, found := slices.BinarySearchFunc(a.self.minutes, a.shipThrough, func(x minuteRecord, at int64) int { return cmp.Compare(x.At, at) })
	if found {
		i++
	}
	sh := shipment{ID: id, Port: a.port, Minutes: slices.Clone(a.self.minutes[i:min(len(a.self.minutes), i+analyticsShipMinutes)]),
		Totals: a.self.totals, Have: map[string]int64{}}
	for pid, r := range a.peers {
		if n := len(r.minutes); n > 0 {
			sh.Have[pid] = r.minutes[n-1].At
		}
	}
	return sh, len(sh.Minutes) > 0 || a.pullMore
}

// shipped records the leader's reply to a shipment whose minutes went
// through at: it keeps the other nodes' minutes the reply carries (so any
// node can lead with the cluster's history). A leader whose instance
// changed lost what it had: everything is sent again.
func (a *Analytics) shipped(self, leader string, through int64, reply *shipReply) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case leader != a.shipLeader:
		return
	case a.shipInstance != "" && reply.Instance != a.shipInstance:
		a.shipInstance, a.shipThrough = reply.Instance, 0
	default:
		a.shipInstance, a.shipThrough = reply.Instance, max(a.shipThrough, through)
	}
	a.pullMore = reply.More
	for i := range reply.Nodes {
		if reply.Nodes[i].ID != self && reply.Nodes[i].ID != "" {
			a.keep(&reply.Nodes[i])
		}
	}
}

// receive keeps another node's shipment (on the leader) and returns the
// reply: the minutes of the nodes the sender does not have.
func (a *Analytics) receive(self string, sh *shipment) (shipReply, error) {
	switch {
	case sh.ID == "":
		return shipReply{}, wire.BadRequest("id is required")
	case sh.ID == self:
		return shipReply{}, wire.BadRequest("a node does not ship to itself")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.keep(sh)
	reply := shipReply{Instance: a.instance}
	budget := analyticsShipMinutes
	add := func(id string, r *ring) {
		i, found := slices.BinarySearchFunc(r.minutes, sh.Have[id], func(x minuteRecord, at int64) int { return cmp.Compare(x.At, at) })
		if found {
			i++
		}
		if i == len(r.minutes) {
			return
		}
		if budget == 0 || len(r.minutes)-i > budget {
			reply.More = true
		}
		n := min(len(r.minutes)-i, budget)
		if n == 0 {
			return
		}
		budget -= n
		reply.Nodes = append(reply.Nodes, shipment{ID: id, Port: r.port, Minutes: slices.Clone(r.minutes[i : i+n]), Totals: r.totals})
	}
	self1 := a.self
	self1.port = a.port
	add(self, &self1)
	for _, id := range slices.Sorted(maps.Keys(a.peers)) {
		if id != sh.ID {
			add(id, a.peers[id])
		}
	}
	return reply, nil
}

// keep stores a node's shipment in its ring, within the window; mu is held.
func (a *Analytics) keep(sh *shipment) {
	now := a.now()
	nowMin := unixMinute(now)
	r := a.peers[sh.ID]
	if r == nil {
		if len(a.peers) >= analyticsNodes-1 {
			// Forget the node heard from least recently.
			var oldest string
			for id, p := range a.peers {
				if oldest == "" || p.seen.Before(a.peers[oldest].seen) {
					oldest = id
				}
			}
			delete(a.peers, oldest)
		}
		r = &ring{}
		a.peers[sh.ID] = r
	}
	for _, m := range sh.Minutes {
		if m.At > nowMin-analyticsMinutes && m.At <= nowMin+analyticsSkewMinutes {
			r.put(m)
		}
	}
	r.trim(nowMin)
	r.totals, r.port, r.seen = sh.Totals, sh.Port, now
}
