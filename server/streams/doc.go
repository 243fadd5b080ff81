// Package streams answers the streams routes of the HTTP API (docs/api.md
// §14.2): what Queen's streaming SDKs call to register a query, read its
// state and commit a cycle. A cycle is one command (engine.StreamCycleCmd):
// its state changes, sink pushes and ack are applied together on every
// replica, or not at all.
//
// It is apart from package server because it is a protocol of its own on
// top of the broker: a cycle body (decodeCycle) is read once, validated
// here, and becomes one command. What a cycle's body carries that a client
// got wrong in a way Queen reports as a failed cycle (an unknown op type
// or ack status, a bad push item) is answered 200 success:false and never
// proposed; a malformed body is a 400.
//
// # What it needs from the server
//
// Host: the proposer for a request (which forwards the command to the
// leader when this node follows), relaying a request this node could not
// forward, the edge's error table (writing an error, an error's public
// text), the leader read state/get waits on, sealing a cycle's sink
// pushes as pushes are sealed, counting them, and reading and writing
// push items as the push route does (Items, Host.WritePushResult), so
// that a sink push and a push are one format. New takes the broker's
// stream Reader.
package streams
