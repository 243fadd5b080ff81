package engine

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/engine/keyspace"
	"github.com/queenmq/queen/internal/wire"
)

// Streams (docs/api.md §14.2): the state Queen's streaming SDKs keep per
// query and source partition, and the cycle that commits one step of a
// stream (state changes, sink pushes, the source ack) as one command. The
// keys are in keyspace's stream families; none of it is in the in-memory
// model, and message retention never touches it.

// ErrQueryNotFound is returned by a cycle or a state read naming a query id
// that is not registered (docs/decisions.md C14).
var ErrQueryNotFound = errors.New("engine: query not found")

// StreamRegisterCmd registers a streaming query, or finds it again.
type StreamRegisterCmd struct {
	Name        string
	SourceQueue string
	HasSink     bool
	SinkQueue   string
	ConfigHash  string
	// Reset wipes the query's state when its hash changed.
	Reset bool
}

// StreamRegistered is the answer of a StreamRegisterCmd. Mismatch reports
// a different hash without Reset: nothing was changed, ID is the existing
// query's.
type StreamRegistered struct {
	ID       ID
	Fresh    bool
	Reset    bool
	Mismatch bool
}

// Apply registers the query. Value: StreamRegistered.
func (c StreamRegisterCmd) Apply(b *Batch, st Stamp) Result {
	rec, found, err := getStreamQuery(b.pb, c.Name)
	if err != nil {
		b.fail(err)
		return Result{Value: StreamRegistered{}, Err: err}
	}
	var out StreamRegistered
	switch {
	case !found:
		rec = keyspace.StreamQueryRecord{ID: (&minter{seed: st.Seed}).next(), CreatedAt: st.Time}
		b.set(keyspace.StreamQueryID(rec.ID), []byte(c.Name))
		out.Fresh = true
	case rec.ConfigHash == c.ConfigHash:
	case c.Reset:
		b.wipeStream(rec.ID)
		out.Reset = true
	default:
		return Result{Value: StreamRegistered{ID: rec.ID, Mismatch: true}}
	}
	rec.SourceQueue, rec.HasSink, rec.SinkQueue, rec.ConfigHash, rec.UpdatedAt = c.SourceQueue, c.HasSink, c.SinkQueue, c.ConfigHash, st.Time
	b.set(keyspace.StreamQuery(c.Name), rec.Encode(nil))
	out.ID = rec.ID
	return Result{Value: out}
}

// StreamDeleteCmd removes a streaming query and all its state.
type StreamDeleteCmd struct{ Name string }

// Apply deletes the query. Value: bool, whether it existed.
func (c StreamDeleteCmd) Apply(b *Batch, _ Stamp) Result {
	rec, found, err := getStreamQuery(b.pb, c.Name)
	if err != nil {
		b.fail(err)
		return Result{Value: false, Err: err}
	}
	if found {
		b.wipeStream(rec.ID)
		b.del(keyspace.StreamQuery(c.Name))
		b.del(keyspace.StreamQueryID(rec.ID))
	}
	return Result{Value: found}
}

// wipeStream deletes every state row, ripeness entry and cycle memo of a
// query.
func (b *Batch) wipeStream(q ID) {
	for _, f := range []keyspace.Family{keyspace.FamilyStreamState, keyspace.FamilyStreamRipe, keyspace.FamilyStreamShard} {
		lo := keyspace.StreamShardPrefix(f, q, nil)
		hi := keyspace.PrefixEnd(lo)
		b.delRange(lo, hi)
		b.compact(lo, hi)
	}
}

// StateOp is one state change of a cycle: an upsert of Value at Key, or
// its deletion. WindowEnd is the value's top-level numeric windowEnd, which
// the edge read (ripe_at_or_before filters on it).
type StateOp struct {
	Delete       bool
	Key          string
	Value        []byte
	HasWindowEnd bool
	WindowEnd    float64
}

// CycleAck is the source ack of a cycle.
type CycleAck struct {
	TransactionID string
	Lease         ID // zero: no lease check
	Status        cursor.Status
	Count         int64
	Error         string
}

