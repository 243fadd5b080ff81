package command

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/internal/wire"
)

// A command relayed to its group's leader (package cluster) comes back as
// its result: the leader answers the Value the command's Apply returned,
// encoded by the answer in the command's row. The reader knows the command
// it sent, so a result carries no type of its own. These bytes cross nodes
// and are never stored: a node reads those of its own version or the next,
// and a change needs a new cluster route rather than a version byte.
//
//	[]PushResult    n uvarint | n × PushResult
//	PushResult      status u8 | message id | partition id | txn str | queue str | reject str
//	                (reject: a Rejected item's reason, "" otherwise)
//	[]AckResult     n uvarint | n × (txn str | flags u8 | error str | queue str | partition str)
//	                flags: 1 success, 2 noop, 4 lease released, 8 dlq, 16 dropped
//	ReplayResult    queue str | partition str | rows removed varint | PushResult
//	GroupDeleted    cursors varint | metadata u8
//	int             varint (a count)
//	uint32          uvarint (a group)
//	bool            u8 (a lookup's "found")
//	struct{}        nothing (an announce: done)
//	ImportResult    next uvarint | done u8
//	TxResult        id | success u8 | error str | []PushResult | []AckResult
//	                (its Outbox is not carried: only an OutboxTxCmd fills
//	                it, and that is never relayed)

// answer is how a row's result crosses nodes; the zero answer
// (notRelayed) says the command is only ever answered by the node that
// proposed it: a request that needs it elsewhere is forwarded whole.
type answer struct {
	goType reflect.Type
	append func(w *wire.Writer, v any)
	read   func(r *wire.Reader) any
}

// answers makes the answer of a command whose Value is a V.
func answers[V any](write func(*wire.Writer, V), read func(*wire.Reader) V) answer {
	return answer{goType: reflect.TypeFor[V](),
		append: func(w *wire.Writer, v any) { write(w, v.(V)) },
		read:   func(r *wire.Reader) any { return read(r) }}
}

var (
	notRelayed          answer
	answersPush         = answers(appendPushResults, readPushResults)
	answersAck          = answers(appendAckResults, readAckResults)
	answersReplay       = answers(appendReplayResult, readReplayResult)
	answersTx           = answers(appendTxResult, readTxResult)
	answersGroupDeleted = answers(func(w *wire.Writer, v engine.GroupDeleted) { w.Varint(int64(v.Cursors)); w.Bool(v.Metadata) },
		func(r *wire.Reader) engine.GroupDeleted {
			return engine.GroupDeleted{Cursors: int(r.Varint()), Metadata: r.Bool()}
		})
	answersCount = answers(func(w *wire.Writer, v int) { w.Varint(int64(v)) }, func(r *wire.Reader) int { return int(r.Varint()) })
	answersGroup = answers(func(w *wire.Writer, v uint32) { w.Uvarint(uint64(v)) },
		func(r *wire.Reader) uint32 { return uint32(r.Uvarint()) })
	answersFound   = answers(func(w *wire.Writer, v bool) { w.Bool(v) }, func(r *wire.Reader) bool { return r.Bool() })
	answersNothing = answers(func(*wire.Writer, struct{}) {}, func(*wire.Reader) struct{} { return struct{}{} })
)

// Row describes one row of the command table.
type Row struct {
	Type    Type
	Command reflect.Type
	// Result is the type of the Value the row's result codec carries
	// between nodes; nil for a command that is never relayed.
	Result reflect.Type
}

// Rows lists the command table in its order.
func Rows() []Row {
	rows := make([]Row, len(codecs))
	for i, c := range codecs {
		rows[i] = Row{Type: c.typ, Command: c.goType, Result: c.result.goType}
	}
	return rows
}

// Relayable reports whether c may be relayed to its group's leader: its row
// has a result codec.
func Relayable(c engine.Command) bool {
	k := byGoType[reflect.TypeOf(c)]
	return k != nil && k.result.append != nil
}

// AppendResult appends the result v of a command of type t, as the leader
// answers a relayed command. A type whose row has no result codec, or a v
// of another type than the row's, is ErrNotRelayed.
func AppendResult(dst []byte, t Type, v any) ([]byte, error) {
	k := byType[t]
	if k == nil || k.result.append == nil {
		return nil, fmt.Errorf("%w: type %d", ErrNotRelayed, t)
	}
	if reflect.TypeOf(v) != k.result.goType {
		return nil, fmt.Errorf("%w: type %d answered %T, want %v", ErrNotRelayed, t, v, k.result.goType)
	}
	w := wire.Writer{B: dst}
	k.result.append(&w, v)
	return w.B, nil
}

// ReadResult decodes what AppendResult wrote for type t.
func ReadResult(t Type, b []byte) (any, error) {
	k := byType[t]
	if k == nil || k.result.read == nil {
		return nil, fmt.Errorf("%w: type %d", ErrNotRelayed, t)
	}
	r := wire.NewReader(b, ErrCorrupt, "result")
	v := k.result.read(r)
	if err := r.Done(); err != nil {
		return nil, err
	}
	return v, nil
}

