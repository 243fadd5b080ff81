// Package server is Queen's v1 HTTP API over fasthttp: the edge of the
// broker. It decodes requests, makes one call on a Broker (the replicated
// node; broker.go declares the interface), and encodes the answer. It holds
// no broker state of its own.
//
// # Routes
//
// The one table is routeTable in routes.go. Path parameters are matched on
// the raw path and percent-decoded per segment (C9), so "q%2Fx" names the
// queue "q/x" and "ord:42" works raw or escaped; literal segments win over
// parameters ("/consumer-groups/lagging" over "/consumer-groups/{group}").
//
//	GET    /health                                   200 healthy | 503 unhealthy (no leader)
//	GET    /metrics                                  JSON snapshot
//	GET    /metrics/prometheus                       Prometheus text (VictoriaMetrics set + DLQ depth)
//	POST   /api/v1/configure                         C5 merge; null resets; replace
//	POST   /api/v1/push                              201 [result per item]
//	GET    /api/v1/pop/queue/{queue}                 200 envelope | 204
//	GET    /api/v1/pop/queue/{queue}/partition/{partition}
//	GET    /api/v1/pop?namespace=&task=              discovery; neither → 400
//	POST   /api/v1/ack                               [one result]
//	POST   /api/v1/ack/batch                         [result per item]
//	POST   /api/v1/transaction                       200 {success, results} | 400 malformed
//	POST   /api/v1/lease/{leaseId}/extend            200 always; body optional
//	GET    /api/v1/dlq                               B1 filters, true total, hasMore
//	GET    /api/v1/messages                          501 (no listing in the Reader yet)
//	GET    /api/v1/messages/{partitionId}/{transactionId}
//	DELETE /api/v1/messages/{partitionId}/{transactionId}        DLQ rows only; else 404
//	POST   /api/v1/messages/{partitionId}/{transactionId}/retry  C4 replay (B4 "data")
//	POST   /api/v1/messages/{partitionId}/{transactionId}/dlq    B3 move; 404 | 409
//	GET    /api/v1/resources/{overview,queues,namespaces,tasks}
//	GET    /api/v1/resources/queues/{queue}          | DELETE (dead letters survive)
//	GET    /api/v1/consumer-groups[/lagging|/{group}] | DELETE /{group}[/queues/{queue}]
//	POST   /api/v1/consumer-groups/{group}/queues/{queue}[/partitions/{partition}]/seek
//	POST   /api/v1/consumer-groups/{group}/subscription
//	POST   /api/v1/stats/refresh                     no-op (stats are computed on read)
//	GET    /api/v1/status[/queues[/{queue}]|/analytics|/buffers]
//	GET    /api/v1/system/maintenance[/pop]          always off
//	POST   /api/v1/system/maintenance[/pop]          {"enabled":false} 200; true → 501
//	OPTIONS /*                                       204 with CORS headers
//
// # Edge contract
//
// Status codes are the intended ones (C1): 201 push, 204 nothing to pop,
// 400, 404, 405, 409, 413, 501, 503. Every error body is
// {"error": "<message>", "code": "<stable_snake_case>"} (C2), produced by
// writeError from the one table in errors.go; an error the table does not
// know is a 500 "internal" whose details are logged, never returned. Raft
// errors (no leader, not leader, timeout, shutdown, forward) are 503 with a
// Retry-After header: the SDKs retry 5xx, and a retried push is made safe by
// transaction-id dedup. An unknown path is 404 no_such_route; a known path
// with another method is 405 method_not_allowed with an Allow header. Every
// reply carries the CORS headers of API.md §1.3.
//
// Input is lenient where the SDKs need it (C9): an empty body on a route
// whose body is optional is {}; query booleans are true for "true" or "1";
// query integers that do not parse take their default. subscriptionFrom is
// "now" or ISO-8601, else 400 (C6). Bodies are parsed by a small validating
// scanner (decode.go) that never re-encodes payloads: a pushed payload is
// validated and stored as the exact bytes sent, and popped data is written
// back as those bytes. Hot-path replies are appended byte by byte
// (encode.go), without reflection. The body is copied out of the RequestCtx
// before decoding, so nothing handed to the broker aliases fasthttp's
// recycled buffers.
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
// the handler peeks at the socket (conn_unix.go, MSG_PEEK); a client that
// left ends the wait, and if it left while a pop was being applied the
// delivered messages are given back at once with a budget-free "retry" ack.
//
// # Followers
//
// The server does not know whether its node leads. It calls the Broker,
// which forwards commands (and pops) to the leader and relays the answer;
// reads are served from the local node's applied state. Watch fires on the
// node where commands are applied, so a parked pop on a follower re-pops
// through the leader when its own replica applies a push.
package server
