package cluster

// The internal routes: every path one node calls on another, declared here
// and nowhere else (TestPaths_Wire pins each to its wire string;
// TestPaths_DeclaredOnce fails on a "/internal/" string literal in any other
// non-test file). The server mounts each in its route table; this package's
// Client, the server's relay and queen join/leave call them.
//
// Part of the wire between nodes — never change a path: in a rolling
// upgrade nodes of the older binary call these, and answer them. A changed
// exchange takes a new path (doc.go, "The exchange").
//
// The wire keeps the three schemes the routes grew under (/internal/v1/<verb>,
// /internal/v1/read-index, /internal/v1/cluster/<verb>); the names follow
// one: the verb, then Path.
const (
	// ProposePath: a command a node forwards to its group's leader
	// (Client.Forward).
	ProposePath = "/internal/v1/propose"
	// ReadPath: a read of a group the asking node does not host
	// (Client.Read, hostremote.go).
	ReadPath = "/internal/v1/read"
	// BackupPath: a backup of a group the asking node does not host
	// (Client.Backup, stream.go).
	BackupPath = "/internal/v1/backup"
	// MovePath: the balancer asks a voter of a queue's group to move it
	// (Client.StartMove).
	MovePath = "/internal/v1/move"
	// ReadIndexPath: a group leader's read index, for a follower's
	// linearizable read (server/readindex.go): the group in GroupHeader;
	// 200 with the index in decimal, or an error answer (503 not_leader
	// from a node that does not lead the group).
	ReadIndexPath = "/internal/v1/read-index"
	// JoinPath: a node asks a group's leader to add a server (queen serve
	// --join, a follower's relayed join).
	JoinPath = "/internal/v1/cluster/join"
	// LeavePath: a server is removed from a group (queen leave, a
	// follower's relayed leave).
	LeavePath = "/internal/v1/cluster/leave"
	// StoragePath: a follower reports its free space to the leader
	// (server/storage.go).
	StoragePath = "/internal/v1/cluster/storage"
	// AnalyticsPath: a follower ships its sealed analytics minutes to the
	// leader (server/analytics.go).
	AnalyticsPath = "/internal/v1/cluster/analytics"
)
