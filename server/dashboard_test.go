package server_test

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server"
)

// statusReply is what /api/v1/status answers that the dashboard reads.
type statusReply struct {
	BucketMinutes, PointCount int
	Throughput                []map[string]any
	Queues                    []struct{ Name string }
	Messages                  struct {
		Requests        struct{ Push, Pop, Ack int64 }
		BatchEfficiency map[string]float64
	}
	Workers []map[string]any
	Errors  struct{ DbErrors, AckFailed, DlqMessages int64 }
}

// throughputKeys are the fields of a status throughput row (Queen's).
var throughputKeys = []string{"timestamp", "ingested", "processed", "popMessages", "ingestedPerSecond", "processedPerSecond",
	"popPerSecond", "avgLagMs", "maxLagMs", "dbErrors", "ackFailed", "dlqCount", "avgEventLoopLagMs", "maxEventLoopLagMs",
	"minFreeSlots", "queenCpuUserPct", "queenCpuSysPct", "queenRssMb", "dbPoolActive", "dbPoolIdle", "dbPoolSize"}

// traffic pushes five messages to queue in two requests, pops them in one
// and acks them in one batch, five seconds after the pushes.
func traffic(c *client, queue string) {
	c.t.Helper()
	c.push(map[string]any{"queue": queue, "payload": 1}, map[string]any{"queue": queue, "payload": 2}, map[string]any{"queue": queue, "payload": 3})
	c.push(map[string]any{"queue": queue, "payload": 4}, map[string]any{"queue": queue, "payload": 5})
	c.elapse(5 * time.Second)
	p := c.mustPop(popPath(queue, "batch=10"))
	if len(p.Messages) != 5 {
		c.t.Fatalf("popped %d messages, want 5", len(p.Messages))
	}
	c.ackBatch("", p.Messages, "completed", "completed", "completed", "completed", "completed")
}

// After a minute of pushes, pops and acks, /api/v1/status has a
// throughput row for the minute with Queen's fields, one worker, the
// request totals and the messages per request; the overview's current
// rates are the minute's.
func TestStatus_ThroughputWorkersAndBatchEfficiency(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: t0}
	c, _ := analyticsServer(t, newEngineBroker(t, clock), clock, server.Options{})
	c.configure("dash", nil)
	traffic(c, "dash")
	var st statusReply
	c.get("/api/v1/status"+rangeQuery, &st)
	if st.PointCount != 0 || len(st.Throughput) != 0 {
		t.Fatalf("status during the minute: %+v", st)
	}
	c.elapse(time.Minute)

	c.get("/api/v1/status"+rangeQuery, &st)
	if st.BucketMinutes != 1 || st.PointCount != len(st.Throughput) || len(st.Throughput) != 1 {
		t.Fatalf("status: %d points, %d rows, bucket %d", st.PointCount, len(st.Throughput), st.BucketMinutes)
	}
	row := st.Throughput[0]
	for _, k := range throughputKeys {
		if _, ok := row[k]; !ok {
			t.Errorf("throughput row lacks %s", k)
		}
	}
	for k, v := range map[string]any{"timestamp": "2026-03-04T10:00:00Z", "ingested": 5.0, "processed": 5.0, "popMessages": 5.0,
		"ingestedPerSecond": 0.08, "processedPerSecond": 0.08, "popPerSecond": 0.08, "avgLagMs": 5000.0, "maxLagMs": 5000.0,
		"ackFailed": 0.0, "dlqCount": 0.0, "dbErrors": 0.0, "minFreeSlots": 0.0, "dbPoolActive": 0.0, "dbPoolIdle": 0.0, "dbPoolSize": 0.0} {
		if row[k] != v {
			t.Errorf("throughput %s = %v, want %v", k, row[k], v)
		}
	}
	if len(st.Workers) != 1 || st.Workers[0]["hostname"] != "local" || st.Workers[0]["messagesProcessed"] != 10.0 {
		t.Fatalf("workers %v", st.Workers)
	}
	if r := st.Messages.Requests; r.Push != 2 || r.Pop != 1 || r.Ack != 1 {
		t.Fatalf("requests %+v, want 2 pushes, 1 pop, 1 ack", r)
	}
	if b := st.Messages.BatchEfficiency; b["push"] != 2.5 || b["pop"] != 5 || b["ack"] != 5 || len(b) != 3 {
		t.Fatalf("batchEfficiency %v, want messages per request {2.5, 5, 5}", b)
	}

	// A queue filter counts that queue's entries; another queue has none.
	c.get("/api/v1/status"+rangeQuery+"&queue=dash", &st)
	if len(st.Throughput) != 1 || st.Throughput[0]["ingested"] != 5.0 || st.Throughput[0]["processed"] != 5.0 || len(st.Queues) != 1 {
		t.Fatalf("status for dash: %+v", st)
	}
	c.get("/api/v1/status"+rangeQuery+"&queue=other", &st)
	if len(st.Throughput) != 0 || st.PointCount != 0 || len(st.Queues) != 0 {
		t.Fatalf("status for another queue: %+v", st)
	}
	c.do("GET", "/api/v1/status?from=yesterday", nil).expectError(t, 400, "invalid_argument")

	var ov struct {
		Throughput struct{ IngestedPerSecond, ProcessedPerSecond float64 }
	}
	c.get("/api/v1/resources/overview", &ov)
	if ov.Throughput.IngestedPerSecond != 0.08 || ov.Throughput.ProcessedPerSecond != 0.08 {
		t.Fatalf("overview rates %+v, want the last minute's 5/60 s", ov.Throughput)
	}
	// Two minutes without traffic later, the rates are 0 again.
	c.elapse(2 * time.Minute)
	c.get("/api/v1/resources/overview", &ov)
	if ov.Throughput.IngestedPerSecond != 0 || ov.Throughput.ProcessedPerSecond != 0 {
		t.Fatalf("overview rates after the traffic %+v", ov.Throughput)
	}
}