// Cycle is what a stream cycle does, but for its sink pushes.
type Cycle struct {
	QueryID     ID
	PartitionID ID
	Group       string // "" means QueueMode
	Ops         []StateOp
	Ack         *CycleAck
	// KeepLease is release_lease:false: the ack moves the cursor and the
	// lease stays until it expires (the gate's partial ack).
	KeepLease bool
	// Digest is the SHA-256 of the request body: a cycle byte-identical to
	// one the shard committed within the dedup window is answered with that
	// cycle's answer and not applied again (docs/decisions.md B10).
	Digest [32]byte
}

// StreamCycleCmd is a cycle as the edge builds it; the proposer prepares
// its pushes (Prepare) and proposes the *PreparedCycle.
type StreamCycleCmd struct {
	Cycle
	Items []PushItem
}

// Prepare prepares the sink pushes as PushCmd.Prepare does.
func (c StreamCycleCmd) Prepare(seed ID) (Command, error) {
	pc := &PreparedCycle{Cycle: c.Cycle}
	if len(c.Items) > 0 {
		p, err := PushCmd{Items: c.Items}.Prepare(seed)
		if err != nil {
			return nil, err
		}
		pc.Push = p.(*PreparedPush)
	}
	return pc, nil
}

// Apply prepares the cycle in the batch and applies it. Value:
// StreamCycleResult.
func (c StreamCycleCmd) Apply(b *Batch, st Stamp) Result {
	p, err := c.Prepare(st.Seed)
	if err != nil {
		return Result{Value: StreamCycleResult{}, Err: err}
	}
	return p.Apply(b, st)
}

// PreparedCycle is a cycle with its sink pushes prepared (nil: none).
type PreparedCycle struct {
	Cycle
	Push *PreparedPush
}

// StreamCycleResult is the answer of a cycle. A cycle that fails applies
// nothing and says why in Error; its counts are zero.
type StreamCycleResult struct {
	Success         bool
	Error           string
	QueueName       string // the source partition's queue ("" when unknown)
	StateOpsApplied int
	Pushes          []PushResult
	Ack             *CycleAckResult
	// Replayed says the answer is that of an identical cycle committed
	// before (docs/decisions.md B10): nothing was applied now.
	Replayed bool
}

// CycleAckResult reports a cycle's ack.
type CycleAckResult struct {
	Count         int64
	LeaseReleased bool
	DLQ           bool
}

// Cycle failure texts, as Queen words them (the SDKs show them).
const (
	errTextCycleLease   = "Invalid or expired lease"
	errTextCycleMessage = "Message not found"
	errTextCycleTxn     = "ack.transactionId is required"
	errTextCycleFailure = "Streaming cycle reported failure"
)

// cycleMemos is how many recent cycles a shard remembers for B10.
const cycleMemos = 8

