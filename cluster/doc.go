// Package cluster runs a node in a cluster of several Raft groups: the Host,
// which manages the groups of one node, and the one path between nodes
// that the Host and the edge take to another node's replica.
//
// It sits between the HTTP edge and Raft (cmd → server → cluster → raft):
// package raft is one replica of one group (a Node), and a Host holds one
// Node per group and reaches it only through what raft exports. See
// ARCHITECTURE.md, "Scale-out".
//
// # The Host
//
// A Host (host.go) opens the directory (group 0: how many data groups,
// which queue lives in which, each group's voters and leader) and the data
// groups the directory places on this node, on one raft.Store (placed.go:
// a replica opens when a step places it here and is retired, its disk
// freed, once its removal has committed), and spreads their leaders over
// the nodes. At most five nodes vote in the directory, the others follow
// it (voters.go).
// With --replicas R each data group's voters are R of the N nodes, as the
// directory's layout records place them (hostlayout.go, raft/placement);
// without it every group has every node. Its loops move replicas on join,
// drain and loss (rebalance.go), queues between groups (hostmove.go) and
// load from the hottest group to the coolest (balance.go). As the broker
// the edge sees (hostbroker.go) it sends each command to its queue's
// group, splits pushes and acks over groups, relays to another node's
// leader what a group led there must propose (hostrelay.go), delivers a
// transaction's pushes to other groups (hostoutbox.go), reads groups it
// hosts no replica of from a voter (hostremote.go), and merges reads.
//
// # The path between nodes
//
// A node that must have a command proposed by the leader of its Raft
// group sends the encoded command there and gets its typed result back.
// Whether it must is decided here, for every command, whether the node
// runs one group (Proxy, proxy.go) or several (the Host): both send on
// one function, toLeader, and leave to the edge's whole-request relay
// only what this path does not carry (a command without a result codec,
// a request's second hop, a leader without the path: ErrNoPath). A
// follower's pushes, acks, transactions and spool replays all leave on it;
// the edge reads their bodies first, and relays one unread only when
// there is no path (no cluster secret). Reads of a group a node does not
// host take it too. Client implements Forwarder, which a Host is given when it is
// opened and a Proxy when it is made, and Answer is what the receiving
// node's route runs. The route itself is in the server's
// route table (auth, consistency, the error table), at ProposePath.
//
// # The exchange
//
//	POST ProposePath
//	  SecretHeader     the cluster secret (only a node may propose for another)
//	  ForwardedHeader  the sending node's id (a node's request is never relayed again)
//	  GroupHeader      the Raft group, decimal
//	  DeadlineHeader   unix µs after which the sender has given up: the
//	                   receiver refuses it rather than apply it unseen
//	  body             one log entry holding one command (raft/command),
//	                   as raft.RelayEntry encodes it
//
//	200                the command's result, by the result codec of its row
//	                   (raft/command/results.go); AppliedHeader "g:index,..."
//	                   (its format in applied.go)
//	                   for each group the answering node holds, read after
//	                   the command was answered: the sender waits until its
//	                   own replica of the group has applied as far, so that
//	                   a read on it sees the write.
//	4xx/5xx            the edge's {"error","code"} answer; Options.Refusal
//	                   turns it back into the error it stands for.
//
// A read of a group the sending node does not host (hostremote.go)
// takes the same headers:
//
//	POST ReadPath
//	  body             the read, as a Host encodes it (JSON)
//	200                its answer (JSON), from the node's replica of the
//	                   group once a heartbeat round confirmed it leads it
//	4xx/5xx            as above (503 not_leader from a node that does not
//	                   lead the group: the sender looks for the leader again)
//
// A backup of a group the asking node does not host (server/backup.go)
// takes them too, on a connection of its own (stream.go):
//
//	POST BackupPath
//	  DeadlineHeader   unix µs when the asking node gives up
//	200                a backup file of the one group (server/backups),
//	                   streamed from a voter's replica once it has applied
//	                   what its group committed; it may stall up to
//	                   BackupIdle while the asker writes its own file
//	4xx/5xx            as above (503 not_leader from a node that is not a
//	                   voter of the group: the asker looks for one again)
//
// The balancer on the directory's leader asks a voter of a queue's group
// to move it (the copy reads a replica of the source):
//
//	POST MovePath
//	  GroupHeader      the group to move the queue to
//	  body             {"queue": q}
//	202                once the move is recorded; the node runs it on
//	4xx/5xx            as above (503 not_leader from a node that hosts no
//	                   replica of the queue's group)
//
// Node to node only, between one version of the broker and the next: a
// change to the exchange needs a new path, not a flag.
//
// Every request between nodes goes through one Transport (transport.go):
// one fasthttp client, one TLS dialer for the answers read on connections
// of their own (stream.go), and one request builder (Address, Sign). The
// Client's commands use it, and so does the edge's whole-request relay
// (server/relay), given the Client's.
//
// Every internal route's path, these and the server's own (read index,
// join, leave, storage and analytics reports), is declared once, in
// paths.go; its test pins each to its wire string and fails on an
// "/internal/" literal anywhere else.
package cluster
