package server

import (
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/server/auth"
	"github.com/queenmq/queen/server/wire"
)

// routeTable is the one route table. Patterns are matched segment by
// segment on the raw path; {name} captures one percent-decoded segment
// (docs/decisions.md C9: "q%2Fx" is the queue "q/x", "ord:42" stays "ord:42"). A literal
// segment wins over a parameter ("/consumer-groups/lagging" over
// "/consumer-groups/{group}"), with backtracking when the literal branch
// leads nowhere. name labels the route's metrics. level is the access a
// caller needs (docs/api.md §2, each route's **Auth:**; cluster routes take the
// cluster secret or an admin token). disk says whether the route adds data
// (addsData: 507 while free space is below the reserve, see storage.go) or
// only writes what lets consumers go on and space come back (writesLittle),
// or nothing (reads), or, on the cluster path, as the command it carries
// (perCommand). read says how fresh the state it answers from is
// (readConsistency). Every route declares all three, and New refuses a
// table with a route that does not.
func (s *Server) routeTable() []route {
	return []route{
		{"GET", "/health", "health", auth.Public, reads, local, (*Server).health},
		{"GET", "/dlq", "dlq_page", auth.Public, reads, local, (*Server).dlqUI},
		{"GET", "/metrics", "metrics", auth.Public, reads, local, (*Server).metricsJSON},
		{"GET", "/metrics/prometheus", "metrics_prometheus", auth.Public, reads, local, (*Server).metricsPrometheus},

		{"POST", "/api/v1/configure", "configure", auth.ReadWrite, addsData, proposes, (*Server).configure},
		{"POST", "/api/v1/push", "push", auth.ReadWrite, addsData, proposes, (*Server).push},
		{"GET", "/api/v1/pop", "pop_discovery", auth.ReadWrite, writesLittle, proposes, (*Server).popDiscovery},
		{"GET", "/api/v1/pop/queue/{queue}", "pop", auth.ReadWrite, writesLittle, proposes, (*Server).popQueue},
		{"GET", "/api/v1/pop/queue/{queue}/partition/{partition}", "pop_partition", auth.ReadWrite, writesLittle, proposes, (*Server).popPartition},
		{"POST", "/api/v1/ack", "ack", auth.ReadWrite, writesLittle, proposes, (*Server).ack},
		{"POST", "/api/v1/ack/batch", "ack_batch", auth.ReadWrite, writesLittle, proposes, (*Server).ackBatch},
		{"POST", "/api/v1/transaction", "transaction", auth.ReadWrite, addsData, proposes, (*Server).transaction},
		{"POST", "/api/v1/lease/{leaseId}/extend", "lease_extend", auth.ReadWrite, writesLittle, proposes, (*Server).extendLease},

		{"GET", "/api/v1/dlq", "dlq", auth.ReadOnly, reads, linearizable, (*Server).listDLQ},
		{"POST", "/api/v1/dlq/replay", "dlq_replay", auth.Admin, addsData, proposes, (*Server).replayDLQ},
		{"GET", "/api/v1/messages", "messages", auth.ReadOnly, reads, linearizable, (*Server).listMessages},
		{"GET", "/api/v1/messages/{partitionId}/{transactionId}", "message", auth.ReadOnly, reads, linearizable, (*Server).getMessage},
		{"DELETE", "/api/v1/messages/{partitionId}/{transactionId}", "message_delete", auth.ReadWrite, writesLittle, proposes, (*Server).deleteMessage},
		{"POST", "/api/v1/messages/{partitionId}/{transactionId}/retry", "message_replay", auth.ReadWrite, addsData, proposes, (*Server).replayMessage},
		{"POST", "/api/v1/messages/{partitionId}/{transactionId}/dlq", "message_dlq", auth.ReadWrite, writesLittle, proposes, (*Server).moveToDLQ},

		{"GET", "/api/v1/resources/overview", "resources_overview", auth.ReadOnly, reads, linearizable, (*Server).overview},
		{"GET", "/api/v1/resources/queues", "resources_queues", auth.ReadOnly, reads, linearizable, (*Server).listQueues},
		{"GET", "/api/v1/resources/queues/{queue}", "resources_queue", auth.ReadOnly, reads, linearizable, (*Server).getQueue},
		{"DELETE", "/api/v1/resources/queues/{queue}", "resources_queue_delete", auth.Admin, writesLittle, proposes, (*Server).deleteQueue},
		{"GET", "/api/v1/resources/namespaces", "resources_namespaces", auth.ReadOnly, reads, linearizable, (*Server).listNamespaces},
		{"GET", "/api/v1/resources/tasks", "resources_tasks", auth.ReadOnly, reads, linearizable, (*Server).listTasks},

		{"GET", "/api/v1/consumer-groups", "groups", auth.ReadOnly, reads, linearizable, (*Server).listGroups},
		{"GET", "/api/v1/consumer-groups/lagging", "groups_lagging", auth.ReadOnly, reads, linearizable, (*Server).laggingGroups},
		{"GET", "/api/v1/consumer-groups/{group}", "group", auth.ReadOnly, reads, linearizable, (*Server).getGroup},
		{"DELETE", "/api/v1/consumer-groups/{group}", "group_delete", auth.Admin, writesLittle, proposes, (*Server).deleteGroup},
		{"DELETE", "/api/v1/consumer-groups/{group}/queues/{queue}", "group_queue_delete", auth.Admin, writesLittle, proposes, (*Server).deleteGroup},
		{"POST", "/api/v1/consumer-groups/{group}/queues/{queue}/seek", "seek", auth.ReadWrite, writesLittle, proposes, (*Server).seek},
		{"POST", "/api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek", "seek_partition", auth.ReadWrite, writesLittle, proposes, (*Server).seek},
		{"POST", "/api/v1/consumer-groups/{group}/subscription", "subscription", auth.ReadWrite, writesLittle, proposes, (*Server).updateSubscription},
		{"POST", "/api/v1/stats/refresh", "stats_refresh", auth.Admin, reads, local, (*Server).refreshStats},

		{"GET", "/api/v1/status", "status", auth.ReadOnly, reads, linearizable, (*Server).status},
		{"GET", "/api/v1/status/queues", "status_queues", auth.ReadOnly, reads, linearizable, (*Server).statusQueues},
		{"GET", "/api/v1/status/queues/{queue}", "status_queue", auth.ReadOnly, reads, linearizable, (*Server).statusQueue},
		{"GET", "/api/v1/status/analytics", "status_analytics", auth.ReadOnly, reads, local, (*Server).analytics},
		{"GET", "/api/v1/status/buffers", "status_buffers", auth.ReadOnly, reads, local, (*Server).buffers},

		{"GET", "/api/v1/system/maintenance", "maintenance", auth.Admin, reads, linearizable, (*Server).getMaintenance},
		{"POST", "/api/v1/system/maintenance", "maintenance_set", auth.Admin, writesLittle, proposes, (*Server).setMaintenance},
		{"GET", "/api/v1/system/maintenance/pop", "maintenance_pop", auth.Admin, reads, linearizable, (*Server).getMaintenance},
		{"POST", "/api/v1/system/maintenance/pop", "maintenance_pop_set", auth.Admin, writesLittle, proposes, (*Server).setMaintenance},

		{"POST", "/api/v1/traces", "trace_add", auth.ReadWrite, addsData, proposes, (*Server).addTrace},
		{"GET", "/api/v1/traces/names", "trace_names", auth.ReadOnly, reads, linearizable, (*Server).traceNamesList},
		{"GET", "/api/v1/traces/by-name/{traceName}", "traces_by_name", auth.ReadOnly, reads, linearizable, (*Server).tracesByName},
		{"GET", "/api/v1/traces/{partitionId}/{transactionId}", "traces", auth.ReadOnly, reads, linearizable, (*Server).messageTraces},

		{"POST", "/streams/v1/queries", "stream_register", auth.ReadWrite, addsData, proposes, (*Server).registerQuery},
		{"DELETE", "/streams/v1/queries/{name}", "stream_delete", auth.Admin, writesLittle, proposes, (*Server).deleteQuery},
		{"POST", "/streams/v1/cycle", "stream_cycle", auth.ReadWrite, addsData, proposes, (*Server).cycle},
		{"POST", "/streams/v1/state/get", "stream_state", auth.ReadOnly, reads, leaderServes, (*Server).stateGet},

		{"GET", "/api/v1/status/queues/{queue}/messages", "status_queue_messages", auth.ReadOnly, reads, linearizable, (*Server).statusQueueMessages},
		{"GET", "/api/v1/analytics/queue-lag", "analytics_queue_lag", auth.ReadOnly, reads, leaderServes, (*Server).queueLag},
		{"GET", "/api/v1/analytics/queue-ops", "analytics_queue_ops", auth.ReadOnly, reads, leaderServes, (*Server).queueOps},
		{"GET", "/api/v1/analytics/queue-parked-replicas", "analytics_queue_parked", auth.ReadOnly, reads, leaderServes, (*Server).queueParkedReplicas},
		{"GET", "/api/v1/analytics/retention", "analytics_retention", auth.ReadOnly, reads, leaderServes, (*Server).retentionAnalytics},
		{"GET", "/api/v1/analytics/worker-metrics", "analytics_worker", auth.ReadOnly, reads, leaderServes, (*Server).workerMetrics},
		{"GET", "/api/v1/analytics/system-metrics", "analytics_system", auth.ReadOnly, reads, leaderServes, (*Server).systemMetrics},
		{"GET", "/api/v1/analytics/postgres-stats", "analytics_postgres", auth.ReadOnly, reads, local, (*Server).postgresStats},
		// Placement is read-only, as the status routes queen status reads
		// are, and linearizable so that a queue configured through any
		// node is listed, in its group, whichever node is asked: the queues
		// and their groups are replicated state (the groups' engines, the
		// directory). Members, leaders and liveness are this node's own view
		// (raft.Layout), which no read index makes fresher.
		{"GET", "/api/v1/system/placement", "placement", auth.ReadOnly, reads, linearizable, (*Server).placement},
		// A move proposes its own commands on every group it touches,
		// relayed where another node leads: it runs where it is asked.
		{"POST", "/api/v1/system/queues/{queue}/move", "queue_move", auth.Admin, writesLittle, local, (*Server).moveQueue},
		{"GET", "/api/v1/system/backup", "backup", auth.Admin, reads, leaderServes, (*Server).backup},
		{"GET", "/api/v1/system/shared-state", "shared_state", auth.Admin, reads, local, (*Server).sharedState},
		{"GET", "/api/v1/migration/status", "migration_status", auth.Admin, reads, local, (*Server).migrationStatus},
		{"POST", "/api/v1/migration/test-connection", "migration_test_connection", auth.Admin, reads, local, (*Server).migrationAction},
		{"POST", "/api/v1/migration/start", "migration_start", auth.Admin, reads, local, (*Server).migrationAction},
		{"POST", "/api/v1/migration/validate", "migration_validate", auth.Admin, reads, local, (*Server).migrationAction},
		{"POST", "/api/v1/migration/reset", "migration_reset", auth.Admin, reads, local, (*Server).migrationAction},
		{"POST", "/api/v1/system/leadership/transfer", "leadership_transfer", auth.Admin, writesLittle, local, (*Server).transferLeadership},
		{"POST", cluster.AnalyticsPath, "cluster_analytics", auth.Cluster, reads, local, (*Server).analyticsReport},

		{"POST", cluster.JoinPath, "cluster_join", auth.Cluster, writesLittle, proposes, (*Server).join},
		{"POST", cluster.LeavePath, "cluster_leave", auth.Cluster, writesLittle, proposes, (*Server).leave},
		{"POST", cluster.ProposePath, "propose_relayed", auth.Cluster, perCommand, proposes, (*Server).proposeRelayed},
		{"POST", cluster.StoragePath, "cluster_storage", auth.Cluster, reads, local, (*Server).storageReport},
		{"POST", cluster.ReadIndexPath, "read_index", auth.Cluster, reads, local, (*Server).readIndex},
		{"POST", cluster.ReadPath, "read_relayed", auth.Cluster, reads, local, (*Server).answerRead},
		{"POST", cluster.BackupPath, "backup_relayed", auth.Cluster, reads, local, (*Server).backupGroup},
		{"POST", cluster.MovePath, "move_relayed", auth.Cluster, writesLittle, local, (*Server).startMove},
	}
}

