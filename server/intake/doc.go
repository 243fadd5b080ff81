// Package intake reads a request's body at the HTTP edge under the memory
// budget (package memory), and ends a request whose body was refused
// unread without resetting its connection.
//
// The server reads request bodies itself (fasthttp's StreamRequestBody):
// fasthttp hands over the headers and at most 8 KiB of body, and Take reads
// the rest into a buffer of the body's exact size once the budget allows
// it. So the bytes of bodies held at once are bounded (the server's
// Options.MaxInflightBodyBytes), a request past the bound is refused
// before its body is read, and the buffer belongs to the request alone:
// fasthttp neither recycles it nor keeps it, so handlers decode it in
// place and hand slices of it to the broker without copying, and it is
// garbage once the request is answered.
//
// A body refused unread (overloaded, too large) ends the way HTTP servers
// close a connection with a body still coming (Linger): the answer is
// written with Connection: close, the connection's write side is shut, so
// the client reads the answer and then EOF, and the rest of the body is
// read and dropped until it ends, a timeout passes or the server stops.
// Closing at once would reset the connection under a client still sending,
// and a client that reads its answer only after sending its whole body
// would see a reset, never the 503.
//
// It is apart from package server because it is the same two steps for
// every route, below the router's concerns; its refusals are memory's
// errors (ErrTooLarge, ErrOverloaded), which the server maps to 413 and
// 503 in its error table.
package intake
