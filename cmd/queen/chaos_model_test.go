package main

// The checker of the fault-schedule test (chaos_test.go): a sequential model
// of what the API promises one consumer group on one partition, which
// porcupine checks the recorded history against, one partition at a time.
//
// The model's state is small on purpose, so that porcupine's search stays
// cheap. It does not hold the partition's log: the log's final order is read
// after the run (the audit: a fresh group pops every partition with autoAck),
// and the model only counts how much of that order has been appended. A push
// answered queued must append exactly the next audited ids; an audited id
// that no push appended, or a queued push the audit lacks, leaves the final
// operation unable to step. So "the log is this order, and every queued push
// is in it once" is checked by the same search that orders the operations.
//
// Operations whose outcome the client does not know (a timeout, a 5xx after
// the command may have been proposed) return at +infinity: porcupine may
// place them anywhere after their call, and placing one after everything else
// is how "it never happened" is expressed. Their step applies them if they
// can apply at that point and is a no-op otherwise, so the model stays
// deterministic.
//
// Reads are operations of the model too: GET
// /api/v1/messages/{partitionId}/{transactionId}, sent through any node,
// followers included, with the default (linearizable) consistency. Of its
// answer the model predicts two bits from the state it already keeps: the
// message exists (200, not 404) exactly when its audited offset has been
// appended, and group g has consumed it (consumerGroups[g].consumed)
// exactly when that offset is at or below the cursor. A stale replica shows
// up as an answer older than a push or an ack that completed before the read
// was called. We chose this read over the consumer group's lag or the
// queue's counts because both bits are exact functions of (n, committed) for
// one partition, so porcupine checks it per partition like everything else,
// and because every read is a real request on the read-index path. A read
// changes nothing: one whose answer was lost is left out.
//
// What the model does not see, and so never checks: wall-clock lease expiry
// beyond the bounds the recorded times give (an expired lease may be taken
// over, an ack may be refused for expiry), and pops that delivered nothing.
// Those are still answered from the leader's applied state without a read
// index (raft/broker.go ready: PopCmd.Skip answers a pop the applied state
// shows empty before anything is proposed, and a leader deposed a moment
// ago, or elected a moment ago, may not have applied what the other
// answered), and a live lease or a long-poll deadline also answers 204. Loss
// is caught by the final operation instead: after the drain every audited
// message must be at or below the group's cursor.
//
// A push item answered failed was not stored by that request (docs/api.md:
// failed only when certainly not stored): the model appends nothing for it.
// If the log holds it anyway, some other attempt of the same batch must have
// stored it, or the final operation cannot step; the checker also counts
// such items apart (failed-but-stored, chaos_check_test.go).

