package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/analytics"
)

// fakeClock is the one clock of an analytics test: the broker stamps
// commands with it and the analytics count minutes and lag by it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) micros() int64 { return c.Now().UnixMicro() }

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// engineBroker is a broker over a real engine on one node whose commands
// are stamped by a fake clock (servertest.Elapse moves it), so that lags
// are exact.
type engineBroker struct {
	*raft.Local
	*engine.Engine
	clock *fakeClock
}

func newEngineBroker(t *testing.T, clock *fakeClock) engineBroker {
	h := enginetest.MustOpenDir(t, t.TempDir(), enginetest.Options())
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return engineBroker{Local: raft.NewLocal(h.Engine, clock.micros, log), Engine: h.Engine, clock: clock}
}

func (engineBroker) Barrier(context.Context) error { return nil }

func (b engineBroker) Status() raft.Status {
	return raft.Status{ID: "local", Role: "leader", Leader: "local", Applied: b.Engine.Applied(), Term: 1, Voters: 1}
}

func (b engineBroker) Advance(d time.Duration) { b.clock.advance(d) }

// memberEngine has cluster membership, so the node-to-node routes run.
type memberEngine struct{ engineBroker }

func (memberEngine) Join(string, string, bool) error         { return nil }
func (memberEngine) JoinNonvoter(string, string, bool) error { return nil }
func (memberEngine) Leave(string, bool) error                { return nil }

// followerEngine says it follows the leader at leaderHTTP, as node n2.
type followerEngine struct {
	memberEngine
	leaderHTTP string
}

func (b followerEngine) Status() raft.Status {
	st := b.memberEngine.Status()
	st.ID, st.Role, st.LeaderHTTP = "n2", "follower", b.leaderHTTP
	return st
}

// t0 is when every analytics test starts: ten seconds into 10:00 UTC.
var t0 = time.Date(2026, 3, 4, 10, 0, 10, 0, time.UTC)

// analyticsServer serves b with a recorder on b's clock that samples and
// ships every 5 ms.
func analyticsServer(t *testing.T, b server.Broker, clock *fakeClock, opts server.Options) (*client, *analytics.Analytics) {
	ao := analytics.Options{Now: clock.Now, SampleInterval: 5 * time.Millisecond, ShipInterval: 5 * time.Millisecond}
	if eb, ok := b.(engineBroker); ok {
		ao.Store = eb.StoreStats
	}
	opts.Analytics = analytics.New(ao)
	return newClientOptions(t, b, opts), opts.Analytics
}

// get GETs path and decodes its 200 answer into v.
func (c *client) get(path string, v any) {
	c.t.Helper()
	c.do("GET", path, nil).expect(c.t, 200).decode(c.t, v)
}

// rangeQuery is the query of the minutes around t0.
const rangeQuery = "?from=2026-03-04T09:59:00Z&to=2026-03-04T10:03:00Z"

type queueOps struct {
	TimeRange     struct{ From, To string }
	BucketMinutes int
	Series        []struct {
		Bucket, QueueName                                                      string
		PushRequests, PushMessages, PopMessages, PopEmpty                      int64
		AckRequests, AckSuccess, AckFailed, Transactions                       int64
		PartitionsCreated, PartitionsDeleted                                   *int64
		PartitionCount                                                         *int64
		AvgLagMs, MaxLagMs                                                     int64
		PushPerSecond, PopPerSecond, AckPerSecond, EmptyPerSecond, ParkedCount float64
	}
	Queues []string
}

