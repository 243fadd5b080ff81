package cluster

import "errors"

// ErrNoPath is returned by a Proxy, wrapping this node's own
// raft.ErrNotLeader, when the cluster path does not carry a command to its
// leader: the leader has no path for it (ProxyOptions.NoPath: a version
// without the route, or one whose command table does not relay the
// command), or its entry is past ProxyOptions.MaxEntry. Nothing was
// proposed, and the caller relays the request whole, which the leader
// takes as it always has.
var ErrNoPath = errors.New("cluster: the path to the leader does not carry the command")
