package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/keyspace"
	"github.com/queenmq/queen/raft"
)

// Reads of a group this node does not host (issue 30, R of N).
//
// A node that is not among a group's voters holds no replica of it
// (placed.go), or one left where a replica step removed it from the
// group. Such a group is read from its leader instead, over the cluster path
// (Forwarder.Read, package cluster's read route), with the same request
// any read of a hosted group makes of its Node (groupReader), so the
// merging in hostread.go runs alike over local and remote groups.
//
// The leader answers, not any voter: the directory records it (leaderOf),
// it answers after one heartbeat round confirms it still leads (ReadIndex:
// a deposed leader refuses rather than answering stale state), and it has
// applied every command it answered, so the read sees every write
// answered before it, whichever node took it (read-your-writes, and
// linearizable). A voter would first have to ask the leader for a read
// index and wait to catch up: two hops where one does.
//
// Requests and answers are JSON (readRequest, readAnswer): the engine's
// read types are plain structs of strings, integers, []byte (base64) and
// ids ([16]byte, an array of numbers), which JSON gives back exactly, and
// engine.Config, whose values are unexported, marshals itself by option
// name. One exception: a DeadLetter's Queue, Partition and Group are
// also its embedded record's, which JSON would drop, so it crosses as
// deadLetterWire. A read is rare beside commands, so a compact codec would buy
// nothing worth its code; the bytes are never stored.

// groupReader is what a read asks of one group: a Node's read methods.
// reader picks the Node (a hosted group) or remoteGroup (one led
// elsewhere).
type groupReader interface {
	Queues() ([]engine.QueueInfo, error)
	Queue(name string) (engine.QueueInfo, error)
	QueueConfig(name string) (engine.Config, bool)
	Cursors(now int64, group string) ([]engine.CursorInfo, error)
	Subscriptions() ([]engine.Subscription, error)
	ListDLQ(f engine.DLQFilter) ([]engine.DeadLetter, int, error)
	DeadLettersAt(part engine.ID, txn string) ([]engine.DeadLetter, error)
	MessageAt(part engine.ID, txn string) (engine.StoredMessage, error)
	ListMessages(f engine.MessageFilter) ([]engine.ListedMessage, error)
	StreamQueryByID(id engine.ID) (engine.StreamQuery, bool, error)
	StreamState(f engine.StateFilter) ([]engine.StateRow, error)
	Traces(part engine.ID, txn string) ([]engine.Trace, error)
	TracesByName(name string, limit, offset int) ([]engine.TraceAt, int, error)
	TraceNames(limit, offset int) ([]engine.TraceName, int, error)
}

// reader is where a read of group g is answered: this node's replica
// when it hosts g, else g's leader.
func (h *Host) reader(g uint32) groupReader {
	if n := h.served(g); n != nil {
		return n
	}
	return remoteGroup{h: h, g: g}
}

// Hosts reports whether this node serves group g from its own replica
// (the directory always). The edge's read consistency waits only for
// these replicas: a read of another group goes to its leader.
func (h *Host) Hosts(g uint32) bool { return int(g) < len(h.nodes) && h.hosts(g) }

// hostsAll reports whether this node hosts every data group (R covers
// every node, or no layout is recorded yet).
func (h *Host) hostsAll() bool {
	for g := uint32(1); int(g) < len(h.nodes); g++ {
		if !h.hosts(g) {
			return false
		}
	}
	return true
}

// The read operations a readRequest names.
const (
	readQueues        = "queues"
	readQueue         = "queue"
	readQueueConfig   = "queueConfig"
	readCursors       = "cursors"
	readSubscriptions = "subscriptions"
	readDLQ           = "dlq"
	readDeadLetters   = "deadLetters"
	readMessage       = "message"
	readMessages      = "messages"
	readStreamQuery   = "streamQuery"
	readStreamState   = "streamState"
	readTraces        = "traces"
	readTracesByName  = "tracesByName"
	readTraceNames    = "traceNames"
	readWouldDeliver  = "wouldDeliver" // a discovery pop's check (discover): engine.PopWouldDeliver
	readCopyID        = "copyID"       // what the group holds of a queue a move left (heldCopy)
	readMembership    = "membership"   // the leader's configuration, found when committed (retire.go)
)