// Apply runs the cycle: every check first, then the state operations in
// order, the sink pushes and the ack, so that a cycle that fails writes
// nothing. Value: StreamCycleResult; Err is ErrQueryNotFound for an
// unregistered query. It wakes the sink queues it pushed to and the source
// queue when the ack released the lease.
func (c *PreparedCycle) Apply(b *Batch, st Stamp) Result {
	now := st.Time
	res := StreamCycleResult{}
	if _, found, err := getStreamQueryName(b.pb, c.QueryID); err != nil || !found {
		if err != nil {
			b.fail(err)
		} else {
			err = ErrQueryNotFound
		}
		return Result{Value: res, Err: err}
	}
	p := b.e.parts[c.PartitionID]
	if p != nil {
		res.QueueName = p.q.name
	}
	memos, err := getStreamShard(b.pb, c.QueryID, c.PartitionID)
	if err != nil {
		b.fail(err)
		return Result{Value: res, Err: err}
	}
	window := int64(3600)
	if p != nil {
		window = p.q.config.Get(OptDedupWindowSeconds)
	}
	for i := range memos {
		if memos[i].Digest == c.Digest && now-memos[i].At <= window*secondUS {
			prev, err := decodeCycleResult(memos[i].Result)
			if err != nil {
				b.fail(err)
				return Result{Value: res, Err: err}
			}
			prev.Replayed = true
			return Result{Value: prev}
		}
	}
	group := c.Group
	if group == "" {
		group = QueueMode
	}
	fail := func(text string) Result {
		return Result{Value: StreamCycleResult{Error: text, QueueName: res.QueueName}}
	}

	// Checks: nothing is written before every part is known to apply.
	if c.Push != nil {
		for i := range c.Push.Items {
			if r := c.Push.Items[i].Reject; r != "" {
				return fail(fmt.Sprintf("push_items[%d]: %s", i, r))
			}
		}
	}
	var ackOff Offset
	if a := c.Ack; a != nil {
		if a.TransactionID == "" {
			return fail(errTextCycleTxn)
		}
		if p == nil {
			return fail(errTextCycleMessage)
		}
		rec, ok := b.lookupTxn(p.id, a.TransactionID)
		if !ok || rec.Offset < p.rec.Start {
			return fail(errTextCycleMessage)
		}
		ackOff = Offset(rec.Offset)
		if a.Lease != (ID{}) {
			r := p.cursors[group]
			if r == nil || r.rec.Lease != a.Lease || !r.leaseLive(now) {
				return fail(errTextCycleLease)
			}
		}
	}

	// Apply.
	for i := range c.Ops {
		if err := b.applyStateOp(c.QueryID, c.PartitionID, &c.Ops[i], now); err != nil {
			b.fail(err)
			return Result{Value: StreamCycleResult{}, Err: err}
		}
		res.StateOpsApplied++
	}
	m := &minter{seed: st.Seed}
	if c.Push != nil {
		res.Pushes = b.pushPrepared(now, m, c.Push)
	}
	var wake []string
	if c.Ack != nil {
		res.Ack = b.cycleAck(now, m, p, group, ackOff, c.Ack, c.KeepLease)
		if res.Ack.LeaseReleased || res.Ack.DLQ {
			wake = append(wake, p.q.name)
		}
	}
	res.Success = true
	memos = append(memos, keyspace.StreamCycleMemo{Digest: c.Digest, At: now, Result: encodeCycleResult(nil, &res)})
	if len(memos) > cycleMemos {
		memos = memos[len(memos)-cycleMemos:]
	}
	b.set(keyspace.StreamShard(c.QueryID, c.PartitionID), keyspace.EncodeStreamShard(nil, memos))
	r := pushResult(res.Pushes)
	r.Value = res
	for _, q := range wake {
		r.Wake = appendQueue(r.Wake, q)
	}
	return r
}

// applyStateOp upserts or deletes one state row, keeping its ripeness
// index entry in step.
func (b *Batch) applyStateOp(q, p ID, op *StateOp, now int64) error {
	key := keyspace.StreamState(q, p, op.Key)
	var old keyspace.StreamStateRecord
	found, err := get(b.pb, key, func(v []byte) (err error) {
		old, err = keyspace.DecodeStreamState(v)
		return err
	})
	if err != nil {
		return fmt.Errorf("engine: read stream state: %w", err)
	}
	if found && old.HasWindowEnd && (op.Delete || !op.HasWindowEnd || old.WindowEnd != op.WindowEnd) {
		b.del(keyspace.StreamRipe(q, p, old.WindowEnd, op.Key))
	}
	if op.Delete {
		if found {
			b.del(key)
		}
		return nil
	}
	value := op.Value
	if len(value) == 0 {
		value = []byte("{}")
	}
	rec := keyspace.StreamStateRecord{UpdatedAt: now, HasWindowEnd: op.HasWindowEnd, WindowEnd: op.WindowEnd, Value: value}
	b.set(key, rec.Encode(nil))
	if op.HasWindowEnd {
		b.set(keyspace.StreamRipe(q, p, op.WindowEnd, op.Key), nil)
	}
	return nil
}