import (
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

type opKind uint8

const (
	opPush opKind = iota
	opPop
	opAck
	opFinal
	opRead
)

func (k opKind) String() string {
	return [...]string{"push", "pop", "ack", "final", "read"}[k]
}

// mInput is an operation's input as the model sees it.
type mInput struct {
	kind opKind
	part string // partition name: what porcupine partitions by
	// push: the audited offset of each item (-1: the log does not hold it);
	// ack: the audited offset of each acked id; read: the audited offset
	// of the id read (one), -1 when the log does not hold it.
	pos []int
	// ack: each item's status (completed, failed or retry).
	status []string
	batch  int    // pop: the batch size asked for
	lease  string // ack: the lease the items carry
	// Wall-clock µs of the call and the answer (math.MaxInt64 when unknown):
	// the broker stamps leases with the leader's clock, the same machine's.
	callUS, retUS int64
	logLen        int // final: the audited log's length
	op            *chaosOp
}

// mOutput is what the client was told.
type mOutput struct {
	unknown bool
	pushed  []string // push: each item's status, queued or duplicate
	lease   string   // pop: the lease of the delivery
	pos     []int    // pop: the audited offsets delivered, in order
	// ack: every item refused with "invalid or expired lease" (nothing
	// changed), else each item's outcome.
	leaseRejected bool
	acks          []ackOutcome
	// read: the message exists, and group g has consumed it.
	found, consumed bool
}

type ackOutcome struct {
	success, noop, dlq bool
	err                string
}

// partState is the model's state of one (partition, group).
type partState struct {
	n         int    // how many audited messages are appended
	committed int    // the group's cursor: the last consumed offset, -1 for none
	lease     string // the lease the last delivery took, "" once released
	batchEnd  int    // the last offset of that delivery
	retries   int    // the retry budget consumed (batch_retry_count)
	// Bounds on the lease's expiry from the times the client saw: its pop's
	// call and answer, plus the lease length.
	liveUntil, deadAfter int64
}

// chaosModelParams are what the model needs to know of the queue.
type chaosModelParams struct {
	retryLimit int           // the queue's retryLimit
	lease      time.Duration // every pop's leaseSeconds
	// slack absorbs clock reads in two processes when a lease bound is
	// compared with a recorded time.
	slack time.Duration
}

func chaosModel(p chaosModelParams) porcupine.Model {
	return porcupine.Model{
		Partition: partitionOps,
		Init:      func() any { return partState{committed: -1, batchEnd: -1} },
		Step: func(state, input, output any) (bool, any) {
			next, why := p.step(state.(partState), input.(*mInput), output.(*mOutput))
			return why == "", next
		},
		Hash: func(state any) uint64 {
			s := state.(partState)
			h := fnv.New64a()
			fmt.Fprint(h, s.n, s.committed, s.lease, s.batchEnd, s.retries, s.liveUntil, s.deadAfter)
			return h.Sum64()
		},
		DescribeOperation: func(input, output any) string { return describeOp(input.(*mInput), output.(*mOutput)) },
		DescribeState:     func(state any) string { return fmt.Sprintf("%+v", state.(partState)) },
	}
}

// partitionOps splits a history by queue partition: the model is one
// (partition, group), and partitions promise nothing to each other.
func partitionOps(history []porcupine.Operation) [][]porcupine.Operation {
	index := map[string]int{}
	var parts [][]porcupine.Operation
	for _, op := range history {
		name := op.Input.(*mInput).part
		i, ok := index[name]
		if !ok {
			i = len(parts)
			index[name] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

// step applies one operation; why is "" when the model allows it, else the
// promise it breaks.
func (p chaosModelParams) step(s partState, in *mInput, out *mOutput) (partState, string) {
	switch in.kind {
	case opPush:
		return p.push(s, in, out)
	case opPop:
		return p.pop(s, in, out)
	case opAck:
		return p.ack(s, in, out)
	case opRead:
		return s, read(s, in, out)
	case opFinal:
		switch {
		case s.n != in.logLen:
			return s, fmt.Sprintf("the log holds %d messages but pushes appended %d", in.logLen, s.n)
		case s.committed != in.logLen-1:
			return s, fmt.Sprintf("after the drain the cursor is at %d of %d messages: offsets %d.. were never consumed", s.committed, in.logLen, s.committed+1)
		}
		return s, ""
	}
	return s, "unknown operation"
}

// push: queued appends the next audited id (dedup: the id is not in the log
// yet); duplicate names an id already appended. Items of one request to one
// partition are appended together, in request order.
func (p chaosModelParams) push(s partState, in *mInput, out *mOutput) (partState, string) {
	n := s.n
	if out.unknown {
		// Applied here in full, or not here (then as a duplicate, or never).
		for _, pos := range in.pos {
			switch {
			case pos >= 0 && pos < s.n:
			case pos == n:
				n++
			default:
				return s, ""
			}
		}
		s.n = n
		return s, ""
	}
	for i, st := range out.pushed {
		pos := in.pos[i]
		switch st {
		case "queued":
			if pos != n {
				if pos < 0 {
					return s, fmt.Sprintf("item %d answered queued is not in the log", i)
				}
				return s, fmt.Sprintf("item %d answered queued is at offset %d, but the next offset is %d", i, pos, n)
			}
			n++
		case "duplicate":
			if pos < 0 || pos >= n {
				return s, fmt.Sprintf("item %d answered duplicate (offset %d) was not pushed before (%d appended)", i, pos, n)
			}
		case "failed":
			// Not stored by this request: nothing appended.
		default:
			return s, fmt.Sprintf("item %d answered %q", i, st)
		}
	}
	s.n = n
	return s, ""
}

// read: a message read (see the top of the file) sees every append and
// every cursor move before it, and nothing after.
func read(s partState, in *mInput, out *mOutput) string {
	pos := in.pos[0]
	found, consumed := pos >= 0 && pos < s.n, pos >= 0 && pos <= s.committed
	switch {
	case out.found != found:
		return fmt.Sprintf("read offset %d: found=%v, but %d messages are appended", pos, out.found, s.n)
	case out.consumed != consumed:
		return fmt.Sprintf("read offset %d: consumed=%v, but the cursor is at %d", pos, out.consumed, s.committed)
	}
	return ""
}

// pop: a delivery is the span right after the cursor, as long as the batch
// and the log allow (everything appended before the pop is visible to it),
// under a lease no other live lease shares.
func (p chaosModelParams) pop(s partState, in *mInput, out *mOutput) (partState, string) {
	k := len(out.pos)
	for i, pos := range out.pos {
		if pos != s.committed+1+i {
			return s, fmt.Sprintf("delivered offset %d at place %d; FIFO from cursor %d wants %d", pos, i, s.committed, s.committed+1+i)
		}
	}
	if s.committed+k >= s.n {
		return s, fmt.Sprintf("delivered up to offset %d, but only %d messages are appended", s.committed+k, s.n)
	}
	if want := min(in.batch, s.n-s.committed-1); k != want {
		return s, fmt.Sprintf("delivered %d messages, but batch %d and %d pending messages make %d", k, in.batch, s.n-s.committed-1, want)
	}
	if s.lease != "" && in.retUS+p.slack.Microseconds() < s.liveUntil {
		return s, fmt.Sprintf("took the partition while lease %s was live (until at least +%dµs after this pop answered)",
			short(s.lease), s.liveUntil-in.retUS)
	}
	lease := p.lease.Microseconds()
	s.lease, s.batchEnd = out.lease, s.committed+k
	s.liveUntil, s.deadAfter = in.callUS+lease, in.retUS+lease
	return s, ""
}

// ack: see clamp. An ack is refused, changing nothing, when its lease is not
// the current one or has expired; it succeeds only with the current lease,
// before the lease can have expired.
func (p chaosModelParams) ack(s partState, in *mInput, out *mOutput) (partState, string) {
	valid := s.lease != "" && s.lease == in.lease
	slack := p.slack.Microseconds()
	switch {
	case out.unknown:
		if valid && in.callUS < s.deadAfter+slack {
			next, _ := p.clamp(s, in)
			return next, ""
		}
		return s, ""
	case out.leaseRejected:
		if valid && in.retUS+slack < s.liveUntil {
			return s, fmt.Sprintf("refused for its lease, but lease %s is the current one and live until at least +%dµs after the answer",
				short(in.lease), s.liveUntil-in.retUS)
		}
		return s, ""
	case !valid:
		cur := "none (released)"
		if s.lease != "" {
			cur = short(s.lease)
		}
		return s, fmt.Sprintf("succeeded with lease %s, but the current lease is %s", short(in.lease), cur)
	case in.callUS > s.deadAfter+slack:
		return s, fmt.Sprintf("succeeded with lease %s, which expired at least %dµs before the ack was sent", short(in.lease), in.callUS-s.deadAfter)
	}
	next, want := p.clamp(s, in)
	for i, w := range want {
		g := out.acks[i]
		if g.success != w.success || g.noop != w.noop || g.dlq != w.dlq {
			return s, fmt.Sprintf("item %d (offset %d, %s) answered success=%v noop=%v dlq=%v, the clamp says success=%v noop=%v dlq=%v",
				i, in.pos[i], in.status[i], g.success, g.noop, g.dlq, w.success, w.noop, w.dlq)
		}
	}
	return next, ""
}

// clamp is docs/semantics.md §6.3 restated for one ack call that holds the current
// lease: the lowest failed or retry offset in the leased span is the head
// signal; the cursor moves to the highest completed offset below it (or the
// highest completed one when there is none), completing the silent gaps
// below; a failure is charged to the budget while it lasts and then
// dead-lettered (the cursor moves onto it); reaching the batch end, a signal
// or a dead letter releases the lease.
func (p chaosModelParams) clamp(s partState, in *mInput) (partState, []ackOutcome) {
	rank := map[string]int{"retry": 1, "failed": 2}
	head, poison := -1, -1
	for i, pos := range in.pos {
		st := in.status[i]
		if st == "completed" || pos <= s.committed || pos > s.batchEnd {
			continue
		}
		if head < 0 || pos < poison || (pos == poison && rank[st] > rank[in.status[head]]) {
			head, poison = i, pos
		}
	}
	want := make([]ackOutcome, len(in.pos))
	prefix := s.committed
	for i, pos := range in.pos {
		completed := in.status[i] == "completed"
		switch {
		case pos <= s.committed:
			want[i] = ackOutcome{success: completed, noop: completed}
		case pos > s.batchEnd:
		case head >= 0 && pos > poison:
			want[i].success = true // superseded: redelivered, answered success as Queen does
		default:
			want[i].success = true
			if completed && pos > prefix && (head < 0 || pos < poison) {
				prefix = pos
			}
		}
	}
	next := s
	next.committed = prefix
	release := true
	switch {
	case head < 0 && (prefix == s.committed || prefix < s.batchEnd):
		release = false // nothing moved, or a partial commit: the lease stays
	case head < 0:
		next.retries = 0 // the batch is complete
	case in.status[head] == "retry":
	case s.retries < p.retryLimit:
		next.retries++
	default:
		next.committed, next.retries = poison, 0
		want[head].dlq = true
	}
	if release {
		next.lease, next.batchEnd = "", -1
		next.liveUntil, next.deadAfter = 0, 0
	}
	return next, want
}

func short(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	return id
}

func describeOp(in *mInput, out *mOutput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", in.kind)
	if in.op != nil {
		fmt.Fprintf(&b, "#%d c%d via %s", in.op.id, in.op.client, in.op.node)
	}
	switch in.kind {
	case opPush:
		fmt.Fprintf(&b, " offsets %v", in.pos)
		if out.unknown {
			b.WriteString(" -> unknown")
		} else {
			fmt.Fprintf(&b, " -> %v", out.pushed)
		}
	case opPop:
		fmt.Fprintf(&b, " batch %d -> lease %s offsets %v", in.batch, short(out.lease), out.pos)
	case opAck:
		fmt.Fprintf(&b, " lease %s", short(in.lease))
		for i := range in.pos {
			fmt.Fprintf(&b, " %d:%s", in.pos[i], in.status[i])
		}
		switch {
		case out.unknown:
			b.WriteString(" -> unknown")
		case out.leaseRejected:
			b.WriteString(" -> lease refused")
		default:
			b.WriteString(" ->")
			for _, a := range out.acks {
				fmt.Fprintf(&b, " {ok=%v noop=%v dlq=%v}", a.success, a.noop, a.dlq)
			}
		}
	case opRead:
		fmt.Fprintf(&b, " offset %d -> found=%v consumed=%v", in.pos[0], out.found, out.consumed)
	case opFinal:
		fmt.Fprintf(&b, " log length %d", in.logLen)
	}
	return b.String()
}

// verdict is the checker's answer for one partition.
type verdict struct {
	part   string
	result porcupine.CheckResult
	ops    int
	took   time.Duration
	report string // for an illegal partition: why, and its history
}

// checkPartitions runs porcupine on every partition of history (split by
// the model's Partition function) in parallel, each bounded by timeout. A
// partition found illegal is checked again verbosely for its report.
func checkPartitions(model porcupine.Model, params chaosModelParams, history []porcupine.Operation, timeout time.Duration, workers int) []verdict {
	parts := model.Partition(history)
	out := make([]verdict, len(parts))
	sem := make(chan struct{}, max(workers, 1))
	done := make(chan struct{})
	for i, part := range parts {
		go func() {
			sem <- struct{}{}
			defer func() { <-sem; done <- struct{}{} }()
			start := time.Now()
			res := porcupine.CheckOperationsTimeout(model, part, timeout)
			out[i] = verdict{part: part[0].Input.(*mInput).part, result: res, ops: len(part), took: time.Since(start)}
			if res == porcupine.Illegal {
				out[i].report = explainIllegal(model, params, part, timeout)
			}
		}()
	}
	for range parts {
		<-done
	}
	sort.Slice(out, func(i, j int) bool { return out[i].part < out[j].part })
	return out
}

// explainIllegal names why a partition's history is illegal: the longest
// prefix porcupine could linearize, the state it reaches, and why each
// operation it could not place next fails there.
func explainIllegal(model porcupine.Model, p chaosModelParams, part []porcupine.Operation, timeout time.Duration) string {
	_, info := porcupine.CheckOperationsVerbose(model, part, timeout)
	var longest []porcupine.Operation
	for _, lin := range info.PartialLinearizationsOperations() {
		for _, l := range lin {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	var b strings.Builder
	state := model.Init().(partState)
	placed := map[*mInput]bool{}
	fmt.Fprintf(&b, "longest linearizable prefix (%d of %d operations):\n", len(longest), len(part))
	for _, op := range longest {
		state, _ = p.step(state, op.Input.(*mInput), op.Output.(*mOutput))
		placed[op.Input.(*mInput)] = true
		fmt.Fprintf(&b, "  %s\n", describeOp(op.Input.(*mInput), op.Output.(*mOutput)))
	}
	fmt.Fprintf(&b, "state after it: %+v\noperations that cannot come next:\n", state)
	for _, op := range part {
		in := op.Input.(*mInput)
		if placed[in] {
			continue
		}
		if _, why := p.step(state, in, op.Output.(*mOutput)); why != "" {
			fmt.Fprintf(&b, "  %s: %s\n", describeOp(in, op.Output.(*mOutput)), why)
		}
	}
	b.WriteString("the partition's history by call time:\n")
	sorted := append([]porcupine.Operation(nil), part...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	t0 := sorted[0].Call
	for _, op := range sorted {
		ret := "unknown"
		if op.Return != math.MaxInt64 {
			ret = fmt.Sprintf("%.3fs", float64(op.Return-t0)/1e9)
		}
		fmt.Fprintf(&b, "  [%.3fs, %s] %s\n", float64(op.Call-t0)/1e9, ret, describeOp(op.Input.(*mInput), op.Output.(*mOutput)))
	}
	return b.String()
}
