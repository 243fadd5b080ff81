// Package server is Queen's v1 HTTP API over fasthttp: the edge of the
// broker. It decodes requests, makes one call on a Broker (the replicated
// node; broker.go declares the interface), and encodes the answer. It holds
// no broker state of its own.
//
// # Routes
//
// The one table is routeTable in routes.go. Path parameters are matched on
// the raw path and percent-decoded per segment (docs/decisions.md C9), so "q%2Fx" names the
// queue "q/x" and "ord:42" works raw or escaped; literal segments win over
// parameters ("/consumer-groups/lagging" over "/consumer-groups/{group}").
// OPTIONS on any path is the CORS preflight (204), outside the table.
//
// The list below is generated from the table by go generate (method,
// pattern, access level, read consistency); the note after each row is
// written by hand and kept. routes_doc_internal_test.go fails while the
// list is stale, and while docs/api.md §15 differs from the table.
//
//	GET     /health                                                                    public     local        200 healthy | 503 unhealthy (no leader, or a storage fault: "fault")
//	GET     /dlq                                                                       public     local        the DLQ page (docs/decisions.md B9)
//	GET     /metrics                                                                   public     local        JSON snapshot
//	GET     /metrics/prometheus                                                        public     local        Prometheus text (VictoriaMetrics set + DLQ depth)
//	POST    /api/v1/configure                                                          read-write command      docs/decisions.md C5 merge; null resets; replace
//	POST    /api/v1/push                                                               read-write command      201 [result per item]
//	GET     /api/v1/pop                                                                read-write command      ?namespace=&task= discovery; neither → 400
//	GET     /api/v1/pop/queue/{queue}                                                  read-write command      200 envelope | 204
//	GET     /api/v1/pop/queue/{queue}/partition/{partition}                            read-write command
//	POST    /api/v1/ack                                                                read-write command      [one result]
//	POST    /api/v1/ack/batch                                                          read-write command      [result per item]
//	POST    /api/v1/transaction                                                        read-write command      200 {success, results} | 400 malformed
//	POST    /api/v1/lease/{leaseId}/extend                                             read-write command      200 always; body optional
//	GET     /api/v1/dlq                                                                read-only  linearizable docs/decisions.md B1 filters, true total, hasMore
//	POST    /api/v1/dlq/replay                                                         admin      command      docs/decisions.md B4 bulk redrive: B1 filters, limit, oldest first
//	GET     /api/v1/messages                                                           read-only  linearizable retained messages, newest first, with status
//	GET     /api/v1/messages/{partitionId}/{transactionId}                             read-only  linearizable
//	DELETE  /api/v1/messages/{partitionId}/{transactionId}                             read-write command      DLQ rows only; else 404
//	POST    /api/v1/messages/{partitionId}/{transactionId}/retry                       read-write command      docs/decisions.md C4 replay (B4 "data")
//	POST    /api/v1/messages/{partitionId}/{transactionId}/dlq                         read-write command      docs/decisions.md B3 move; 404 | 409
//	GET     /api/v1/resources/overview                                                 read-only  linearizable
//	GET     /api/v1/resources/queues                                                   read-only  linearizable
//	GET     /api/v1/resources/queues/{queue}                                           read-only  linearizable
//	DELETE  /api/v1/resources/queues/{queue}                                           admin      command      dead letters survive
//	GET     /api/v1/resources/namespaces                                               read-only  linearizable
//	GET     /api/v1/resources/tasks                                                    read-only  linearizable
//	GET     /api/v1/consumer-groups                                                    read-only  linearizable
//	GET     /api/v1/consumer-groups/lagging                                            read-only  linearizable
//	GET     /api/v1/consumer-groups/{group}                                            read-only  linearizable
//	DELETE  /api/v1/consumer-groups/{group}                                            admin      command
//	DELETE  /api/v1/consumer-groups/{group}/queues/{queue}                             admin      command
//	POST    /api/v1/consumer-groups/{group}/queues/{queue}/seek                        read-write command
//	POST    /api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek read-write command
//	POST    /api/v1/consumer-groups/{group}/subscription                               read-write command
//	POST    /api/v1/stats/refresh                                                      admin      local        no-op (stats are computed on read)
//	GET     /api/v1/status                                                             read-only  linearizable
//	GET     /api/v1/status/queues                                                      read-only  linearizable
//	GET     /api/v1/status/queues/{queue}                                              read-only  linearizable
//	GET     /api/v1/status/analytics                                                   read-only  local
//	GET     /api/v1/status/buffers                                                     read-only  local
//	GET     /api/v1/system/maintenance                                                 admin      linearizable the push switch and the spool
//	POST    /api/v1/system/maintenance                                                 admin      command      {"enabled"}: cluster-wide switch (push → spool)
//	GET     /api/v1/system/maintenance/pop                                             admin      linearizable
//	POST    /api/v1/system/maintenance/pop                                             admin      command      {"enabled"}: cluster-wide switch (pop → 204)
//	POST    /api/v1/traces                                                             read-write command      201 {traceId} | 404 message | 409 trace_limit
//	GET     /api/v1/traces/names                                                       read-only  linearizable
//	GET     /api/v1/traces/by-name/{traceName}                                         read-only  linearizable
//	GET     /api/v1/traces/{partitionId}/{transactionId}                               read-only  linearizable
//	POST    /streams/v1/queries                                                        read-write command      register: 200 | 409 config_hash_mismatch
//	DELETE  /streams/v1/queries/{name}                                                 admin      command      the query and its state (beyond Queen)
//	POST    /streams/v1/cycle                                                          read-write command      one command: 200 {success} | 404 query_not_found
//	POST    /streams/v1/state/get                                                      read-only  leader       read on a leader that confirmed itself
//	GET     /api/v1/status/queues/{queue}/messages                                     read-only  linearizable
//	GET     /api/v1/analytics/queue-lag                                                read-only  leader       per-minute series (package analytics), merged on the leader
//	GET     /api/v1/analytics/queue-ops                                                read-only  leader
//	GET     /api/v1/analytics/queue-parked-replicas                                    read-only  leader
//	GET     /api/v1/analytics/retention                                                read-only  leader
//	GET     /api/v1/analytics/worker-metrics                                           read-only  leader
//	GET     /api/v1/analytics/system-metrics                                           read-only  leader
//	GET     /api/v1/analytics/postgres-stats                                           read-only  local
//	GET     /api/v1/system/placement                                                   read-only  linearizable nodes, groups (members, leader), each queue's group
//	POST    /api/v1/system/queues/{queue}/move                                         admin      local
//	GET     /api/v1/system/backup                                                      admin      leader
//	GET     /api/v1/system/shared-state                                                admin      local
//	GET     /api/v1/migration/status                                                   admin      local
//	POST    /api/v1/migration/test-connection                                          admin      local
//	POST    /api/v1/migration/start                                                    admin      local
//	POST    /api/v1/migration/validate                                                 admin      local
//	POST    /api/v1/migration/reset                                                    admin      local
//	POST    /api/v1/system/leadership/transfer                                         admin      local
//	POST    /internal/v1/cluster/analytics                                             cluster    local        a follower's sealed minutes (cluster secret, like every /internal route)
//	POST    /internal/v1/cluster/join                                                  cluster    command      node to node: membership
//	POST    /internal/v1/cluster/leave                                                 cluster    command
//	POST    /internal/v1/propose                                                       cluster    command      a command a follower or a Host sends to its group's leader (clusterpath.go)
//	POST    /internal/v1/cluster/storage                                               cluster    local        a follower's disk state (storage.go)
//	POST    /internal/v1/read-index                                                    cluster    local        the leader's read index, for a follower's linearizable read
//	POST    /internal/v1/read                                                          cluster    local        a read of a group the asking node does not host (groups on R of N; remoteread.go)
//	POST    /internal/v1/backup                                                        cluster    local        one group's backup, for a node that does not host it (groups on R of N; backup.go)
//	POST    /internal/v1/move                                                          cluster    local        a balancer's move, run by a voter of the queue's group (groups on R of N; placement.go)
//
// # Edge contract
//
// Status codes are the intended ones (docs/decisions.md C1): 201 push, 204 nothing to pop,
// 400, 404, 405, 409, 413, 501, 503, and 507 when a disk is below its
// reserve. Every error body is
// {"error": "<message>", "code": "<stable_snake_case>"} (docs/decisions.md C2), produced by
// writeError from the one table in errors.go; an error the table does not
// know is a 500 "internal" whose details are logged, never returned. Raft
// errors (no leader, not leader, timeout, shutdown, forward), like a body
// refused for want of memory (overloaded), are 503 with a Retry-After
// header: the SDKs retry 5xx, and a retried push is made safe by
// transaction-id dedup. An unknown path is 404 no_such_route; a known path
// with another method is 405 method_not_allowed with an Allow header. Every
// reply carries the CORS headers of docs/api.md §1.3 (Options.CORSOrigins
// narrows them; an unlisted Origin is 403 origin_not_allowed).
//
// # Disk space
//
// Each route of the table also says whether it adds data; such routes are
// refused with 507 while a disk of this node, or of a node reporting to it,
// is below its reserve (storage.go; server/diskspace/doc.go).
//
// # Access
//
// Each route of the table declares its level (package auth: public,
// read-only, read-write, admin, cluster; Routes lists them). admit
// (access.go) checks it after routing and before the handler: with JWT on,
// a missing or bad token is 401 unauthorized / invalid_token with Queen's
// text and a WWW-Authenticate header, a token below the level is 403
// forbidden, a JWKS outage 500 jwks_unavailable. Cluster routes need the
// X-Queen-Cluster-Secret header (or an admin token); without a secret
// configured they are 403 cluster_closed. A request carrying the right
// secret is another node: admitted everywhere, and only its spool replays
// keep their producerSub. Everyone else's producerSub is their token's sub.
//
// Input is lenient where the SDKs need it (docs/decisions.md C9): an empty body on a route
// whose body is optional is {}; query booleans are true for "true" or "1";
// query integers that do not parse take their default. subscriptionFrom is
// "now" or ISO-8601, else 400 (docs/decisions.md C6). Bodies are parsed by a small validating
// scanner (package wire) that never re-encodes payloads: a pushed payload is
// validated (its numbers within a double's range, which every consumer's
// decoder needs) and stored as the exact bytes sent, and popped data is
// written back as those bytes. Hot-path replies are appended byte by byte
// (package wire), without reflection. The body is read by the server itself
// into a buffer of its request's own (see Memory), so handlers decode it in
// place and what they hand to the broker aliases none of fasthttp's
// recycled buffers, without a copy.
//
// # Memory
//
// What requests cost in memory at once is bounded by a budget
// (Options.MaxInflightBodyBytes) that package memory keeps
// (server/memory/doc.go); package intake (server/intake) is its
// HTTP side.
//
// # Spool
//
// Pushes received during push maintenance wait in package spool
// (server/spool/doc.go); the drain loop and the replay to the leader are in
// spool.go here.
//
// # Long polling
//
// A pop with wait=true that finds nothing parks (pop.go): it registers
// Broker.Watch for its queue ("" for discovery pops) and pops again when
// notified, and otherwise every 100 ms, doubling after three empty checks up
// to 1 s (a lease can expire without any command being applied). It holds no
// lease while parked. At its deadline (timeout ms, default 30 s, capped by
// Options.MaxPopTimeout) it answers 204; Shutdown wakes it with a 204 too.
// fasthttp cannot tell a handler that its client left, so before each re-pop
// the handler peeks at the socket (listener.PeerClosed, MSG_PEEK); a client that
// left ends the wait, and if it left while a pop was being applied the
// delivered messages are given back at once with a budget-free "retry" ack.
//
// # Encryption at rest
//
// Payloads are sealed at the edge into Queen's AES-256-GCM envelope: see
// package envelope (server/envelope/doc.go) for the envelope, the sealed mark
// and why the work happens here and not in the state machine.
//
// # Followers
//
// The server does not know whether its node leads. It proposes through
// its broker's proposer (a cluster.Proxy with one group, the cluster.Host
// with several), which sends a command to the leader on the cluster path;
// what that path does not carry (a pop, a command of an older leader) the
// edge relays whole to the leader, and relays the answer back. Reads are
// served from the local node's applied state. Watch fires on the
// node where commands are applied, so a parked pop on a follower re-pops
// through the leader when its own replica applies a push.
package server

//go:generate go test -run TestRouteDocs_DocGoListIsGenerated . -args -update-route-docs
