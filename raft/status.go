package raft

// Status is a node's view of the cluster, as /health reports it.
type Status struct {
	ID         string // this node's id
	Store      string // its store's id (identity.go), minted with its data directory
	Cluster    string // the cluster's id (identity.go), "" for a cluster bootstrapped before there were ids
	Role       string // "leader", "follower", "candidate" or "shutdown"
	Leader     string // the leader's node id, "" when there is none
	LeaderHTTP string // the leader's HTTP address, "" when unknown
	Applied    uint64 // the last Raft index applied to the engine
	Term       uint64
	Voters     int
	// Members are the ids of the voters of the latest configuration,
	// sorted (a Host's directory: every node).
	Members []string
	// LiveVoters is, on the leader, how many voters it knows live: itself
	// and the followers whose heartbeats are not failing (see membership.go).
	// 0 on any other node.
	LiveVoters int
	// Fault says why this node's storage is not healthy, naming the store
	// ("raft log: ...", "engine: ..."): a fault (writes refused until the
	// store reopens itself), a stall (writes waiting for the disk), a read
	// being retried, or the engine catching up after a fault. Empty when
	// healthy. A node with a fault answers writes ErrFaulted or times out,
	// and heals itself when the cause goes away.
	Fault string
	// StorageErrors counts the failed file operations of both stores since
	// the node opened (queen_storage_errors_total).
	StorageErrors uint64
	// ForeignPeers counts the Raft connections refused since the node
	// opened because the peer belongs to another cluster (transport.go;
	// queen_raft_foreign_peers_refused_total).
	ForeignPeers uint64
	// CommandVersion is the command version this node advertises, and
	// ClusterVersion the one the cluster runs at as this node last read
	// it (version.go); Versions lists every server's.
	CommandVersion uint8
	ClusterVersion uint8
}

// HasLeader reports whether the node knows a leader.
func (s Status) HasLeader() bool { return s.Leader != "" }