func appendPushResults(w *wire.Writer, res []engine.PushResult) {
	w.Uvarint(uint64(len(res)))
	for i := range res {
		appendPushResult(w, &res[i])
	}
}

// rejectPrefix is what the engine puts before a rejected item's reason
// (engine/push.go), given back on reading.
var rejectPrefix = engine.ErrInvalid.Error() + ": "

func appendPushResult(w *wire.Writer, r *engine.PushResult) {
	w.U8(uint8(r.Status))
	w.ID(r.MessageID)
	w.ID(r.PartitionID)
	w.Str(r.TransactionID)
	w.Str(r.Queue)
	reject := ""
	if r.Status == engine.Rejected {
		reject = "rejected"
		if r.Err != nil {
			reject = strings.TrimPrefix(r.Err.Error(), rejectPrefix)
		}
	}
	w.Str(reject)
}

func readPushResults(r *wire.Reader) []engine.PushResult {
	res := make([]engine.PushResult, r.Count(36))
	for i := range res {
		readPushResult(r, &res[i])
	}
	return res
}

func readPushResult(r *wire.Reader, p *engine.PushResult) {
	p.Status = engine.PushStatus(r.U8())
	p.MessageID = r.ID()
	p.PartitionID = r.ID()
	p.TransactionID = r.Str()
	p.Queue = r.Str()
	if reject := r.Str(); p.Status == engine.Rejected {
		p.Err = fmt.Errorf("%w: %s", engine.ErrInvalid, reject)
	}
	if p.Status > engine.Rejected {
		r.Fail("push status %d", p.Status)
	}
}

func appendAckResults(w *wire.Writer, res []engine.AckResult) {
	w.Uvarint(uint64(len(res)))
	for i := range res {
		a := &res[i]
		w.Str(a.TransactionID)
		w.U8(bit(a.Success, 1) | bit(a.Noop, 2) | bit(a.LeaseReleased, 4) | bit(a.DLQ, 8) | bit(a.Dropped, 16))
		w.Str(a.Error)
		w.Str(a.Queue)
		w.Str(a.Partition)
	}
}

func readAckResults(r *wire.Reader) []engine.AckResult {
	res := make([]engine.AckResult, r.Count(5))
	for i := range res {
		a := &res[i]
		a.TransactionID = r.Str()
		f := r.U8()
		a.Success, a.Noop, a.LeaseReleased, a.DLQ, a.Dropped = f&1 != 0, f&2 != 0, f&4 != 0, f&8 != 0, f&16 != 0
		a.Error, a.Queue, a.Partition = r.Str(), r.Str(), r.Str()
	}
	return res
}

func bit(b bool, mask uint8) uint8 {
	if b {
		return mask
	}
	return 0
}

func appendReplayResult(w *wire.Writer, v engine.ReplayResult) {
	w.Str(v.Queue)
	w.Str(v.Partition)
	w.Varint(int64(v.RowsRemoved))
	appendPushResult(w, &v.Push)
}

func readReplayResult(r *wire.Reader) engine.ReplayResult {
	v := engine.ReplayResult{Queue: r.Str(), Partition: r.Str(), RowsRemoved: int(r.Varint())}
	readPushResult(r, &v.Push)
	return v
}

func appendTxResult(w *wire.Writer, v engine.TxResult) {
	w.ID(v.ID)
	w.Bool(v.Success)
	w.Str(v.Error)
	appendPushResults(w, v.Pushes)
	appendAckResults(w, v.Acks)
}

func readTxResult(r *wire.Reader) engine.TxResult {
	v := engine.TxResult{ID: r.ID(), Success: r.Bool(), Error: r.Str()}
	// None reads back nil, as a failed transaction answers them.
	if v.Pushes = readPushResults(r); len(v.Pushes) == 0 {
		v.Pushes = nil
	}
	if v.Acks = readAckResults(r); len(v.Acks) == 0 {
		v.Acks = nil
	}
	return v
}

// EntryType is the type of the one command a relayed entry holds
// (Single).
func EntryType(entry []byte) (Type, error) {
	t, _, err := Single(entry)
	return t, err
}

// Single reads the header of an entry that holds exactly one command, of
// a type the table lists, without decoding its body: the command's type
// and bytes (type | time | seed | body), which alias entry.
func Single(entry []byte) (Type, []byte, error) {
	if len(entry) < 2 || entry[0] != magic {
		return 0, nil, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	if entry[1] != version {
		return 0, nil, fmt.Errorf("%w: %d", ErrVersion, entry[1])
	}
	r := wire.NewReader(entry[2:], ErrCorrupt, "entry")
	if n := r.Uvarint(); r.Err() == nil && n != 1 {
		r.Fail("%d commands, want one", n)
	}
	body := r.Bytes()
	if err := r.Done(); err != nil {
		return 0, nil, err
	}
	if len(body) < stampLen+1 || byType[body[0]] == nil {
		return 0, nil, fmt.Errorf("%w: not a command of a known type", ErrCorrupt)
	}
	return Type(body[0]), body, nil
}

// stampLen is the stamp's bytes after a command's type: time i64 | seed.
const stampLen = 8 + 16
