// Package bodies reads the JSON bodies of the write routes (push, ack,
// transaction, and the streams' registration, state read and cycle) into
// engine commands, and writes their per-item results.
//
// It is apart from package server because none of it is a route's logic:
// the same push item is read by the push route, a transaction's push
// operation and a stream cycle's sink push, and the same ack fields by the
// ack, batch ack and transaction routes, so the rules a client meets (the
// names it may use, the texts of its 400s, what a missing payload stores)
// are written once. Every reader is a single pass over the body with package wire's
// scanner: no reflection, and a name a previous item spelled the same is
// reused rather than allocated again.
//
// Bad input is an error the server's one error table knows (wire.Error, a
// 400 invalid_argument, or engine.ErrInvalid); a per-item problem that the
// API answers inside a 200 (an ack's partition id that is not a UUID) is a
// text, not an error. A stream cycle's failures (an unknown state op type,
// a bad sink push) are answered inside a 200 too, as Queen's success:false:
// StreamCycle reports the first as Cycle.Fail, a bad push item's in the
// words of the edge's error table, which the caller passes in as a
// function. The package never imports package server.
package bodies
