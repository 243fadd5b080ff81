package raft

// Status is a node's view of the cluster, as /health reports it.
type Status struct {
	ID         string // this node's id
	Role       string // "leader", "follower", "candidate" or "shutdown"
	Leader     string // the leader's node id, "" when there is none
	LeaderHTTP string // the leader's HTTP address, "" when unknown
	Applied    uint64 // the last Raft index applied to the engine
	Term       uint64
	Voters     int
	// LiveVoters is, on the leader, how many voters it knows live: itself
	// and the followers whose heartbeats are not failing (see membership.go).
	// 0 on any other node.
	LiveVoters int
}

// HasLeader reports whether the node knows a leader.
func (s Status) HasLeader() bool { return s.Leader != "" }