// namedFollower follows the leader at leaderHTTP as node id.
type namedFollower struct {
	memberEngine
	id, leaderHTTP string
}

func (b namedFollower) Status() raft.Status {
	st := b.memberEngine.Status()
	st.ID, st.Role, st.LeaderHTTP = b.id, "follower", b.leaderHTTP
	return st
}

// On three nodes, each counting the traffic it served, /api/v1/status and
// the overview sum the nodes' minutes once, list one worker per node, and
// answer the same through a follower (which has the leader answer).
func TestStatus_ThreeNodesSumOnce(t *testing.T) {
	t.Parallel()
	const secret = "dashboard-test-secret-dashboard!"
	clock := &fakeClock{t: t0}
	lb := memberEngine{newEngineBroker(t, clock)}
	leader, _ := analyticsServer(t, lb, clock, server.Options{ClusterSecret: secret})
	addr := strings.TrimPrefix(leader.base, "http://")
	n2, _ := analyticsServer(t, namedFollower{lb, "n2", addr}, clock, server.Options{ClusterSecret: secret})
	n3, _ := analyticsServer(t, namedFollower{lb, "n3", addr}, clock, server.Options{ClusterSecret: secret})
	for i, c := range []*client{leader, n2, n3} {
		q := []string{"a", "b", "c"}[i]
		c.configure(q, nil)
		traffic(c, q)
	}

	const wide = "?from=2026-03-04T09:00:00Z&to=2026-03-04T10:30:00Z"
	ingested := func(st *statusReply) (n float64) {
		for _, r := range st.Throughput {
			n += r["ingested"].(float64)
		}
		return n
	}
	var st statusReply
	clock.advance(time.Minute) // the followers seal the minute and send it
	waitFor(t, 20*time.Second, "every node's minute on the leader", func() bool {
		leader.get("/api/v1/status"+wide, &st)
		return ingested(&st) == 15 && len(st.Workers) == 3
	})
	var hosts []string
	for _, w := range st.Workers {
		hosts = append(hosts, w["hostname"].(string))
	}
	if !slices.Equal(hosts, []string{"local", "n2", "n3"}) {
		t.Fatalf("workers %v, want one per node", hosts)
	}
	if r := st.Messages.Requests; r.Push != 6 || r.Pop != 3 || r.Ack != 3 {
		t.Fatalf("requests %+v, want each node's once", r)
	}
	for _, c := range []*client{n2, n3} {
		var via statusReply
		c.get("/api/v1/status"+wide, &via)
		if ingested(&via) != 15 || len(via.Workers) != 3 || via.PointCount != len(via.Throughput) || via.Messages.BatchEfficiency["push"] != 2.5 {
			t.Fatalf("status through a follower: %+v", via)
		}
	}
	// Each queue's Default partition counts once, not once per node.
	for _, c := range []*client{leader, n2} {
		var ops queueOps
		c.get("/api/v1/analytics/queue-ops"+wide, &ops)
		var parts int64
		for _, s := range ops.Series {
			parts += *s.PartitionsCreated
		}
		if parts != 3 {
			t.Fatalf("partitions created %d, want 3", parts)
		}
	}
	var ov struct {
		Throughput struct{ IngestedPerSecond, ProcessedPerSecond float64 }
	}
	n3.get("/api/v1/resources/overview", &ov)
	if ov.Throughput.IngestedPerSecond != 0.25 || ov.Throughput.ProcessedPerSecond != 0.25 {
		t.Fatalf("overview through a follower %+v, want 15 messages a minute", ov.Throughput)
	}
}

