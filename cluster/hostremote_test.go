package cluster_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// readView is every read a Host answers, as one host answers them.
type readView struct {
	Queues    []engine.QueueInfo
	Queue     []engine.QueueInfo
	Configs   []engine.Config
	Found     []bool
	Cursors   []engine.CursorInfo
	Subs      []engine.Subscription
	DLQ       []engine.DeadLetter
	DLQTotal  int
	Dead      [][]engine.DeadLetter
	Messages  []engine.ListedMessage
	Message   []engine.StoredMessage
	Traces    [][]engine.Trace
	ByName    []engine.TraceAt
	ByNameN   int
	Names     []engine.TraceName
	NamesN    int
	QueueMsgs [][]engine.ListedMessage
}

// readAll reads everything through h; at is one message per group.
func readAll(t *testing.T, h *cluster.Host, queues []string, at []engine.PushResult, now int64) (readView, error) {
	t.Helper()
	var (
		v   readView
		err error
	)
	if v.Queues, err = h.Queues(); err != nil {
		return v, err
	}
	for _, q := range queues {
		info, err := h.Queue(q)
		if err != nil {
			return v, err
		}
		v.Queue = append(v.Queue, info)
		cfg, found := h.QueueConfig(q)
		v.Configs, v.Found = append(v.Configs, cfg), append(v.Found, found)
		msgs, err := h.ListMessages(engine.MessageFilter{Queue: q})
		if err != nil {
			return v, err
		}
		v.QueueMsgs = append(v.QueueMsgs, msgs)
	}
	if v.Cursors, err = h.Cursors(now, ""); err != nil {
		return v, err
	}
	if v.Subs, err = h.Subscriptions(); err != nil {
		return v, err
	}
	if v.DLQ, v.DLQTotal, err = h.ListDLQ(engine.DLQFilter{}); err != nil {
		return v, err
	}
	if v.Messages, err = h.ListMessages(engine.MessageFilter{}); err != nil {
		return v, err
	}
	for _, m := range at {
		sm, err := h.MessageAt(m.PartitionID, m.TransactionID)
		if err != nil {
			return v, fmt.Errorf("message %s: %w", m.TransactionID, err)
		}
		v.Message = append(v.Message, sm)
		tr, err := h.Traces(m.PartitionID, m.TransactionID)
		if err != nil {
			return v, err
		}
		v.Traces = append(v.Traces, tr)
		dl, err := h.DeadLettersAt(m.PartitionID, m.TransactionID)
		if err != nil {
			return v, err
		}
		v.Dead = append(v.Dead, dl)
	}
	if v.ByName, v.ByNameN, err = h.TracesByName("remote-read", 100, 0); err != nil {
		return v, err
	}
	v.Names, v.NamesN, err = h.TraceNames(100, 0)
	return v, err
}

