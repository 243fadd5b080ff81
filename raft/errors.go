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
	// ErrLeadershipTransfer is returned when the leader is handing its
	// leadership to another member (a Host spreading its groups' leaders,
	// or a leader whose engine faulted): the command was not appended, and
	// a retry goes to the new leader. A proposal is retried once, after the
	// transfer, before this is returned.
	ErrLeadershipTransfer = hraft.ErrLeadershipTransferInProgress
	// ErrRestored is returned when a snapshot was restored while a command
	// was in flight: its outcome is unknown.
	ErrRestored = hraft.ErrAbortedByRestore
	// ErrOutcomeUnknown is wrapped (UnknownError) by the answer to a split
	// push or ack one of whose parts may or may not have been applied,
	// after the retries a Host makes: no item is answered failed then, the
	// whole request is this error, and the client retries it (transaction
	// ids make a retried push safe; a retried ack answers what it finds).
	ErrOutcomeUnknown = errors.New("raft: outcome unknown")
	// ErrResultType is returned by Propose when a command's answer is not
	// of the type asked for: a bug in the caller or the command, reported
	// rather than read as a zero value.
	ErrResultType = errors.New("raft: command answered a value of another type")
	// ErrNoRoute is returned by cluster.Host.Propose for a command type it has no
	// group route for: a command added to the table without its line in
	// cluster.Host.Propose (TestHost_EveryCommandHasARoute finds it first).
	ErrNoRoute = errors.New("raft: host: command has no group route")
	// ErrShutdown is returned by a node that is shutting down.
	ErrShutdown = errors.New("raft: node is shutting down")
	// ErrNotPreparable is returned for a command that cannot be prepared
	// on one node and proposed by another (PrepareEntry, ProposeEntry).
	ErrNotPreparable = errors.New("raft: command cannot be prepared for another node")
	// ErrForward is returned when forwarding a command to the leader failed.
	ErrForward = errors.New("raft: forward to leader failed")
	// ErrStoreLost is returned by Open and OpenStore when this node's store
	// is empty but a founder holds the cluster's state and counts this
	// node's id a member: the disk was lost or replaced, and voting under
	// the old id could elect a leader that lacks acknowledged writes (see
	// identity.go). The message names the fix.
	ErrStoreLost = errors.New("raft: this node's store was lost")
	// ErrUnknownMember is returned by Leave for an id the configuration
	// does not hold (with groups, the directory's, which counts every
	// node): nothing was changed.
	ErrUnknownMember = errors.New("raft: no such member")
	// ErrNotMember is returned by Open and OpenStore when this node's store
	// is empty and the founders that hold the cluster's state do not count
	// it a member: it must join (--join), not bootstrap.
	ErrNotMember = errors.New("raft: not a member of the cluster its founders run")
	// ErrQuorumRisk is returned by Join and Leave for a membership change
	// that would leave the cluster without a quorum of reachable voters (or
	// add a voter nobody can reach); nothing was changed. Passing force makes
	// the change anyway, except removing the last voter, which is always
	// refused.
	ErrQuorumRisk = errors.New("raft: membership change would lose the quorum")
	// ErrDraining is returned by cluster.Host.Drain when its wait ends before the
	// leaving node's replicas have all moved: they go on moving, and the
	// leave may be asked again.
	ErrDraining = errors.New("raft: the leaving node's replicas are still moving")
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
	// when the queue lives in another: placing never moves a queue
	// (cluster.Host.MoveQueue does).
	ErrPlaced = errors.New("raft: the queue lives in another Raft group")
	// ErrLayout is returned by Open and OpenStore for a data directory the
	// other kind of node made: a node of several Raft groups (--groups)
	// opened as one, or one group's opened as several.
	ErrLayout = errors.New("raft: the data directory holds another number of Raft groups")
	// ErrNoState is returned by Recover for a data directory that holds no
	// Raft state: there is nothing to recover.
	ErrNoState = errors.New("raft: no Raft state in the data directory")
	// ErrNotEmpty is returned by Restore for a target directory that
	// exists and holds anything: a restore never writes over a store.
	ErrNotEmpty = errors.New("raft: restore: the target directory is not empty")
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

// UnknownError is ErrOutcomeUnknown for a part of a split command, sent to
// group Group: Err is why its outcome is unknown, for the logs. It does not
// unwrap to Err, so that an error an attempt ended with (a NotLeaderError
// the edge would forward on) is not read as the answer.
type UnknownError struct {
	Group uint32
	Err   error
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("raft: the outcome of the part for group %d is unknown: %v", e.Group, e.Err)
}

// Unwrap makes an UnknownError an ErrOutcomeUnknown.
func (e *UnknownError) Unwrap() error { return ErrOutcomeUnknown }

// NotApplied reports whether err says for certain that the command it
// answers was not applied and never will be: refused before it was
// proposed (not the leader, no leader, a transfer, a leader's refusal of
// the request), invalid, or refused by a queue frozen for a move
// (engine.ErrQueueMoving: the freeze refuses before anything is written).
// Any other error leaves the outcome unknown
// (timeouts, lost leadership, faults, a failed relay, a cancelled
// context, errors nobody classified).
func NotApplied(err error) bool {
	for _, e := range []error{ErrNotLeader, ErrNoLeader, ErrLeadershipTransfer, engine.ErrInvalid,
		ErrNotPreparable, ErrSpansGroups, ErrPlaced, engine.ErrQueueMoving} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Transient reports whether a retry of what err answered may succeed: the
// errors of a cluster changing leaders, failing over or healing, and of a
// queue moving between groups, which the edge answers 503 with Retry-After.
func Transient(err error) bool {
	for _, e := range []error{ErrNotLeader, ErrNoLeader, ErrLeadershipTransfer, ErrLeadershipLost, ErrTimeout,
		ErrRestored, ErrShutdown, ErrForward, ErrFaulted, ErrOutcomeUnknown, engine.ErrQueueMoving} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