// Route describes one row of the route table.
type Route struct {
	Method  string
	Pattern string // {name} marks a path parameter
	Name    string // the route's metrics label
	Level   auth.Level
	// AddsData is true for the routes refused with 507
	// insufficient_storage while free space is below the reserve.
	AddsData bool
	// Read is how fresh the state the route answers from is:
	// "linearizable", "local", "leader" or "command" (readConsistency).
	Read string
}

// Routes lists the route table, in its order: what an operator (or a test)
// reads to know which level each route needs and which routes add data.
func (s *Server) Routes() []Route {
	table := s.routeTable()
	out := make([]Route, len(table))
	for i, r := range table {
		out[i] = Route{Method: r.method, Pattern: r.pattern, Name: r.name, Level: r.level, AddsData: r.disk == addsData,
			Read: r.read.String()}
	}
	return out
}

// diskUse is what a route does to the disk.
type diskUse uint8

const (
	diskUnset diskUse = iota // refused by New: every route must say
	// reads writes nothing.
	reads
	// writesLittle writes small records that keep consumers going or give
	// space back: pops and lease extensions, acks, seeks, deletes,
	// maintenance and membership. Served inside the reserve.
	writesLittle
	// addsData writes data that grows with what clients send: pushes,
	// transactions, replays, queue configuration. Refused with 507 while
	// a filesystem of this node, or of a node that reports to it as
	// leader, is below the reserve.
	addsData
	// perCommand is the cluster path's: it proposes the command another
	// node sent, which writes little or adds data as the client's own
	// route of that command does (commandAddsData), checked once the body
	// says which command it is.
	perCommand
)

