// Package listener keeps the HTTP server's listeners alive and its
// connections within bounds: a Limiter caps the connections open per node
// and per client IP and retries the accept errors a node outlives, and the
// defaults of those caps come from the process's descriptor limit. It also
// tells a handler whether its client left (PeerClosed), which fasthttp
// cannot. It is apart from package server because it works on net.Listener
// and net.Conn alone, with no HTTP in it.
//
// # Connections
//
// fasthttp's Serve returns on the first accept error that is not a timeout,
// and EMFILE (out of descriptors) is one: a flood of idle connections used
// to end the HTTP server, and with it the node. So the server accepts
// through a Limiter's listener, which
//
//   - retries the errors that pass (out of descriptors or kernel memory, a
//     temporary error) after a back-off of 5 ms doubling to 1 s, as
//     net/http does, and counts them (queen_http_accept_errors_total);
//   - caps the connections open at once, all clients together
//     (the server's Options.MaxConns) and from one client IP (MaxConnsPerIP),
//     closing the excess at once with a reset and counting it
//     (queen_http_conns_refused_total{reason}).
//
// The cap sits below the descriptor limit, so the flood meets the cap and
// not EMFILE: the store, which opens files as it flushes and compacts,
// keeps the descriptors it needs (DefaultMaxConns says how many).
// Connections that send nothing end at ReadTimeout, idle keep-alive ones at
// IdleTimeout, and either way their place is given back.
package listener