// queue-ops counts the partitions each queue created per bucket, from the
// store (configure creates Default, pushes create the others), once the
// minute is over; none is deleted but with its queue.
func TestQueueOps_PartitionsCreated(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: t0}
	c, _ := analyticsServer(t, newEngineBroker(t, clock), clock, server.Options{})
	c.configure("parts", nil)
	c.push(map[string]any{"queue": "parts", "partition": "p1", "payload": 1}, map[string]any{"queue": "parts", "partition": "p2", "payload": 2},
		map[string]any{"queue": "parts", "partition": "p3", "payload": 3}, map[string]any{"queue": "parts", "partition": "p1", "payload": 4})
	created := func(query string) map[string]int64 {
		var ops queueOps
		c.get("/api/v1/analytics/queue-ops"+query, &ops)
		got := map[string]int64{}
		for _, s := range ops.Series {
			if s.PartitionsCreated == nil || s.PartitionsDeleted == nil || *s.PartitionsDeleted != 0 {
				t.Fatalf("queue-ops entry %+v", s)
			}
			got[s.Bucket+" "+s.QueueName] = *s.PartitionsCreated
		}
		return got
	}
	if got := created(rangeQuery); len(got) != 0 {
		t.Fatalf("partitions created during the minute: %v", got)
	}
	c.elapse(time.Minute)
	c.pushOne("parts", "p4", "", 5)
	c.elapse(time.Minute)
	want := map[string]int64{"2026-03-04T10:00:00Z parts": 4, "2026-03-04T10:01:00Z parts": 1}
	for _, q := range []string{rangeQuery, rangeQuery + "&queue=parts"} {
		if got := created(q); !maps.Equal(got, want) {
			t.Fatalf("partitions created %s: %v, want %v", q, got, want)
		}
	}
	if got := created(rangeQuery + "&queue=nope"); len(got) != 0 {
		t.Fatalf("partitions created by an unknown queue: %v", got)
	}
	// Six hours are bucketed by 5 minutes: one bucket holds both minutes.
	if got := created("?from=2026-03-04T06:00:00Z&to=2026-03-04T12:00:00Z"); !maps.Equal(got, map[string]int64{"2026-03-04T10:00:00Z parts": 5}) {
		t.Fatalf("partitions created in 5-minute buckets: %v", got)
	}
}

// migrationAction reports whether r is one of the migration actions,
// which answer 501 whoever asks.
func migrationAction(r server.Route) bool {
	return r.Method == "POST" && strings.HasPrefix(r.Pattern, "/api/v1/migration/")
}

// groupsOnly reports whether r serves only a node run with --groups (a
// queue's move): other brokers answer it 501.
func groupsOnly(r server.Route) bool { return r.Name == "queue_move" }

// The Migration page's status answers idle, with why; its actions are a
// clear 501.
func TestMigration_IdleAndNotImplemented(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	st := c.do("GET", "/api/v1/migration/status", nil).expect(t, 200).object(t)
	if st["status"] != "idle" || st["supported"] != false || !strings.Contains(st["note"].(string), "PostgreSQL does not apply") {
		t.Fatalf("migration status %v", st)
	}
	for _, action := range []string{"test-connection", "start", "validate", "reset"} {
		c.do("POST", "/api/v1/migration/"+action, map[string]any{"host": "db", "database": "queen"}).expectError(t, 501, "not_implemented")
	}
	c.do("POST", "/api/v1/migration/other", nil).expectError(t, 404, "no_such_route")
}
