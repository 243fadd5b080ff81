// Package memory bounds what a node's HTTP requests cost in memory: a
// Budget of bytes charged per request, a Reclaimer that gives large bodies'
// bytes back only once the garbage collector has freed them, and the memory
// this process may use (its cgroup's limit or physical RAM), from which the
// budget's default is drawn. It is apart from package server because none of
// it needs HTTP: the server reads bodies through Budget.ReadBody and charges
// decoded pushes with Grow.
//
// # The budget
//
// What requests cost in memory at once is bounded by the server's
// Options.MaxInflightBodyBytes (a Budget): a body is charged BodyCost times
// its length, and a push PushItemCost per item once decoded. fasthttp streams
// bodies (StreamRequestBody): it reads the headers and at most 8 KiB of body,
// and after routing and admission the server's takeBody (server/intake's Take)
// reserves the declared length from the budget and reads the body into a
// buffer of exactly that size; a chunked body reserves each larger buffer
// before making it. A request the budget cannot hold is answered 503
// overloaded with Retry-After before the rest of its body is read; a body
// over MaxBodyBytes is 413 the same way. When more than fasthttp would drop
// by itself is still coming, the answer is written with Connection: close,
// the write side is shut and the rest is read and dropped, so that clients
// that send their whole body before reading still get the answer rather than
// a reset. A body of 1 MiB or more stays charged after its request until a
// garbage collection has run (Reclaimer), so held and uncollected bodies
// together stay under the cap; after a second without large bodies the free
// pages go back to the operating system. Nothing large is pooled: the request
// lets go of its body when answered, a response body over 1 MiB is lent to
// its answer rather than kept in the connection's buffer, and relays lend
// bodies instead of copying them into fasthttp's pools.
package memory