// TestHost_ReadsGroupsItDoesNotHost: four hosts, four groups of three
// voters. Each host reads the group it is not a voter of from that group's
// leader: every read answers the same on every host, a read right after a
// push through a non-member sees it, and a discovery pop through a host
// whose own groups are empty finds the message in the group it does not
// host.
func TestHost_ReadsGroupsItDoesNotHost(t *testing.T) {
	t.Parallel()
	c := openSpreadHosts(t, 4, 4, 3)
	c.spreadSettled()
	l := c.h[0].Layout()
	outside := map[uint32]int{} // a group's non-member host
	for g := uint32(1); g <= 4; g++ {
		for i, p := range c.peers {
			if !slices.Contains(l.Groups[g].Members, p.ID) {
				outside[g] = i
			}
		}
	}
	var queues []string
	for g := uint32(1); g <= 4; g++ {
		q := fmt.Sprintf("ns.remote-%d", g)
		c.place(q, g)
		if _, err := c.patient(c.h[0], engine.ConfigureCmd{Queue: q, Namespace: "ns", NamespaceSet: true}); err != nil {
			t.Fatalf("configure %s: %v", q, err)
		}
		queues = append(queues, q)
	}

	// A discovery pop through the host outside group 1, whose own groups
	// hold no message: it finds the one in group 1.
	x := c.h[outside[1]]
	// A push an election on a busy machine refuses (nothing stored) or
	// leaves unknown is pushed again (pushedAgain); the reads below check
	// what is stored.
	push := func(h *cluster.Host, q, txn string) engine.PushResult {
		t.Helper()
		r := pushedAgain(t, h, []engine.PushItem{{Queue: q, TransactionID: txn, Payload: []byte(`{"n":1}`)}})[0]
		if r.Status != engine.Queued || r.TransactionID != txn {
			t.Fatalf("push %s to %s: %+v", txn, q, r)
		}
		return r
	}
	first := push(x, queues[0], "discover-me")
	// A pop whose answer an election lost (leadership lost while
	// committing) may have leased the message: its 1 s lease runs out and
	// the pop is asked again.
	var (
		r         engine.Result
		err       error
		uncertain bool
	)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, err = c.patient(x, engine.PopCmd{Namespace: "ns", Batch: 1, Partitions: 1, LeaseSeconds: 1})
		if raft.Transient(err) && time.Now().Before(deadline) {
			uncertain = true
			continue
		}
		if err == nil && uncertain && len(r.Value.(engine.PopResult).Messages) == 0 && time.Now().Before(deadline) {
			continue
		}
		break
	}
	if err != nil {
		t.Fatalf("discovery pop through %s: %v; %s", c.peers[outside[1]].ID, err, c.groupsSeen())
	}
	if msgs := r.Value.(engine.PopResult).Messages; len(msgs) != 1 || msgs[0].TransactionID != "discover-me" {
		t.Fatalf("discovery pop through the host outside group 1: %+v, want discover-me", msgs)
	}

	// Through each group's non-member: a push, then at once its reads.
	at := []engine.PushResult{first}
	for g := uint32(2); g <= 4; g++ {
		h := c.h[outside[g]]
		m := push(h, queues[g-1], fmt.Sprintf("ryw-%d", g))
		// A read is asked again only while it could not reach the group's
		// leader (an election: raft.Transient); what it answers is checked.
		var sm engine.StoredMessage
		err := readAgain(func() (err error) { sm, err = h.MessageAt(m.PartitionID, m.TransactionID); return err })
		if err != nil || sm.TransactionID != m.TransactionID || string(sm.Payload) != `{"n":1}` {
			t.Fatalf("read through %s right after its push to group %d: %+v, %v", c.peers[outside[g]].ID, g, sm, err)
		}
		var listed []engine.ListedMessage
		err = readAgain(func() (err error) { listed, err = h.ListMessages(engine.MessageFilter{Queue: queues[g-1]}); return err })
		if err != nil || len(listed) != 1 || listed[0].TransactionID != m.TransactionID {
			t.Fatalf("listing through %s right after its push to group %d (placed in %d there; layout %+v): %+v, %v",
				c.peers[outside[g]].ID, g, h.Placement(queues[g-1]), h.Layout().Groups[g], listed, err)
		}
		if h.Group(g) != nil {
			t.Fatalf("%s holds a replica of group %d, which the directory places elsewhere", c.peers[outside[g]].ID, g)
		}
		at = append(at, m)
	}
	// A trace and a dead letter, made through hosts outside their groups.
	if _, err := c.patient(c.h[outside[2]], engine.TraceCmd{PartitionID: at[1].PartitionID, TransactionID: at[1].TransactionID,
		Data: []byte(`{"step":1}`), Names: []string{"remote-read"}}); err != nil {
		t.Fatalf("trace: %v", err)
	}
	if _, err := c.patient(c.h[outside[3]], engine.MoveToDLQCmd{PartitionID: at[2].PartitionID, TransactionID: at[2].TransactionID,
		Error: "made to fail"}); err != nil {
		t.Fatalf("move to the DLQ: %v", err)
	}

	// The streams' leader read through the host outside group 1 names
	// group 1's leader, to which the edge forwards it. An election may
	// have moved that leadership since l was read, or leave it unknown for
	// a moment: the answer is asked again until it names a leader, which
	// must then be the one leading group 1.
	var (
		nl     *raft.NotLeaderError
		leader int
	)
	waitFor(t, "the leader read through the host outside group 1 to name group 1's leader", func() bool {
		err := c.h[outside[1]].LeaderRead(ctxT(t))
		if !errors.As(err, &nl) {
			t.Fatalf("leader read through the host outside group 1: %v, want NotLeaderError", err)
		}
		leader = slices.IndexFunc(c.peers, func(p raft.Peer) bool { return p.ID == nl.Status.Leader })
		return leader >= 0 && nl.Status.LeaderHTTP != "" && c.h[leader].Group(1).Status().Role == "leader"
	})
	if !slices.Contains(l.Groups[1].Members, nl.Status.Leader) || nl.Status.LeaderHTTP != "http-"+nl.Status.Leader {
		t.Fatalf("leader read through the host outside group 1 names %s at %q, not a voter of group 1 (%v) at its address",
			nl.Status.Leader, nl.Status.LeaderHTTP, l.Groups[1].Members)
	}

	// Every host answers every read alike (the voters' followers once
	// their replicas caught up), with what was written.
	now := time.Now().UnixMicro()
	var (
		views []readView
		why   string
	)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last difference: %s", why)
		}
	})
	waitFor(t, "every host to answer every read alike", func() bool {
		views = views[:0]
		for i, h := range c.h {
			v, err := readAll(t, h, queues, at, now)
			if err != nil {
				why = fmt.Sprintf("%s: %v", c.peers[i].ID, err)
				return false
			}
			views = append(views, v)
		}
		for i := range views[1:] {
			if d := viewDiff(views[0], views[i+1]); d != "" {
				why = fmt.Sprintf("%s and %s: %s", c.peers[0].ID, c.peers[i+1].ID, d)
				return false
			}
		}
		return true
	})
	v := views[0]
	if len(v.Queues) != 4 || len(v.Messages) != 4 || v.DLQTotal != 1 || len(v.DLQ) != 1 ||
		v.ByNameN != 1 || len(v.Names) != 1 || v.Names[0].Name != "remote-read" || len(v.Traces[1]) != 1 || len(v.Dead[2]) != 1 {
		t.Fatalf("the reads miss what was written: %d queues, %d messages, dlq %d/%d, traces by name %d, names %+v, traces %+v, dead %+v",
			len(v.Queues), len(v.Messages), len(v.DLQ), v.DLQTotal, v.ByNameN, v.Names, v.Traces, v.Dead)
	}
	for i, found := range v.Found {
		if !found || v.Configs[i] != v.Queue[i].Config {
			t.Fatalf("queue %s: config found %v, %+v", queues[i], found, v.Configs[i])
		}
	}
	if !slices.ContainsFunc(v.Cursors, func(ci engine.CursorInfo) bool { return ci.Queue == queues[0] }) {
		t.Fatalf("cursors miss the discovery pop's cursor: %+v", v.Cursors)
	}
}