// readConsistency is how fresh the state a route answers from is
// (docs/api.md §1, "Read consistency").
type readConsistency uint8

const (
	readUnset readConsistency = iota // refused by New: every route must say
	// linearizable: before the handler runs, this node catches up with
	// what the leader had applied when the request arrived (readindex.go),
	// so the answer reflects every command answered before it, whichever
	// node answered that: the leader of every group it holds a replica of,
	// or, for a read of one queue (readsOneQueue), of the directory and the
	// queue's group. ?consistency=stale skips the wait.
	linearizable
	// local: this node's own state or figures, at once (health, metrics,
	// a node's reports, static pages), or an action on this node alone
	// (a leadership transfer).
	local
	// leaderServes: the handler has the leader answer (it relays the
	// request there): analytics the leader gathers, stream state.
	leaderServes
	// proposes: a command; its answer comes from applying it through the
	// log, on the leader.
	proposes
)

func (c readConsistency) String() string {
	switch c {
	case linearizable:
		return "linearizable"
	case local:
		return "local"
	case leaderServes:
		return "leader"
	case proposes:
		return "command"
	}
	return "unset"
}

// maxParams and maxSegments bound a path; longer ones match no route.
const (
	maxParams   = 4
	maxSegments = 12
)

// route is one row of the table.
type route struct {
	method  string
	pattern string
	name    string
	level   auth.Level
	disk    diskUse
	read    readConsistency
	handle  func(s *Server, ctx *fasthttp.RequestCtx, p *params)
}

// params are a matched route's decoded path parameters.
type params struct {
	names []string
	vals  [maxParams]string
	// subject is the verified token's sub ("" with auth off or on a
	// public route): the producerSub of what this request pushes.
	subject string
	// node is set when the request carries the cluster secret: another
	// node of the cluster sent it (a spool replay), not a client.
	node bool
}

// get returns the parameter called name ("" if the route has none).
func (p *params) get(name string) string {
	for i, n := range p.names {
		if n == name {
			return p.vals[i]
		}
	}
	return ""
}

// endpoint is a route compiled into the tree, with its metrics.
type endpoint struct {
	route
	names   []string // parameter names, in order
	paramAt []int    // segment index of each parameter, in order
	stats   *routeStats
	// queueOf is the queue a read of one queue names (readsOneQueue), nil
	// for any other route.
	queueOf func(*fasthttp.RequestCtx, *params) string
}

// node is one segment of the route tree.
type node struct {
	literal   map[string]*node
	param     *node
	endpoints []*endpoint // routes ending here, one per method
}

// router matches raw paths against the route tree.
type router struct {
	root node
}

func (rt *router) add(e *endpoint) {
	n := &rt.root
	for i, seg := range splitPattern(e.pattern) {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			e.names = append(e.names, seg[1:len(seg)-1])
			e.paramAt = append(e.paramAt, i)
			if n.param == nil {
				n.param = &node{}
			}
			n = n.param
			continue
		}
		if n.literal == nil {
			n.literal = map[string]*node{}
		}
		c := n.literal[seg]
		if c == nil {
			c = &node{}
			n.literal[seg] = c
		}
		n = c
	}
	if len(e.names) > maxParams {
		panic("server: too many parameters in " + e.pattern)
	}
	n.endpoints = append(n.endpoints, e)
}

