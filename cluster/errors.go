package cluster

import "errors"

// ErrNoPath is returned by a Proxy, wrapping this node's own
// raft.ErrNotLeader, when the leader it sent a command to has no cluster
// path for it (ProxyOptions.NoPath: a version without the route, or one
// whose command table does not relay the command): nothing was proposed,
// and the caller may relay the request whole, as an older leader takes it.
var ErrNoPath = errors.New("cluster: the leader has no path for the command")
