package raft

import (
	"errors"
	"fmt"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/engine"
)

// Sentinel errors. The HTTP edge maps each to a status and a stable code
// (server/errors.go): the ones a retry may cure to 503, so clients retry (a
// retried push is made safe by transaction-id dedup).
var (
	// ErrNoLeader is returned when the cluster has no leader (no quorum, or
	// an election in progress): the command was not applied and will not be
	// applied later.
	ErrNoLeader = errors.New("raft: no leader")
	// ErrNotLeader is returned when this node is not the leader and nothing
	// was proposed: the caller may forward the request to the leader.
	ErrNotLeader = errors.New("raft: not the leader")
	// ErrLeadershipLost is returned when leadership was lost while a command
	// was in flight: its outcome is unknown (it may still be applied).
	ErrLeadershipLost = hraft.ErrLeadershipLost
	// ErrTimeout is returned when a command was not committed in time. Its
	// outcome is unknown: it may still be applied.
	ErrTimeout = errors.New("raft: command timed out")
	// ErrResultType is returned by Propose when a command's answer is not
	// of the type asked for: a bug in the caller or the command, reported
	// rather than read as a zero value.
	ErrResultType = errors.New("raft: command answered a value of another type")
	// ErrShutdown is returned by a node that is shutting down.
	ErrShutdown = errors.New("raft: node is shutting down")
	// ErrNotPreparable is returned for a command that cannot be prepared
	// on one node and proposed by another (PrepareEntry, ProposePrepared).
	ErrNotPreparable = errors.New("raft: command cannot be prepared for another node")
	// ErrForward is returned when forwarding a command to the leader failed.
	ErrForward = errors.New("raft: forward to leader failed")
	// ErrQuorumRisk is returned by Join and Leave for a membership change
	// that would leave the cluster without a quorum of reachable voters (or
	// add a voter nobody can reach); nothing was changed. Passing force makes
	// the change anyway, except removing the last voter, which is always
	// refused.
	ErrQuorumRisk = errors.New("raft: membership change would lose the quorum")
	// ErrHandshake is wrapped by a Raft connection's Dial when the peer
	// failed its set-up: TLS (certificate not signed by the cluster CA, or
	// not naming the dialed host) or the cluster-secret handshake.
	ErrHandshake = errors.New("raft: connection set-up failed")
	// ErrInUse is returned by Open and Recover when another node (in this
	// process or another) holds the data directory.
	ErrInUse = errors.New("raft: data directory in use by a running node")
	// ErrFaulted is wrapped, with its cause, by a command this node could not
	// take because one of its stores hit an I/O error: the Raft log could
	// not append it (this node then stops leading), or the engine could not
	// apply it. The node heals itself when the cause goes away. A command
	// answered ErrFaulted after it was proposed may still be applied, as
	// after ErrTimeout: the client retries, and transaction ids make a
	// retried push safe. It is engine.ErrFaulted.
	ErrFaulted = engine.ErrFaulted
	// ErrShutdownStuck is returned by Close when raft did not stop because a
	// storage fault holds it (see Node.Close); the stores are left open.
	ErrShutdownStuck = errors.New("raft: shutdown held by a storage fault")
	// ErrSpansGroups is returned by a Host for a command whose parts lie in
	// several Raft groups and cannot be split (a transaction, a stream
	// whose queues are placed apart); nothing was proposed. The message
	// says what lies where.
	ErrSpansGroups = errors.New("raft: the command spans Raft groups")
	// ErrPlaced is returned by a Host asked to place a queue in one group
	// when the queue lives in another: queues do not move (yet).
	ErrPlaced = errors.New("raft: the queue lives in another Raft group")
	// ErrLayout is returned by Open and OpenHost for a data directory the
	// other kind of node made: a node of several Raft groups (--groups)
	// opened as one, or one group's opened as several.
	ErrLayout = errors.New("raft: the data directory holds another number of Raft groups")
	// ErrNoState is returned by Recover for a data directory that holds no
	// Raft state: there is nothing to recover.
	ErrNoState = errors.New("raft: no Raft state in the data directory")
)

// NotLeaderError is ErrNotLeader for one group of a Host: nothing was
// proposed, and Status (the group's) says where its leader is.
type NotLeaderError struct {
	Group  uint32
	Status Status
}

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("raft: not the leader of group %d (leader %q)", e.Group, e.Status.Leader)
}

// Unwrap makes a NotLeaderError an ErrNotLeader.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }
