// Package analytics records the per-minute series the /api/v1/analytics
// routes and the dashboard's GET /api/v1/status serve (docs/api.md §11),
// and writes those routes' answers. It is apart from package server
// because it is a measurement of the broker, not a part of it, with
// invariants of its own (a bounded ring, minutes sealed once, shipments
// that replace rather than add, the leader's merge): it keeps its minutes
// in memory, never in the replicated store, and reads only the broker
// (Broker: the queues and the node's status, bound with Bind). It knows
// nothing of the server: package server counts requests into it (Pushed,
// Popped, Acked, Transacted), runs its loops, relays a follower's query to
// the leader before calling a route, and answers a route's error through
// its error table.
//
// # What is counted
//
// Each node measures itself, as Queen's workers measure themselves:
//
//   - per queue and minute: push, pop and ack requests and messages, empty
//     pops, transactions, the lag of every delivered message (now −
//     createdAt), the parked long-poll gauge (sampled every second,
//     averaged over the minute) and the queue's partition count at the end
//     of the minute;
//   - per node and minute (Queen's worker row): the same totals, requests
//     handled and in flight, how late the sampler's ticks fire (the Go
//     scheduler's "event loop lag"), storage errors and dead letters;
//   - per node and minute (Queen's system row): process CPU and memory and
//     the requests in flight, sampled every second as {avg, min, max,
//     last};
//   - per minute, on the leader: what its retention sweeps deleted.
//
// A request is counted once in the cluster, by the node whose handler
// turns its results into the reply (ARCHITECTURE.md "Counting once"):
// package server decides which, and calls Pushed, Popped, Acked and
// Transacted there.
//
// Counting costs a request one mutex acquisition and no allocation but the
// first entry of a queue in a minute. The minute being counted is sealed
// into the node's ring by the sampler when the clock passes it (or by a
// query), so a minute appears once it is over, as Queen's rows appear at
// each worker's flush.
//
// # Bounds
//
// The ring is bounded: analyticsMinutes minutes (24 h), at most
// analyticsQueuesPerMinute queues in a minute (the rest are counted under
// analyticsOtherQueue, "__other__") and analyticsQueueEntries queue entries
// across all its minutes (the oldest minutes go first). An entry is ~130
// bytes plus the queue name and a minute's node record ~350 bytes, so a
// ring holds at most ~9 MB with names of 10 bytes, whatever the traffic; a
// node holds at most analyticsNodes rings.
//
// # Between nodes
//
// A cluster's series are merged by the leader, as Queen's replicas write
// rows keyed by hostname into one database: every follower sends its
// sealed minutes to the leader (Ship, through POST
// /internal/v1/cluster/analytics, answered by Receive), which keeps one
// ring per node (at most analyticsNodes) and answers every analytics query
// over all of them; a follower relays the queries to the leader like any
// request (package server does it), and answers from what it holds itself
// only when it cannot (no leader known). The leader's reply to a shipment carries back
// the other nodes' minutes the follower lacks (the leader's own included),
// so every node holds the cluster's window and a new leader starts with
// it, even when the old one crashed. Minutes are replaced, never added, so
// a shipment sent twice changes nothing; a follower sends its whole ring
// again to a new leader, or to a leader that restarted (its reply names its
// process instance).
//
// A shipment is JSON (ship.go: shipment, shipReply):
//
//	POST /internal/v1/cluster/analytics
//	{"id", "port", "minutes": [minuteRecord...], "totals": nodeMinute, "have": {node: unix minute}}
//	→ 200 {"instance", "nodes": [shipment...], "more"}
//
// minuteRecord and its parts carry their JSON keys in their struct tags;
// a minute is keyed by "at", its unix minute. Nothing of it is ever
// written to disk: the format only has to match between the nodes of one
// cluster, and a field added later is read as zero by an older node.
package analytics
