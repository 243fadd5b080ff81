package analytics

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/wire"
)

// testClock is a clock a test moves by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// queueBroker answers the two reads a rotation makes: every queue has
// parts partitions, and the storage error count is errs.
type queueBroker struct {
	Broker
	parts int
	errs  uint64
}

func (b queueBroker) Queue(string) (engine.QueueInfo, error) {
	return engine.QueueInfo{Partitions: make([]engine.PartitionInfo, b.parts)}, nil
}

func (b queueBroker) Status() raft.Status { return raft.Status{StorageErrors: b.errs} }

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The bucket width follows the range's whole minutes (docs/api.md §11).
func TestBucketMinutes(t *testing.T) {
	for _, c := range []struct{ d, want int64 }{
		{0, 1}, {60, 1}, {61, 5}, {360, 5}, {361, 15}, {1440, 15}, {1441, 60}, {10080, 60}, {10081, 360}, {100000, 360},
	} {
		if got := bucketMinutes(c.d); got != c.want {
			t.Errorf("bucketMinutes(%d) = %d, want %d", c.d, got, c.want)
		}
	}
}

// Buckets align to the hour, and 6-hour buckets to 00/06/12/18 UTC (not to
// the hour, as Queen does).
func TestBucketStart_Alignment(t *testing.T) {
	for _, c := range []struct {
		at   string
		b    int64
		want string
	}{
		{"2026-03-04T13:47:59Z", 1, "2026-03-04T13:47:00Z"},
		{"2026-03-04T13:47:00Z", 5, "2026-03-04T13:45:00Z"},
		{"2026-03-04T13:44:00Z", 15, "2026-03-04T13:30:00Z"},
		{"2026-03-04T13:47:00Z", 60, "2026-03-04T13:00:00Z"},
		{"2026-03-04T13:47:00Z", 360, "2026-03-04T12:00:00Z"},
		{"2026-03-04T05:59:00Z", 360, "2026-03-04T00:00:00Z"},
		{"2026-03-04T23:10:00Z", 360, "2026-03-04T18:00:00Z"},
		{"2026-03-04T06:00:00Z", 360, "2026-03-04T06:00:00Z"},
		{"1969-12-31T23:59:00Z", 5, "1969-12-31T23:55:00Z"},
	} {
		m := unixMinute(mustTime(t, c.at))
		got := time.Unix(bucketStart(m, c.b)*60, 0).UTC().Format(time.RFC3339)
		if got != c.want {
			t.Errorf("bucket of %s at %d minutes: %s, want %s", c.at, c.b, got, c.want)
		}
	}
}

// A ring keeps 24 h of minutes, at most analyticsQueuesPerMinute queues a
// minute (the rest counted under analyticsOtherQueue) and at most
// analyticsQueueEntries queue entries, whatever it is given.
func TestRing_Bounded(t *testing.T) {
	var r ring
	const minutes, queues = 2000, 300
	for at := int64(1); at <= minutes; at++ {
		m := minuteRecord{At: at}
		for q := range queues {
			m.Queues = append(m.Queues, queueMinute{Queue: fmt.Sprintf("q%03d", q), PushMessages: 1, Partitions: 1})
		}
		r.put(m)
		r.trim(at)
	}
	if len(r.minutes) > analyticsMinutes {
		t.Fatalf("%d minutes kept, cap %d", len(r.minutes), analyticsMinutes)
	}
	total := 0
	for _, m := range r.minutes {
		if len(m.Queues) > analyticsQueuesPerMinute {
			t.Fatalf("minute %d keeps %d queues, cap %d", m.At, len(m.Queues), analyticsQueuesPerMinute)
		}
		total += len(m.Queues)
		other := m.Queues[len(m.Queues)-1]
		if other.Queue != analyticsOtherQueue || other.PushMessages != queues-analyticsQueuesPerMinute+1 || other.Partitions != -1 {
			t.Fatalf("minute %d overflow entry %+v, want %s with %d pushes", m.At, other, analyticsOtherQueue, queues-analyticsQueuesPerMinute+1)
		}
	}
	if total != r.entries || total > analyticsQueueEntries {
		t.Fatalf("%d queue entries (counted %d), cap %d", total, r.entries, analyticsQueueEntries)
	}
	if newest := r.minutes[len(r.minutes)-1].At; newest != minutes {
		t.Fatalf("newest minute %d, want %d: the oldest go first", newest, minutes)
	}
	// The window alone: a minute 24 h old goes even with room to spare.
	var w ring
	w.put(minuteRecord{At: 10})
	w.put(minuteRecord{At: 11})
	w.trim(10 + analyticsMinutes)
	if len(w.minutes) != 1 || w.minutes[0].At != 11 {
		t.Fatalf("after a day: %+v, want minute 11 only", w.minutes)
	}
}

// Counting on the hot path caps a minute's queues too: the queues past
// the cap share the overflow entry, and each request counts once per queue.
func TestAnalytics_MinuteCapsItsQueues(t *testing.T) {
	clk := &testClock{t: mustTime(t, "2026-03-04T10:00:00Z")}
	a := New(Options{Now: clk.Now})
	var res []engine.PushResult
	for q := range 300 {
		res = append(res, engine.PushResult{Status: engine.Queued, Queue: fmt.Sprintf("q%03d", q)},
			engine.PushResult{Status: engine.Queued, Queue: fmt.Sprintf("q%03d", q)})
	}
	a.Pushed(res)
	if n := len(a.cur.Queues); n != analyticsQueuesPerMinute {
		t.Fatalf("%d queues in the minute, want the cap %d", n, analyticsQueuesPerMinute)
	}
	other := a.cur.Queues[a.idx[analyticsOtherQueue]]
	if want := int64(2 * (300 - analyticsQueuesPerMinute + 1)); other.PushMessages != want || other.PushRequests != 1 {
		t.Fatalf("overflow %+v, want %d messages in 1 request", other, want)
	}
	if q := a.cur.Queues[a.idx["q000"]]; q.PushMessages != 2 || q.PushRequests != 1 {
		t.Fatalf("q000 %+v, want 2 messages in 1 request", q)
	}
}

// The parked gauge is averaged over the minute's samples, and a minute is
// sealed with its queues' partition counts and storage errors once the
// clock has passed it.
func TestAnalytics_ParkedGaugeAndRotation(t *testing.T) {
	clk := &testClock{t: mustTime(t, "2026-03-04T10:00:00Z")}
	a := New(Options{Now: clk.Now})
	b := queueBroker{parts: 3, errs: 5}
	a.rotate(b) // nothing to seal
	a.Park("p", 1)
	a.Park("p", 1)
	a.sample(gauges{})
	a.Park("p", -1)
	a.sample(gauges{})
	a.Park("p", -1)
	a.sample(gauges{})
	a.sample(gauges{})
	a.rotate(b) // still 10:00
	if len(a.self.minutes) != 0 {
		t.Fatalf("sealed %d minutes before the minute ended", len(a.self.minutes))
	}
	clk.advance(time.Minute)
	a.rotate(b)
	if len(a.self.minutes) != 1 {
		t.Fatalf("sealed %d minutes, want 1", len(a.self.minutes))
	}
	m := a.self.minutes[0]
	if m.Node.Samples != 4 || len(m.Queues) != 1 || m.Queues[0].ParkedSum != 3 || m.Queues[0].Partitions != 3 || m.Node.DBErrors != 5 {
		t.Fatalf("sealed %+v, want 4 samples, p parked 2+1+0+0 with 3 partitions, 5 storage errors", m)
	}
	if len(a.parked) != 0 {
		t.Fatalf("parked gauge %v after every poll ended", a.parked)
	}
	q := Query{bucket: 1, nodes: a.series("n1", m.At, m.At)}
	got := q.mergeQueues()
	if len(got) != 1 || got[0].queues[0].parked != 0.75 {
		t.Fatalf("merged %+v, want p's gauge 3/4", got)
	}
}