// readRequest is one read of a group: its operation and the arguments
// that operation takes.
type readRequest struct {
	Op     string                `json:"op"`
	Name   string                `json:"name,omitempty"` // a queue, consumer group or trace name
	Now    int64                 `json:"now,omitempty"`
	ID     engine.ID             `json:"id"` // a partition or stream query
	Txn    string                `json:"txn,omitempty"`
	Limit  int                   `json:"limit,omitempty"`
	Offset int                   `json:"offset,omitempty"`
	DLQ    *engine.DLQFilter     `json:"dlq,omitempty"`
	Msgs   *engine.MessageFilter `json:"msgs,omitempty"`
	State  *engine.StateFilter   `json:"state,omitempty"`
	Pop    *engine.PopCmd        `json:"pop,omitempty"`
}

// readAnswer is a read's answer: its value, and the count or found flag
// the operation answers besides.
type readAnswer[T any] struct {
	Value T    `json:"value"`
	Total int  `json:"total,omitempty"`
	Found bool `json:"found,omitempty"`
}

// AnswerRead answers a read of group g another node sent (Forwarder.Read)
// from this node's replica, once a heartbeat round confirms this node
// leads g. A NotLeaderError when it does not host or lead g: the asking
// node looks for the leader again. A read's own error (a message not
// found, say) is the error, as the local read's would be.
func (h *Host) AnswerRead(ctx context.Context, g uint32, req []byte) ([]byte, error) {
	if g == raft.Directory || int(g) >= len(h.nodes) {
		return nil, fmt.Errorf("%w: group %d holds no queues", engine.ErrInvalid, g)
	}
	n := h.served(g)
	if n == nil {
		return nil, h.groupError(g, raft.ErrNotLeader)
	}
	if _, err := n.ReadIndex(ctx); err != nil {
		return nil, h.groupError(g, err)
	}
	var q readRequest
	if err := json.Unmarshal(req, &q); err != nil {
		return nil, fmt.Errorf("%w: a read request: %v", engine.ErrInvalid, err)
	}
	return answerRead(n, &q)
}