func splitPattern(p string) []string {
	if p == "/" {
		return nil
	}
	return strings.Split(strings.TrimPrefix(p, "/"), "/")
}

// lookup finds the endpoint for method and a raw (not yet decoded) path and
// fills p. The error is errNoSuchRoute, errMethodNotAllowed (allow lists
// the path's methods) or a 400 for a bad percent escape.
func (rt *router) lookup(method, rawPath []byte, p *params) (e *endpoint, allow string, err error) {
	var buf [maxSegments][]byte
	segs := buf[:0]
	path := rawPath
	if len(path) == 0 || path[0] != '/' {
		return nil, "", errNoSuchRoute
	}
	path = path[1:]
	if n := len(path); n > 0 && path[n-1] == '/' {
		path = path[:n-1] // a trailing slash is ignored
	}
	for len(path) > 0 {
		if len(segs) == maxSegments {
			return nil, "", errNoSuchRoute
		}
		i := indexByte(path, '/')
		seg := path
		if i >= 0 {
			seg, path = path[:i], path[i+1:]
		} else {
			path = nil
		}
		if indexByte(seg, '%') >= 0 {
			dec, ok := percentDecode(seg)
			if !ok {
				return nil, "", badRequest("invalid percent escape in path")
			}
			seg = dec
		}
		segs = append(segs, seg)
	}
	n := rt.root.match(segs)
	if n == nil {
		return nil, "", errNoSuchRoute
	}
	for _, ep := range n.endpoints {
		if ep.method == string(method) || (ep.method == "GET" && string(method) == "HEAD") {
			p.names = ep.names
			for i, at := range ep.paramAt {
				p.vals[i] = string(segs[at])
			}
			return ep, "", nil
		}
	}
	methods := make([]string, 0, len(n.endpoints)+1)
	for _, ep := range n.endpoints {
		methods = append(methods, ep.method)
	}
	return nil, strings.Join(append(methods, "OPTIONS"), ", "), errMethodNotAllowed
}

// match walks the tree, preferring literal segments and backtracking to a
// parameter when the literal branch has no route for the rest of the path.
func (n *node) match(segs [][]byte) *node {
	if len(segs) == 0 {
		if len(n.endpoints) > 0 {
			return n
		}
		return nil
	}
	if c := n.literal[string(segs[0])]; c != nil {
		if m := c.match(segs[1:]); m != nil {
			return m
		}
	}
	if n.param != nil && len(segs[0]) > 0 {
		return n.param.match(segs[1:])
	}
	return nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// percentDecode decodes %XX escapes ('+' stays '+': this is a path).
func percentDecode(seg []byte) ([]byte, bool) {
	out := make([]byte, 0, len(seg))
	for i := 0; i < len(seg); i++ {
		if seg[i] != '%' {
			out = append(out, seg[i])
			continue
		}
		if i+2 >= len(seg) {
			return nil, false
		}
		hi, ok1 := wire.Unhex(seg[i+1])
		lo, ok2 := wire.Unhex(seg[i+2])
		if !ok1 || !ok2 {
			return nil, false
		}
		out = append(out, hi<<4|lo)
		i += 2
	}
	return out, true
}