// cycleAck applies a cycle's ack at offset off of p for group (checked by
// the caller): completed moves the cursor to off (never back: a backward
// move would deliver again what the group consumed) and adds Count to the
// group's consumed total, releasing the lease unless keep; failed and dlq
// dead-letter the message, move the cursor onto it and release the lease.
// A group without a cursor row on p gets one at off, without a lease. A
// lease kept over a batch the ack completed is released all the same: it
// would lease nothing.
func (b *Batch) cycleAck(now int64, m *minter, p *partition, group string, off Offset, a *CycleAck, keep bool) *CycleAckResult {
	r := p.cursors[group]
	if r == nil {
		r = b.newRow(p, group, off, now)
	}
	out := &CycleAckResult{}
	switch a.Status {
	case cursor.Completed:
		count := a.Count
		if count <= 0 {
			count = 1
		}
		r.rec.Committed = max(r.rec.Committed, int64(off))
		r.rec.TotalConsumed += count
		r.rec.LastConsumedAt = now
		out.Count = count
		if !keep || r.rec.Lease == (ID{}) || r.rec.Committed >= r.rec.BatchEnd {
			r.rec.RetryCount, r.rec.AttemptOffset, r.rec.AttemptCount = 0, -1, 0
			if r.rec.Lease != (ID{}) {
				b.setLease(r, ID{}, 0, 0)
			}
			out.LeaseReleased = !keep || r.rec.Lease == (ID{})
		}
	default: // Failed, DeadLetter (the edge sends no other status)
		text := a.Error
		if text == "" {
			text = errTextCycleFailure
		}
		filed, err := b.fileDeadLetter(now, m, r, off, text, 0, r.rec.AttemptCount)
		if err != nil {
			b.fail(err)
		}
		r.rec.Committed = max(r.rec.Committed, int64(off))
		r.rec.RetryCount, r.rec.AttemptOffset, r.rec.AttemptCount = 0, -1, 0
		if r.rec.Lease != (ID{}) {
			b.setLease(r, ID{}, 0, 0)
		}
		out.DLQ = filed
	}
	b.touchRow(r)
	return out
}

// StreamQuery is a registered query as read.
type StreamQuery struct {
	keyspace.StreamQueryRecord
	Name string
}

// StreamQueryByID returns a registered query (false when the id is not
// registered).
func (e *Engine) StreamQueryByID(id ID) (StreamQuery, bool, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return StreamQuery{}, false, err
	}
	name, found, err := getStreamQueryName(e.db, id)
	if err != nil || !found {
		return StreamQuery{}, false, err
	}
	rec, found, err := getStreamQuery(e.db, name)
	return StreamQuery{StreamQueryRecord: rec, Name: name}, found, err
}

// StateFilter selects the state rows of one shard (docs/api.md §14.2,
// state/get): all given filters apply together.
type StateFilter struct {
	QueryID, PartitionID ID
	Keys                 []string // non-empty: only these keys
	Prefix               string   // non-empty: only keys starting with it
	HasRipe              bool     // only rows whose windowEnd is at or before Ripe
	Ripe                 float64
}

// StateRow is one state row as read.
type StateRow struct {
	Key       string
	Value     []byte
	UpdatedAt int64
}