// The leader merges a follower's shipment with its own minutes as Queen's
// queue table sums its workers: counters add up, lag is weighted by pops,
// maxima are maxima, each node's parked gauge is its own average, and the
// totals add up. A shipment sent twice changes nothing.
func TestAnalytics_LeaderMergesTwoNodes(t *testing.T) {
	start := mustTime(t, "2026-03-04T10:00:30Z")
	leaderClock, followerClock := &testClock{t: start}, &testClock{t: start}
	leader := New(Options{Now: leaderClock.Now})
	follower := New(Options{Now: followerClock.Now})
	pop := func(lag ...time.Duration) *engine.PopResult { // messages delivered lag after their push
		res := &engine.PopResult{}
		for _, l := range lag {
			res.Messages = append(res.Messages, engine.Message{Queue: "q", CreatedAt: start.Add(-l).UnixMicro()})
		}
		return res
	}
	leader.Pushed([]engine.PushResult{{Status: engine.Queued, Queue: "q"}, {Status: engine.Queued, Queue: "q"}})
	leader.Popped("q", false, pop(time.Second))
	follower.Pushed([]engine.PushResult{{Status: engine.Queued, Queue: "q"}})
	follower.Popped("q", false, pop(3*time.Second, 5*time.Second))
	follower.Popped("q", false, &engine.PopResult{})
	follower.Park("q", 1)
	follower.sample(gauges{})
	leader.sample(gauges{})
	for _, c := range []*testClock{leaderClock, followerClock} {
		c.advance(time.Minute)
	}
	b := queueBroker{parts: 2}
	leader.rotate(b)
	follower.rotate(b)

	sh, worth := follower.outbox("n2", "n1")
	if len(sh.Minutes) != 1 || !worth {
		t.Fatalf("outbox %+v, want the sealed minute", sh)
	}
	wire, err := json.Marshal(sh)
	if err != nil {
		t.Fatal(err)
	}
	var reply shipReply
	for range 2 {
		var got shipment
		if err := json.Unmarshal(wire, &got); err != nil {
			t.Fatal(err)
		}
		if reply, err = leader.receive("n1", &got); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := leader.receive("n1", &shipment{ID: "n1"}); err == nil {
		t.Fatal("the leader took a shipment in its own name")
	}
	// The reply carries the leader's own minute back: the follower holds
	// the cluster's history too, and would lead with it.
	if reply.Instance != leader.instance || len(reply.Nodes) != 1 || reply.Nodes[0].ID != "n1" || len(reply.Nodes[0].Minutes) != 1 || reply.More {
		t.Fatalf("reply %+v, want the leader's minute", reply)
	}
	follower.shipped("n2", "n1", sh.Minutes[0].At, &reply)
	if sh, worth := follower.outbox("n2", "n1"); worth || sh.Have["n1"] != reply.Nodes[0].Minutes[0].At {
		t.Fatalf("after the reply: %+v worth %v, want nothing to send and n1's minute held", sh, worth)
	}
	at := sh.Minutes[0].At
	q := Query{bucket: 1, nodes: leader.series("n1", at, at)}
	if len(q.nodes) != 2 || q.nodes[0].id != "n1" || q.nodes[1].id != "n2" {
		t.Fatalf("series of %d nodes, want n1 then n2", len(q.nodes))
	}
	merged := q.mergeQueues()
	if len(merged) != 1 || len(merged[0].queues) != 1 {
		t.Fatalf("merged %+v, want one minute of q", merged)
	}
	m := merged[0].queues[0]
	if m.PushMessages != 3 || m.PushRequests != 2 || m.PopMessages != 3 || m.PopEmpty != 1 || m.LagSum != 9000 || m.LagMax != 5000 ||
		m.Partitions != 2 || m.parked != 1 {
		t.Fatalf("merged q %+v (parked %v), want 3 pushes in 2 requests, 3 pops lagging 1+3+5 s, 1 empty pop, 2 partitions, 1 parked", m.queueMinute, m.parked)
	}
	if meanLag(m.LagSum, m.PopMessages) != 3000 {
		t.Fatalf("mean lag %d, want 3000", meanLag(m.LagSum, m.PopMessages))
	}
	var totals nodeMinute
	for _, n := range q.nodes {
		totals.add(&n.totals)
	}
	if totals.PushMessages != 3 || totals.PopMessages != 3 || totals.PopRequests != 3 || totals.PushRequests != 2 {
		t.Fatalf("totals %+v", totals)
	}
}

// A follower sends each sealed minute once, and everything again to a new
// leader or to a leader that restarted (a new instance in its reply).
func TestAnalytics_ShipmentsFollowTheLeader(t *testing.T) {
	clk := &testClock{t: mustTime(t, "2026-03-04T10:00:00Z")}
	a := New(Options{Now: clk.Now})
	b := queueBroker{}
	for range 3 {
		a.sample(gauges{})
		clk.advance(time.Minute)
		a.rotate(b)
	}
	sh, _ := a.outbox("n2", "n1")
	if len(sh.Minutes) != 3 {
		t.Fatalf("first shipment carries %d minutes, want 3", len(sh.Minutes))
	}
	a.shipped("n2", "n1", sh.Minutes[2].At, &shipReply{Instance: "i1"})
	if sh, worth := a.outbox("n2", "n1"); len(sh.Minutes) != 0 || worth {
		t.Fatalf("a shipped minute is sent again: %d", len(sh.Minutes))
	}
	a.sample(gauges{})
	clk.advance(time.Minute)
	a.rotate(b)
	if sh, _ := a.outbox("n2", "n1"); len(sh.Minutes) != 1 {
		t.Fatalf("the next minute: %d minutes, want 1", len(sh.Minutes))
	}
	a.shipped("n2", "n1", sh.Minutes[2].At+1, &shipReply{Instance: "i2"}) // the leader restarted
	if sh, _ := a.outbox("n2", "n1"); len(sh.Minutes) != 4 {
		t.Fatalf("to a restarted leader: %d minutes, want all 4", len(sh.Minutes))
	}
	if sh, _ := a.outbox("n2", "n3"); len(sh.Minutes) != 4 {
		t.Fatalf("to a new leader: %d minutes, want all 4", len(sh.Minutes))
	}
	// A reply that says more is held makes the next shipment worth sending
	// even with nothing of this node's own.
	a.shipped("n2", "n3", sh.Minutes[2].At+1, &shipReply{Instance: "i3", More: true})
	if sh, worth := a.outbox("n2", "n3"); len(sh.Minutes) != 0 || !worth {
		t.Fatalf("after a reply with more: %d minutes, worth %v", len(sh.Minutes), worth)
	}
}

// Ship and Receive carry a shipment as JSON: bad input is refused as the
// edge's 400s, and a reply that names no leader instance records nothing,
// so the minutes are sent again.
func TestAnalytics_ShipAndReceiveBodies(t *testing.T) {
	clk := &testClock{t: mustTime(t, "2026-03-04T10:00:00Z")}
	leader, follower := New(Options{Now: clk.Now}), New(Options{Now: clk.Now})
	if _, err := leader.Receive("n1", []byte("{")); !errors.Is(err, wire.ErrInvalidJSON) {
		t.Fatalf("a broken body: %v, want wire.ErrInvalidJSON", err)
	}
	if _, err := leader.Receive("n1", []byte(`{"minutes":[]}`)); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("a shipment without id: %v, want engine.ErrInvalid", err)
	}
	follower.sample(gauges{})
	clk.advance(time.Minute)
	follower.rotate(queueBroker{})
	bad := func([]byte) ([]byte, error) { return []byte(`{}`), nil }
	if err := follower.Ship("n2", "n1", bad); err == nil {
		t.Fatal("a reply without an instance was taken")
	}
	posts := 0
	post := func(body []byte) ([]byte, error) { posts++; return leader.Receive("n1", body) }
	if err := follower.Ship("n2", "n1", post); err != nil {
		t.Fatal(err)
	}
	if posts != 1 || len(leader.series("n1", 0, 1<<40)) != 2 {
		t.Fatalf("%d posts; the leader holds %d nodes, want the follower's minute after one post", posts, len(leader.series("n1", 0, 1<<40)))
	}
	// The reply carried the leader's (empty) ring and nothing more: there
	// is nothing left worth sending.
	if err := follower.Ship("n2", "n1", post); err != nil || posts != 1 {
		t.Fatalf("a second shipment with nothing new: err %v, %d posts", err, posts)
	}
}