// Pushes, pops (their lag to the millisecond), empty pops, acks and a
// transaction are counted per queue and per node, in the minute they
// happened, and served once the minute is over.
func TestAnalytics_CountsTrafficAndLag(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: t0}
	c, _ := analyticsServer(t, newEngineBroker(t, clock), clock, server.Options{})
	c.configure("ops", nil)
	c.push(map[string]any{"queue": "ops", "payload": 1}, map[string]any{"queue": "ops", "payload": 2}, map[string]any{"queue": "ops", "payload": 3})
	c.elapse(5 * time.Second)
	two := c.mustPop(popPath("ops", "batch=2"))
	c.ackBatch("", two.Messages, "completed", "completed")
	c.elapse(3 * time.Second)
	one := c.mustPop(popPath("ops", "batch=10"))
	c.ack(one.Messages[0], "completed", "")
	c.mustBeEmpty(popPath("ops", "batch=1"))
	c.do("POST", "/api/v1/transaction", map[string]any{"operations": []any{map[string]any{"type": "push", "queue": "ops", "payload": 4}}}).expect(t, 200)
	// Nothing is served before the minute is over.
	var lag []map[string]any
	c.get("/api/v1/analytics/queue-lag"+rangeQuery, &lag)
	if len(lag) != 0 {
		t.Fatalf("queue-lag during the minute: %v", lag)
	}
	c.elapse(time.Minute)

	c.get("/api/v1/analytics/queue-lag"+rangeQuery, &lag)
	want := []map[string]any{{"queueName": "ops", "popCount": 3.0, "avgLagMs": 6000.0, "maxLagMs": 8000.0, "bucketTime": "2026-03-04T10:00:00Z"}}
	if fmt.Sprint(lag) != fmt.Sprint(want) {
		t.Fatalf("queue-lag %v, want %v", lag, want)
	}

	var ops queueOps
	c.get("/api/v1/analytics/queue-ops"+rangeQuery, &ops)
	if ops.TimeRange.From != "2026-03-04T09:59:00.000Z" || ops.TimeRange.To != "2026-03-04T10:03:00.000Z" || ops.BucketMinutes != 1 ||
		len(ops.Series) != 1 || !slices.Equal(ops.Queues, []string{"ops"}) {
		t.Fatalf("queue-ops %+v", ops)
	}
	s := ops.Series[0]
	if s.Bucket != "2026-03-04T10:00:00Z" || s.PushRequests != 1 || s.PushMessages != 4 || s.PopMessages != 3 || s.PopEmpty != 1 ||
		s.AckRequests != 2 || s.AckSuccess != 3 || s.AckFailed != 0 || s.Transactions != 1 || s.AvgLagMs != 6000 || s.MaxLagMs != 8000 ||
		s.PartitionCount == nil || *s.PartitionCount != 1 || s.PartitionsCreated == nil || *s.PartitionsCreated != 1 ||
		s.PushPerSecond != 0.07 || s.PopPerSecond != 0.05 || s.AckPerSecond != 0.05 || s.EmptyPerSecond != 0.02 || s.ParkedCount != 0 {
		t.Fatalf("queue-ops entry %+v", s)
	}

	var wm struct {
		BucketMinutes, PointCount int
		TimeSeries                []map[string]any
		Workers                   []map[string]any
		Queues                    []map[string]any
		Summary                   map[string]float64
	}
	c.get("/api/v1/analytics/worker-metrics"+rangeQuery, &wm)
	if wm.PointCount != len(wm.TimeSeries) || len(wm.TimeSeries) == 0 {
		t.Fatalf("worker-metrics: %d points for %d entries", wm.PointCount, len(wm.TimeSeries))
	}
	ts := wm.TimeSeries[len(wm.TimeSeries)-1] // newest first: 10:00 is the oldest
	for k, v := range map[string]any{"timestamp": "2026-03-04T10:00:00Z", "pushMessages": 4.0, "popMessages": 3.0, "ackMessages": 3.0,
		"pushRequests": 1.0, "popRequests": 3.0, "ackRequests": 2.0, "avgLagMs": 6000.0, "maxLagMs": 8000.0, "lagCount": 3.0,
		"ackSuccess": 3.0, "ackFailed": 0.0, "dlqCount": 0.0, "dbErrors": 0.0, "avgFreeSlots": 0.0, "backoffSize": 0.0} {
		if ts[k] != v {
			t.Errorf("worker-metrics timeSeries %s = %v, want %v", k, ts[k], v)
		}
	}
	for _, k := range []string{"jobsDone", "pushPerSecond", "popPerSecond", "ackPerSecond", "avgEventLoopLagMs", "maxEventLoopLagMs",
		"minFreeSlots", "dbConnections", "avgJobQueueSize", "maxJobQueueSize"} {
		if _, ok := ts[k]; !ok {
			t.Errorf("worker-metrics timeSeries lacks %s", k)
		}
	}
	if len(wm.Workers) != 1 || wm.Workers[0]["hostname"] != "local" || wm.Workers[0]["workerId"] != 0.0 ||
		wm.Workers[0]["messagesProcessed"] != 7.0 || wm.Workers[0]["lastSeen"] != "2026-03-04T10:00:00Z" {
		t.Fatalf("worker-metrics workers %v", wm.Workers)
	}
	if len(wm.Queues) != 1 || wm.Queues[0]["queueName"] != "ops" || wm.Queues[0]["popCount"] != 3.0 || wm.Queues[0]["avgLagMs"] != 6000.0 {
		t.Fatalf("worker-metrics queues %v", wm.Queues)
	}
	if s := wm.Summary; s["totalPushMessages"] != 4 || s["totalPopMessages"] != 3 || s["totalAckMessages"] != 3 || s["totalPushRequests"] != 1 ||
		s["totalPopRequests"] != 3 || s["totalAckRequests"] != 2 || s["pendingMessages"] != 1 || len(s) != 10 {
		t.Fatalf("worker-metrics summary %v", s)
	}
	// Filters: another host, or a worker other than 0, has no series.
	for _, q := range []string{"&hostname=elsewhere", "&workerId=1"} {
		c.get("/api/v1/analytics/worker-metrics"+rangeQuery+q, &wm)
		if len(wm.TimeSeries) != 0 || wm.PointCount != 0 {
			t.Fatalf("worker-metrics with %s: %v", q, wm.TimeSeries)
		}
	}
	// A range without the minute has no data; a queue filter keeps its queue.
	c.get("/api/v1/analytics/queue-lag?from=2026-03-04T10:01:00Z&to=2026-03-04T10:30:00Z", &lag)
	if len(lag) != 0 {
		t.Fatalf("queue-lag after the minute: %v", lag)
	}
	c.get("/api/v1/analytics/queue-ops"+rangeQuery+"&queue=other", &ops)
	if len(ops.Series) != 0 || len(ops.Queues) != 0 {
		t.Fatalf("queue-ops for another queue: %+v", ops)
	}
}

// An unparseable from or to is a 400 with Queen's text and our code; so is
// a workerId that is not an integer.
func TestAnalytics_InvalidTimes(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for _, r := range []struct{ path, text string }{
		{"/api/v1/analytics/queue-ops?from=yesterday", "invalid from"},
		{"/api/v1/analytics/queue-lag?to=soon", "invalid to"},
		{"/api/v1/analytics/retention?from=2026-13-45", "invalid from"},
		{"/api/v1/analytics/worker-metrics?from=x&to=y", "invalid from"},
		{"/api/v1/analytics/system-metrics?workerId=w1", "invalid workerId"},
		{"/api/v1/analytics/queue-parked-replicas?from=1%2F2", "invalid from"},
	} {
		var e map[string]string
		c.do("GET", r.path, nil).expect(t, 400).decode(t, &e)
		if e["error"] != r.text || e["code"] != "invalid_argument" {
			t.Errorf("GET %s: %v, want {%q, invalid_argument}", r.path, e, r.text)
		}
	}
}

// What the leader's retention sweeps delete is counted per minute:
// retention and eviction apart, one event per partition cut.
func TestAnalytics_RetentionFromSweeps(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: t0}
	b := newEngineBroker(t, clock)
	c, an := analyticsServer(t, b, clock, server.Options{})
	c.configure("ret", map[string]any{"retentionEnabled": true, "retentionSeconds": 2})
	c.configure("evict", map[string]any{"maxWaitTimeSeconds": 2})
	c.push(map[string]any{"queue": "ret", "payload": 1}, map[string]any{"queue": "ret", "payload": 2}, map[string]any{"queue": "ret", "payload": 3})
	c.push(map[string]any{"queue": "evict", "payload": 1}, map[string]any{"queue": "evict", "payload": 2})
	c.elapse(3 * time.Second)
	res, err := raft.Propose[engine.SweepResult](context.Background(), b, engine.SweepCmd{})
	if err != nil || res.Messages != 5 || res.Evicted != 2 || res.Partitions != 2 {
		t.Fatalf("sweep %+v %v, want 5 messages deleted, 2 of them evicted, from 2 partitions", res, err)
	}
	an.RecordSweep(res)
	an.RecordSweep(engine.SweepResult{}) // a sweep that deleted nothing is no event
	c.elapse(time.Minute)
	var got struct {
		BucketMinutes int
		Series        []map[string]any
		Totals        map[string]float64
		Note          string
	}
	c.get("/api/v1/analytics/retention"+rangeQuery, &got)
	want := map[string]any{"bucket": "2026-03-04T10:00:00Z", "retentionMsgs": 3.0, "completedRetentionMsgs": 0.0, "evictionMsgs": 2.0,
		"totalMsgs": 5.0, "eventCount": 2.0}
	if len(got.Series) != 1 || fmt.Sprint(got.Series[0]) != fmt.Sprint(want) || got.Note != "" {
		t.Fatalf("retention %+v, want one bucket %v", got, want)
	}
	if tt := got.Totals; tt["retentionMsgs"] != 3 || tt["evictionMsgs"] != 2 || tt["totalMsgs"] != 5 || tt["eventCount"] != 2 || tt["completedRetentionMsgs"] != 0 {
		t.Fatalf("retention totals %v", tt)
	}
	// A sweep's counts are not per queue: a queue filter matches nothing
	// and says so.
	c.get("/api/v1/analytics/retention"+rangeQuery+"&queue=ret", &got)
	if len(got.Series) != 0 || got.Totals["totalMsgs"] != 0 || len(got.Totals) != 5 || got.Note == "" {
		t.Fatalf("retention for one queue %+v", got)
	}
}