// readAgain calls read again, for up to 30 s, while it could not reach
// the leader it reads from (raft.Transient: no leader, not the leader, a
// failed relay), which an election on a busy machine answers: a read
// changes nothing. Any other answer, the last included, is returned.
func readAgain(read func() error) error {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := read()
		if !raft.Transient(err) || time.Now().After(deadline) {
			return err
		}
	}
}

// viewDiff names the reads a and b answer differently, with both answers.
func viewDiff(a, b readView) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		if x, y := va.Field(i).Interface(), vb.Field(i).Interface(); !reflect.DeepEqual(x, y) {
			return fmt.Sprintf("%s: %+v / %+v", va.Type().Field(i).Name, x, y)
		}
	}
	return ""
}

// spreadSettled waits until each data group is led by the voter the hosts
// spread its leadership to (Host.WantedLeader), as
// every host's layout names it: until then a leader named a moment ago may
// hand over and refuse what is sent to it. Stopped hosts are skipped. It
// waits up to 60 s: after a restart, on a busy machine, the hand-overs
// take elections that may fail and be tried again.
func (c *hosts) spreadSettled() {
	c.t.Helper()
	waitForLong(c.t, "every group to be led by its wanted voter, as every host sees it", 60*time.Second, func() bool {
		for g := uint32(1); int(g) <= c.g; g++ {
			want := c.running().WantedLeader(g)
			if want == "" {
				return false
			}
			for i, h := range c.h {
				if h == nil {
					continue
				}
				if h.Layout().Groups[g].Leader != want {
					return false
				}
				if c.peers[i].ID == want && h.Group(g).Status().Role != "leader" {
					return false
				}
			}
		}
		return true
	})
}

// groupsSeen describes, for a failure, how each host sees each data
// group: whether it hosts it, holds a replica, and the status it answers.
func (c *hosts) groupsSeen() string {
	var b strings.Builder
	for i, h := range c.h {
		if h == nil {
			continue
		}
		for g := uint32(1); int(g) <= c.g; g++ {
			st := h.GroupStatus(g)
			fmt.Fprintf(&b, "%s/g%d: hosts=%v replica=%v role=%s leader=%q; ", c.peers[i].ID, g, h.Hosts(g), h.Group(g) != nil, st.Role, st.Leader)
		}
	}
	return b.String()
}