// answerRead runs q on n and encodes its answer.
func answerRead(n *raft.Node, q *readRequest) ([]byte, error) {
	var (
		a   readAnswer[any]
		err error
	)
	switch q.Op {
	case readQueues:
		a.Value, err = n.Queues()
	case readQueue:
		a.Value, err = n.Queue(q.Name)
	case readQueueConfig:
		a.Value, a.Found = n.QueueConfig(q.Name)
	case readCursors:
		a.Value, err = n.Cursors(q.Now, q.Name)
	case readSubscriptions:
		a.Value, err = n.Subscriptions()
	case readDLQ:
		if q.DLQ == nil {
			return nil, fmt.Errorf("%w: a dlq read without its filter", engine.ErrInvalid)
		}
		var rows []engine.DeadLetter
		rows, a.Total, err = n.ListDLQ(*q.DLQ)
		a.Value = toWire(rows)
	case readDeadLetters:
		var rows []engine.DeadLetter
		rows, err = n.DeadLettersAt(q.ID, q.Txn)
		a.Value = toWire(rows)
	case readMessage:
		a.Value, err = n.MessageAt(q.ID, q.Txn)
	case readMessages:
		if q.Msgs == nil {
			return nil, fmt.Errorf("%w: a messages read without its filter", engine.ErrInvalid)
		}
		a.Value, err = n.ListMessages(*q.Msgs)
	case readStreamQuery:
		a.Value, a.Found, err = n.StreamQueryByID(q.ID)
	case readStreamState:
		if q.State == nil {
			return nil, fmt.Errorf("%w: a state read without its filter", engine.ErrInvalid)
		}
		a.Value, err = n.StreamState(*q.State)
	case readTraces:
		a.Value, err = n.Traces(q.ID, q.Txn)
	case readTracesByName:
		a.Value, a.Total, err = n.TracesByName(q.Name, q.Limit, q.Offset)
	case readTraceNames:
		a.Value, a.Total, err = n.TraceNames(q.Limit, q.Offset)
	case readWouldDeliver:
		if q.Pop == nil {
			return nil, fmt.Errorf("%w: a pop check without its pop", engine.ErrInvalid)
		}
		a.Found = n.Engine().PopWouldDeliver(time.Now().UnixMicro(), *q.Pop)
	case readCopyID:
		a.Value, a.Found = heldCopy(n.Engine(), q.Name)
	case readMembership:
		a.Value, a.Found, err = n.CommittedConfiguration()
	default:
		return nil, fmt.Errorf("%w: unknown read %q", engine.ErrInvalid, q.Op)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(a)
}

// remoteReadWait bounds a read of a group led elsewhere, its retries
// included: as long as the edge waits for a read index
// (relay.ReadIndexTimeout), so that a read fails no sooner than a local
// linearizable one would.
const remoteReadWait = 5 * time.Second

// readRemote asks group g's leader for q's answer. A leader that refuses
// (it has just handed over), one not known yet, or one that could not be
// reached is looked for again, up to remoteReadWait: a read changes
// nothing, so it is safe to send again. The last error then, as a
// NotLeaderError when it was the leader's refusal.
func readRemote[T any](h *Host, g uint32, q readRequest) (readAnswer[T], error) {
	var a readAnswer[T]
	if h.opts.Forward == nil {
		return a, h.groupError(g, raft.ErrNotLeader) // no cluster path: the edge relays the request whole
	}
	req, err := json.Marshal(q)
	if err != nil {
		return a, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteReadWait)
	defer cancel()
	for {
		err = raft.ErrNoLeader
		if st := h.leaderOf(g); st.LeaderHTTP != "" && st.Leader != h.opts.Node.ID {
			var b []byte
			if b, err = h.opts.Forward.Read(ctx, st.LeaderHTTP, g, req); err == nil {
				if err = json.Unmarshal(b, &a); err != nil {
					return a, errors.Join(raft.ErrForward, fmt.Errorf("group %d at %s: the read's answer: %w", g, st.LeaderHTTP, err))
				}
				return a, nil
			}
		}
		retry := errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrNoLeader) || errors.Is(err, raft.ErrForward)
		if !retry {
			return a, err
		}
		select {
		case <-ctx.Done():
			return a, h.groupError(g, err)
		case <-h.done:
			return a, h.groupError(g, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// remoteGroup reads group g from its leader (readRemote).
type remoteGroup struct {
	h *Host
	g uint32
}

func (r remoteGroup) Queues() ([]engine.QueueInfo, error) {
	a, err := readRemote[[]engine.QueueInfo](r.h, r.g, readRequest{Op: readQueues})
	return a.Value, err
}

func (r remoteGroup) Queue(name string) (engine.QueueInfo, error) {
	a, err := readRemote[engine.QueueInfo](r.h, r.g, readRequest{Op: readQueue, Name: name})
	return a.Value, err
}

// QueueConfig answers false when the leader could not be asked, as for a
// queue that does not exist: a caller that must not take one for the
// other (a push deciding whether to seal) asks CheckedQueueConfig.
func (r remoteGroup) QueueConfig(name string) (engine.Config, bool) {
	cfg, found, _ := r.checkedQueueConfig(name)
	return cfg, found
}

func (r remoteGroup) checkedQueueConfig(name string) (engine.Config, bool, error) {
	a, err := readRemote[engine.Config](r.h, r.g, readRequest{Op: readQueueConfig, Name: name})
	if err != nil {
		r.h.opts.Node.Logger.Debug("raft: host: a queue's configuration from its group's leader", "group", r.g, "err", err)
		return engine.Config{}, false, err
	}
	return a.Value, a.Found, nil
}

func (r remoteGroup) Cursors(now int64, group string) ([]engine.CursorInfo, error) {
	a, err := readRemote[[]engine.CursorInfo](r.h, r.g, readRequest{Op: readCursors, Now: now, Name: group})
	return a.Value, err
}

func (r remoteGroup) Subscriptions() ([]engine.Subscription, error) {
	a, err := readRemote[[]engine.Subscription](r.h, r.g, readRequest{Op: readSubscriptions})
	return a.Value, err
}

func (r remoteGroup) ListDLQ(f engine.DLQFilter) ([]engine.DeadLetter, int, error) {
	a, err := readRemote[[]deadLetterWire](r.h, r.g, readRequest{Op: readDLQ, DLQ: &f})
	return fromWire(a.Value), a.Total, err
}

func (r remoteGroup) DeadLettersAt(part engine.ID, txn string) ([]engine.DeadLetter, error) {
	a, err := readRemote[[]deadLetterWire](r.h, r.g, readRequest{Op: readDeadLetters, ID: part, Txn: txn})
	return fromWire(a.Value), err
}

func (r remoteGroup) MessageAt(part engine.ID, txn string) (engine.StoredMessage, error) {
	a, err := readRemote[engine.StoredMessage](r.h, r.g, readRequest{Op: readMessage, ID: part, Txn: txn})
	return a.Value, err
}

func (r remoteGroup) ListMessages(f engine.MessageFilter) ([]engine.ListedMessage, error) {
	a, err := readRemote[[]engine.ListedMessage](r.h, r.g, readRequest{Op: readMessages, Msgs: &f})
	return a.Value, err
}

func (r remoteGroup) StreamQueryByID(id engine.ID) (engine.StreamQuery, bool, error) {
	a, err := readRemote[engine.StreamQuery](r.h, r.g, readRequest{Op: readStreamQuery, ID: id})
	return a.Value, a.Found, err
}

func (r remoteGroup) StreamState(f engine.StateFilter) ([]engine.StateRow, error) {
	a, err := readRemote[[]engine.StateRow](r.h, r.g, readRequest{Op: readStreamState, State: &f})
	return a.Value, err
}

func (r remoteGroup) Traces(part engine.ID, txn string) ([]engine.Trace, error) {
	a, err := readRemote[[]engine.Trace](r.h, r.g, readRequest{Op: readTraces, ID: part, Txn: txn})
	return a.Value, err
}

func (r remoteGroup) TracesByName(name string, limit, offset int) ([]engine.TraceAt, int, error) {
	a, err := readRemote[[]engine.TraceAt](r.h, r.g, readRequest{Op: readTracesByName, Name: name, Limit: limit, Offset: offset})
	return a.Value, a.Total, err
}

func (r remoteGroup) TraceNames(limit, offset int) ([]engine.TraceName, int, error) {
	a, err := readRemote[[]engine.TraceName](r.h, r.g, readRequest{Op: readTraceNames, Limit: limit, Offset: offset})
	return a.Value, a.Total, err
}

// wouldDeliver asks group g's leader whether discovery pop c may deliver
// there now (engine.PopWouldDeliver, on the leader's state).
func (h *Host) wouldDeliver(g uint32, c engine.PopCmd) (bool, error) {
	a, err := readRemote[struct{}](h, g, readRequest{Op: readWouldDeliver, Pop: &c})
	return a.Found, err
}

// CheckedQueueConfig is QueueConfig with the error of a group led
// elsewhere whose leader could not be asked, which QueueConfig answers as
// a queue not found.
func (h *Host) CheckedQueueConfig(name string) (engine.Config, bool, error) {
	g, err := h.queueGroup(name)
	if err != nil {
		return engine.Config{}, false, err
	}
	if n := h.served(g); n != nil {
		cfg, ok := n.QueueConfig(name)
		return cfg, ok, nil
	}
	return remoteGroup{h: h, g: g}.checkedQueueConfig(name)
}

// deadLetterWire is an engine.DeadLetter as a read's answer carries it:
// its record apart, whose Queue, Partition and Group JSON would otherwise
// drop as shadowed by the row's own.
type deadLetterWire struct {
	Row       keyspace.RowKey
	FailedAt  int64
	Queue     string
	Partition string
	Group     string
	Record    keyspace.DeadLetterRecord
}

func toWire(rows []engine.DeadLetter) []deadLetterWire {
	if rows == nil {
		return nil
	}
	out := make([]deadLetterWire, len(rows))
	for i, d := range rows {
		out[i] = deadLetterWire{Row: d.Row, FailedAt: d.FailedAt, Queue: d.Queue, Partition: d.Partition, Group: d.Group, Record: d.DeadLetterRecord}
	}
	return out
}

func fromWire(rows []deadLetterWire) []engine.DeadLetter {
	if rows == nil {
		return nil
	}
	out := make([]engine.DeadLetter, len(rows))
	for i, d := range rows {
		out[i] = engine.DeadLetter{Row: d.Row, FailedAt: d.FailedAt, Queue: d.Queue, Partition: d.Partition, Group: d.Group, DeadLetterRecord: d.Record}
	}
	return out
}