// A parked long-poll shows in the parked gauge of its queue and node.
func TestAnalytics_ParkedLongPolls(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: t0}
	c, _ := analyticsServer(t, newEngineBroker(t, clock), clock, server.Options{})
	c.configure("park", nil)
	done := make(chan int, 1)
	go func() {
		resp, err := http.Get(c.base + popPath("park", "wait=true&timeout=30000"))
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	const wide = "?from=2026-03-04T09:00:00Z&to=2026-03-04T20:00:00Z"
	var got struct {
		BucketMinutes int
		Series        []map[string]any
		Replicas      []map[string]any
	}
	waitFor(t, 20*time.Second, "a sealed minute with the poll parked", func() bool {
		c.elapse(time.Minute) // seals the minute the sampler counted the poll in
		c.get("/api/v1/analytics/queue-parked-replicas"+wide, &got)
		return len(got.Series) > 0
	})
	s := got.Series[0]
	if p, _ := s["parkedCount"].(float64); s["queueName"] != "park" || s["hostname"] != "local" || s["workerId"] != 0.0 || p <= 0 || p > 1 {
		t.Fatalf("parked series %v", s)
	}
	if got.BucketMinutes != 15 || len(got.Replicas) != 1 || got.Replicas[0]["hostname"] != "local" || got.Replicas[0]["workerId"] != 0.0 {
		t.Fatalf("parked replicas %+v", got)
	}
	var ops queueOps
	c.get("/api/v1/analytics/queue-ops"+wide+"&queue=park", &ops)
	if len(ops.Series) == 0 || ops.Series[0].ParkedCount <= 0 {
		t.Fatalf("queue-ops parkedCount %+v", ops.Series)
	}
	c.pushOne("park", "", "", 1)
	if code := <-done; code != 200 {
		t.Fatalf("long-poll ended %d, want 200 with the message", code)
	}
}

