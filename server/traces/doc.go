// Package traces answers the trace routes of the HTTP API (docs/api.md
// §13): records a consumer attaches to a message (msg.trace in the SDKs),
// kept beside the message until retention removes it, and read by
// message, by name, and as a list of names.
//
// It is apart from package server because traces are a side record of
// messages, not part of moving them: adding one is one command
// (engine.TraceCmd), reading them is one call on the broker's optional
// Reader. Package server keeps the route table (paths, methods, access
// levels and read consistency, routes.go) and calls the exported handlers
// from one-line wrappers, passing the path parameters as values.
//
// # What it needs from the server
//
// Host: the proposer for a request (which forwards the command to the
// leader when this node follows), relaying a request whose proposal this
// node could not forward, the edge's error table, this node's id (the
// trace's worker_id), and the broker's trace Reader (an error the edge
// answers 501 when the broker keeps no traces). New takes the context of
// broker calls.
//
// # Bounds
//
// A record carries at most maxTraceNames names of 1 to maxTraceName bytes
// each (names are index keys); the engine caps the traces one message
// holds (engine.ErrTraceLimit, 409 trace_limit).
package traces