// A query's range defaults to the last hour and sets the bucket width; a
// time or workerId it cannot read is a 400, never a default.
func TestAnalytics_ParseQuery(t *testing.T) {
	clk := &testClock{t: mustTime(t, "2026-03-04T10:00:00Z")}
	a := New(Options{Now: clk.Now})
	a.Bind(queueBroker{}, 0)
	args := func(s string) *fasthttp.Args {
		var q fasthttp.Args
		q.Parse(s)
		return &q
	}
	q, err := a.ParseQuery(args(""))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := q.to-q.from, int64(time.Hour/time.Microsecond); got != want || q.bucket != 1 {
		t.Fatalf("default range %d µs in %d-minute buckets, want %d in 1", got, q.bucket, want)
	}
	q, err = a.ParseQuery(args("from=2026-03-03T10:00:00Z&to=2026-03-04T10:00:00Z&queue=q&workerId=0"))
	if err != nil || q.bucket != 15 || q.Queue() != "q" || !q.node("n") {
		t.Fatalf("a day: bucket %d, queue %q, err %v", q.bucket, q.Queue(), err)
	}
	if q, _ := a.ParseQuery(args("workerId=3")); q.node("n") {
		t.Fatal("worker 3 passes the filter: a node is worker 0")
	}
	for _, s := range []string{"from=yesterday", "to=2026-13-01", "workerId=x"} {
		if _, err := a.ParseQuery(args(s)); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%s: err %v, want a 400", s, err)
		}
	}
}