// StreamState returns the rows of a shard that pass f, sorted by key (byte
// order). The ripeness filter reads the ripeness index, the prefix filter a
// key range, the keys filter one lookup each: no filter scans the whole
// query.
func (e *Engine) StreamState(f StateFilter) ([]StateRow, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return nil, err
	}
	q, p := f.QueryID, f.PartitionID
	var keys []string
	switch {
	case len(f.Keys) > 0:
		keys = slices.Clone(f.Keys)
		slices.Sort(keys)
		keys = slices.Compact(keys)
	case f.HasRipe:
		lo := keyspace.StreamShardPrefix(keyspace.FamilyStreamRipe, q, &p)
		hi := keyspace.PrefixEnd(keyspace.StreamRipe(q, p, f.Ripe, "")[:41])
		err := scanRange(e.db, lo, hi, func(k, _ []byte) error {
			_, key, err := keyspace.ParseStreamRipe(k)
			keys = append(keys, key)
			return err
		})
		if err != nil {
			return nil, err
		}
		slices.Sort(keys)
	default:
		var rows []StateRow
		prefix := keyspace.StreamState(q, p, f.Prefix)
		err := scanPrefix(e.db, prefix, func(k, v []byte) error {
			return appendStateRow(&rows, k, v)
		})
		return rows, err
	}
	var rows []StateRow
	for _, key := range keys {
		if f.Prefix != "" && !strings.HasPrefix(key, f.Prefix) {
			continue
		}
		k := keyspace.StreamState(q, p, key)
		_, err := get(e.db, k, func(v []byte) error {
			rec, err := keyspace.DecodeStreamState(v)
			if err != nil {
				return err
			}
			// A key asked for by name passes the ripeness filter only with
			// a ripe windowEnd (the index lists exactly those).
			if !f.HasRipe || rec.HasWindowEnd && rec.WindowEnd <= f.Ripe {
				rows = append(rows, StateRow{Key: key, Value: bytes.Clone(rec.Value), UpdatedAt: rec.UpdatedAt})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return rows, nil
}

func appendStateRow(rows *[]StateRow, k, v []byte) error {
	key, err := keyspace.StreamStateKey(k)
	if err != nil {
		return err
	}
	rec, err := keyspace.DecodeStreamState(v)
	if err != nil {
		return err
	}
	*rows = append(*rows, StateRow{Key: key, Value: bytes.Clone(rec.Value), UpdatedAt: rec.UpdatedAt})
	return nil
}

func getStreamQuery(r pebble.Reader, name string) (keyspace.StreamQueryRecord, bool, error) {
	var rec keyspace.StreamQueryRecord
	found, err := get(r, keyspace.StreamQuery(name), func(v []byte) (err error) {
		rec, err = keyspace.DecodeStreamQuery(v)
		return err
	})
	return rec, found, err
}

func getStreamQueryName(r pebble.Reader, id ID) (string, bool, error) {
	var name string
	found, err := get(r, keyspace.StreamQueryID(id), func(v []byte) error {
		name = string(v)
		return nil
	})
	return name, found, err
}

func getStreamShard(r pebble.Reader, q, p ID) ([]keyspace.StreamCycleMemo, error) {
	var memos []keyspace.StreamCycleMemo
	_, err := get(r, keyspace.StreamShard(q, p), func(v []byte) (err error) {
		memos, err = keyspace.DecodeStreamShard(bytes.Clone(v))
		return err
	})
	return memos, err
}

// encodeCycleResult is a cycle's answer as a shard memo stores it.
func encodeCycleResult(dst []byte, r *StreamCycleResult) []byte {
	w := wire.Writer{B: dst}
	w.Str(r.QueueName)
	w.Uvarint(uint64(r.StateOpsApplied))
	w.Uvarint(uint64(len(r.Pushes)))
	for i := range r.Pushes {
		p := &r.Pushes[i]
		w.U8(uint8(p.Status))
		w.Str(p.TransactionID)
		w.ID(p.MessageID)
		w.ID(p.PartitionID)
		w.Str(p.Queue)
		w.Str(p.Partition)
	}
	w.Bool(r.Ack != nil)
	if r.Ack != nil {
		w.Varint(r.Ack.Count)
		w.Bool(r.Ack.LeaseReleased)
		w.Bool(r.Ack.DLQ)
	}
	return w.B
}

func decodeCycleResult(b []byte) (StreamCycleResult, error) {
	r := wire.NewReader(b, ErrCorrupt, "cycle result")
	res := StreamCycleResult{Success: true, QueueName: r.Str(), StateOpsApplied: int(r.Uvarint())}
	if n := r.Count(36); n > 0 {
		res.Pushes = make([]PushResult, n)
		for i := range res.Pushes {
			res.Pushes[i] = PushResult{Status: PushStatus(r.U8()), TransactionID: r.Str(), MessageID: r.ID(),
				PartitionID: r.ID(), Queue: r.Str(), Partition: r.Str()}
		}
	}
	if r.Bool() {
		res.Ack = &CycleAckResult{Count: r.Varint(), LeaseReleased: r.Bool(), DLQ: r.Bool()}
	}
	return res, r.Done()
}