// system-metrics: each node's process figures per bucket, with the keys
// Queen's dashboard reads; shared-state says there is no peer sync.
func TestAnalytics_SystemMetricsAndSharedState(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: t0}
	c, _ := analyticsServer(t, newEngineBroker(t, clock), clock, server.Options{})
	var got struct {
		TimeRange                               map[string]string
		ReplicaCount, BucketMinutes, PointCount int
		Replicas                                []struct {
			Hostname   string
			Port       int
			WorkerID   *int `json:"workerId"`
			TimeSeries []struct {
				Timestamp   string
				SampleCount int
				Metrics     map[string]map[string]json.RawMessage
			}
		}
	}
	waitFor(t, 20*time.Second, "a sealed minute with samples", func() bool {
		c.elapse(time.Minute)
		c.get("/api/v1/analytics/system-metrics?from=2026-03-04T09:00:00Z&to=2026-03-04T12:00:00Z", &got)
		return got.ReplicaCount > 0
	})
	if got.ReplicaCount != 1 || len(got.Replicas) != 1 || got.BucketMinutes != 5 || got.PointCount != len(got.Replicas[0].TimeSeries) {
		t.Fatalf("system-metrics %+v", got)
	}
	r := got.Replicas[0]
	if r.Hostname != "local" || r.WorkerID == nil || *r.WorkerID != 0 || r.Port != 6632 {
		t.Fatalf("replica %+v", r)
	}
	p := r.TimeSeries[0]
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:00\.000Z$`).MatchString(p.Timestamp) || p.SampleCount < 1 {
		t.Fatalf("point %s with %d samples", p.Timestamp, p.SampleCount)
	}
	for group, leaves := range map[string][]string{"cpu": {"user_us", "system_us"}, "memory": {"rss_bytes", "virtual_bytes"},
		"database": {"pool_size", "pool_idle", "pool_active"}, "threadpool": {"db", "system"}, "registries": {"response"},
		"shared_state": {"enabled", "sidecar_ops", "queue_backoff", "queue_config_cache", "consumer_presence", "server_health", "transport"}} {
		for _, leaf := range leaves {
			if _, ok := p.Metrics[group][leaf]; !ok {
				t.Errorf("metrics lack %s.%s", group, leaf)
			}
		}
	}
	var rss struct{ Avg, Min, Max, Last float64 }
	if err := json.Unmarshal(p.Metrics["memory"]["rss_bytes"], &rss); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" && (rss.Min <= 0 || rss.Max < rss.Min || rss.Avg < rss.Min || rss.Avg > rss.Max) {
		t.Fatalf("rss %+v", rss)
	}
	if string(p.Metrics["shared_state"]["enabled"]) != "false" {
		t.Fatalf("shared_state.enabled %s", p.Metrics["shared_state"]["enabled"])
	}
	var shared map[string]any
	c.get("/api/v1/system/shared-state", &shared)
	if fmt.Sprint(shared) != fmt.Sprint(map[string]any{"enabled": false, "reason": "not_initialized"}) {
		t.Fatalf("shared-state %v", shared)
	}
}

// postgres-stats keeps every key of Queen's reply, filled from Pebble's own
// figures where they have a counterpart and empty where they have none.
func TestAnalytics_PostgresStatsFromPebble(t *testing.T) {
	t.Parallel()
	keys := []string{"timestamp", "database", "databaseCache", "tableCache", "indexCache", "cacheSummary", "deadTuples", "hotUpdates",
		"activeQueries", "autovacuumStatus", "bufferConfig", "bufferUsage", "tableSizes"}
	clock := &fakeClock{t: t0}
	c, _ := analyticsServer(t, newEngineBroker(t, clock), clock, server.Options{})
	c.pushOne("pg", "", "", map[string]any{"k": strings.Repeat("v", 1000)})
	var got map[string]json.RawMessage
	c.get("/api/v1/analytics/postgres-stats", &got)
	for _, k := range keys {
		if _, ok := got[k]; !ok {
			t.Errorf("postgres-stats lacks %s", k)
		}
	}
	var st struct {
		Database      string
		DatabaseCache struct {
			Database             string
			DiskReads, CacheHits *int64
			CacheHitRatio        *float64
		}
		TableCache, IndexCache, HotUpdates, ActiveQueries, BufferUsage []any
		DeadTuples                                                     []struct{ Tombstones *int64 }
		AutovacuumStatus                                               []struct{ CompactionDebtBytes *int64 }
		BufferConfig                                                   struct{ SharedBuffers int64 }
		TableSizes                                                     []struct {
			Table          string
			TotalSizeBytes *int64
		}
		Store struct {
			DiskBytes, WalBytes int64
			Levels              []struct{ Level int }
		}
	}
	c.get("/api/v1/analytics/postgres-stats", &st)
	if st.Database != "pebble" || st.DatabaseCache.Database != "pebble" || st.DatabaseCache.CacheHits == nil || st.DatabaseCache.DiskReads == nil ||
		st.DatabaseCache.CacheHitRatio == nil {
		t.Fatalf("database and its cache: %+v", st)
	}
	if st.TableCache == nil || len(st.TableCache) != 0 || len(st.IndexCache) != 0 || len(st.HotUpdates) != 0 || len(st.ActiveQueries) != 0 ||
		len(st.BufferUsage) != 0 {
		t.Fatalf("lists without a counterpart are not empty arrays: %s", got["tableCache"])
	}
	if len(st.DeadTuples) != 1 || st.DeadTuples[0].Tombstones == nil || len(st.AutovacuumStatus) != 1 || st.AutovacuumStatus[0].CompactionDebtBytes == nil {
		t.Fatalf("tombstones and compaction debt: %+v %+v", st.DeadTuples, st.AutovacuumStatus)
	}
	if st.BufferConfig.SharedBuffers != enginetest.Options().BlockCacheBytes {
		t.Fatalf("bufferConfig %+v, want the block cache's %d bytes", st.BufferConfig, enginetest.Options().BlockCacheBytes)
	}
	var names []string
	sizes := map[string]int64{}
	for _, ts := range st.TableSizes {
		if ts.TotalSizeBytes == nil {
			t.Fatalf("table size %+v", ts)
		}
		names = append(names, ts.Table)
		sizes[ts.Table] = *ts.TotalSizeBytes
	}
	if !slices.Contains(names, "messages") || !slices.Contains(names, "dead_letters") || !slices.Contains(names, "blob_files") {
		t.Fatalf("keyspaces %v", names)
	}
	// The push is still in the memtable: the store is not empty for that.
	if sizes["unflushed"] == 0 {
		t.Fatalf("table sizes %v: the unflushed push is not counted", sizes)
	}
	if st.Store.DiskBytes <= 0 || st.Store.WalBytes <= 0 || len(st.Store.Levels) != 7 {
		t.Fatalf("store %+v: the WAL holds the push", st.Store)
	}

	// Without the store's figures every key is still there, empty.
	plain := newClient(t)
	plain.get("/api/v1/analytics/postgres-stats", &got)
	for _, k := range keys {
		if _, ok := got[k]; !ok {
			t.Errorf("postgres-stats without a store lacks %s", k)
		}
	}
	if string(got["databaseCache"]) != "{}" || string(got["tableSizes"]) != "[]" {
		t.Fatalf("postgres-stats without a store: %s %s", got["databaseCache"], got["tableSizes"])
	}
}

// The leader merges its followers' minutes with its own, and a follower
// relays analytics queries to the leader.
func TestAnalytics_LeaderMergesFollowerMinutes(t *testing.T) {
	t.Parallel()
	const secret = "analytics-test-secret-analytics!"
	clock := &fakeClock{t: t0}
	lb := memberEngine{newEngineBroker(t, clock)}
	leader, _ := analyticsServer(t, lb, clock, server.Options{ClusterSecret: secret})
	follower, _ := analyticsServer(t, followerEngine{lb, strings.TrimPrefix(leader.base, "http://")}, clock, server.Options{ClusterSecret: secret})
	leader.configure("m", nil)
	leader.push(map[string]any{"queue": "m", "payload": 1}, map[string]any{"queue": "m", "payload": 2})
	// This broker applies the follower's pushes itself: they count there.
	follower.push(map[string]any{"queue": "m", "payload": 3}, map[string]any{"queue": "m", "payload": 4}, map[string]any{"queue": "m", "payload": 5})

	const wide = "?from=2026-03-04T09:00:00Z&to=2026-03-04T12:00:00Z"
	pushes := func(c *client) (n int64) {
		var ops queueOps
		c.get("/api/v1/analytics/queue-ops"+wide, &ops)
		for _, s := range ops.Series {
			n += s.PushMessages
		}
		return n
	}
	var sys struct{ Replicas []struct{ Hostname string } }
	waitFor(t, 20*time.Second, "the follower's minutes on the leader", func() bool {
		clock.advance(time.Minute)
		leader.get("/api/v1/analytics/system-metrics"+wide, &sys)
		return pushes(leader) == 5 && len(sys.Replicas) == 2
	})
	if sys.Replicas[0].Hostname != "local" || sys.Replicas[1].Hostname != "n2" {
		t.Fatalf("replicas %+v, want the leader then n2", sys.Replicas)
	}
	if n := pushes(follower); n != 5 {
		t.Fatalf("the follower answers %d pushes, want the leader's merged 5 (relayed)", n)
	}
	var wm struct{ Summary map[string]float64 }
	follower.get("/api/v1/analytics/worker-metrics"+wide, &wm)
	if wm.Summary["totalPushMessages"] != 5 || wm.Summary["totalPushRequests"] != 2 {
		t.Fatalf("merged summary %v", wm.Summary)
	}
	// The leader's replies carry its minutes back: the follower holds the
	// cluster's history itself (a request already relayed is answered
	// where it lands), and would lead with it.
	local := *follower
	local.header = follower.header.Clone()
	local.header.Set("X-Queen-Forwarded-By", "test")
	waitFor(t, 20*time.Second, "the leader's minutes on the follower", func() bool {
		clock.advance(time.Minute)
		return pushes(&local) == 5
	})
	// The shipment route is the cluster's only.
	resp := leader.do("POST", "/internal/v1/cluster/analytics", map[string]any{"id": "n9", "minutes": []any{}})
	resp.expectError(t, 403, "cluster_secret_invalid")
}

// TestAnalytics_CountsAutoAckAndMaintenancePops: the messages an autoAck
// pop delivers were acked by it, so they are what status shows as
// processed (and worker-metrics as acked), as messages.completed counts
// them; a pop answered 204 during pop maintenance is a pop request,
// counted as an empty one. Before, both were counted nowhere.
func TestAnalytics_CountsAutoAckAndMaintenancePops(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: t0}
	c, _ := analyticsServer(t, newEngineBroker(t, clock), clock, server.Options{})
	c.configure("ops", nil)
	c.push(map[string]any{"queue": "ops", "payload": 1}, map[string]any{"queue": "ops", "payload": 2}, map[string]any{"queue": "ops", "payload": 3})
	if got := c.mustPop(popPath("ops", "batch=3&autoAck=true")); len(got.Messages) != 3 {
		t.Fatalf("autoAck pop delivered %d, want 3", len(got.Messages))
	}
	c.do("POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": true}).expect(t, 200)
	c.mustBeEmpty(popPath("ops", "batch=1"))
	c.do("POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": false}).expect(t, 200)
	c.elapse(time.Minute)

	var wm struct{ TimeSeries []map[string]any }
	c.get("/api/v1/analytics/worker-metrics"+rangeQuery, &wm)
	if len(wm.TimeSeries) == 0 {
		t.Fatal("worker-metrics: no series")
	}
	ts := wm.TimeSeries[len(wm.TimeSeries)-1]
	for k, v := range map[string]any{"popRequests": 2.0, "popMessages": 3.0, "ackMessages": 3.0, "ackSuccess": 3.0, "ackRequests": 0.0} {
		if ts[k] != v {
			t.Errorf("worker-metrics timeSeries %s = %v, want %v", k, ts[k], v)
		}
	}
	var ops queueOps
	c.get("/api/v1/analytics/queue-ops"+rangeQuery, &ops)
	if len(ops.Series) != 1 || ops.Series[0].PopEmpty != 1 || ops.Series[0].AckSuccess != 3 || ops.Series[0].PopMessages != 3 {
		t.Fatalf("queue-ops %+v, want one empty pop, 3 popped and acked", ops.Series)
	}
	var st struct {
		Throughput []struct {
			Processed, Ingested int
		} `json:"throughput"`
	}
	c.get("/api/v1/status"+rangeQuery, &st)
	processed := 0
	for _, row := range st.Throughput {
		processed += row.Processed
	}
	if processed != 3 {
		t.Fatalf("status throughput %+v: processed %d, want 3 (the autoAck pop's)", st.Throughput, processed)
	}
}
