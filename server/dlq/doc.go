// Package dlq answers the dead-letter and message routes of the HTTP API:
// the DLQ listing and its bulk redrive (GET /api/v1/dlq, POST
// /api/v1/dlq/replay; docs/decisions.md B1, B4), the retained-message
// listing and detail (GET /api/v1/messages, .../{partitionId}/{transactionId};
// docs/api.md §9), the operator's deletes, replays and moves of one
// message (docs/decisions.md B3, C4; docs/semantics.md §9.3), and the
// status page's message list (GET /api/v1/status/queues/{queue}/messages).
//
// It is apart from package server because these routes are an operator's
// window on the broker's state, not part of the broker's hot path: they
// read the applied state (Reader), propose a handful of commands, and write
// JSON. Package server keeps the route table (paths, methods, access levels
// and read consistency, routes.go) and calls the exported handlers from
// one-line wrappers, passing the path parameters as values.
//
// # What it needs from the server
//
// Options carries what is fixed for the server's life: the broker's
// Reader, the payload cipher (package envelope: rows a broker sealed are
// answered decrypted), the counters the routes bump, a logger and the
// context of broker calls. Host is what depends on the request or on the
// server's edge: the proposer for a request (which forwards a command to
// the leader when this node follows), relaying a whole request to the
// leader, the error table (writing an error, telling a 404 apart), sealing
// a corrected payload as a push would be sealed, and writing a push result.
//
// # Message status
//
// A message's status is computed on read, never stored: dead_letter when
// it has a dead-letter row, completed when every group with a cursor is
// past it, processing under a live lease that covers it, else pending
// (statusOf). queueStatus is the same for queue mode alone; named groups
// are counted in busStatus.
package dlq
