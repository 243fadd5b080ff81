package main

// The fault-schedule test's checks (chaos_test.go): the history handed to
// porcupine, and the invariants checked by counting.

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// check runs porcupine and the invariants over the recorded history, and
// fails the test with the seed on any violation.
func (r *chaosRun) check() {
	t := r.t
	params := chaosModelParams{retryLimit: r.cfg.retryLimit, lease: r.cfg.lease, slack: 250 * time.Millisecond}
	model := chaosModel(params)
	history := r.porcupineHistory()
	start := time.Now()
	verdicts := checkPartitions(model, params, history, r.cfg.checkTimeout, runtime.GOMAXPROCS(0))
	var ok, illegal, inconclusive []verdict
	maxOps := 0
	for _, v := range verdicts {
		maxOps = max(maxOps, v.ops)
		switch v.result {
		case porcupine.Ok:
			ok = append(ok, v)
		case porcupine.Illegal:
			illegal = append(illegal, v)
		default:
			inconclusive = append(inconclusive, v)
		}
	}
	t.Logf("CHAOS %s", r.summary())
	t.Logf("porcupine: %d operations in %d partitions (at most %d in one) checked in %v: %d linearizable, %d ILLEGAL, %d inconclusive",
		len(history), len(verdicts), maxOps, time.Since(start).Round(time.Millisecond), len(ok), len(illegal), len(inconclusive))
	for i, v := range illegal {
		if i == 3 {
			var rest []string
			for _, w := range illegal[i:] {
				rest = append(rest, w.part)
			}
			t.Errorf("porcupine: %d more partitions are NOT linearizable: %s", len(rest), strings.Join(rest, " "))
			break
		}
		t.Errorf("porcupine: partition %s is NOT linearizable against the model (%d operations):\n%s", v.part, v.ops, v.report)
		r.visualize(model, history, v.part)
	}
	for _, v := range inconclusive {
		t.Errorf("porcupine: partition %s is INCONCLUSIVE: not decided within %v (%d operations). This is not a violation found; "+
			"the rule is that it fails the run: rerun with a larger -chaos.checktimeout, or look at why the history grew", v.part, r.cfg.checkTimeout, v.ops)
	}
	if len(history) == 0 || len(ok) == 0 {
		t.Errorf("porcupine checked nothing: the load did not run")
	}
	for _, v := range r.invariants() {
		t.Error(v)
	}
	r.checkFailedItems()
	r.checkDeadLetters()
}

// porcupineHistory turns the recorded operations into porcupine's, for the
// model: offsets come from the audit, unknown outcomes return at +infinity,
// and what cannot have changed anything is left out (failed operations, pops
// that delivered nothing or whose answer was lost, reads whose answer was
// lost, the lost attempts of a push another attempt of which was answered
// queued, unknown pushes none of whose ids is in the log). One final
// operation per partition closes it.
func (r *chaosRun) porcupineHistory() []porcupine.Operation {
	offsets := map[string]map[string]int{}
	for part, log := range r.audit {
		m := map[string]int{}
		for i, e := range log {
			m[e.txid] = i
		}
		offsets[part] = m
	}
	offset := func(part, txid string) int {
		if o, ok := offsets[part][txid]; ok {
			return o
		}
		return -1
	}
	at := func(tm time.Time) int64 { return tm.Sub(r.base).Nanoseconds() }

	// The attempts of each batch: is one answered queued?
	answeredQueued := map[int]bool{}
	for _, op := range r.ops {
		if op.kind == opPush && op.result == resOK {
			for _, st := range op.statuses {
				if st == "queued" {
					answeredQueued[op.batchID] = true
				}
			}
		}
	}
	merged := map[int]*porcupine.Operation{}
	var out []porcupine.Operation
	seen := map[string]bool{}
	for _, op := range r.ops {
		in := &mInput{kind: op.kind, part: op.part, callUS: op.call.UnixMicro(), retUS: op.ret.UnixMicro(), op: op}
		o := &mOutput{unknown: op.result == resUnknown}
		pop := porcupine.Operation{ClientId: op.client + 1, Input: in, Output: o, Call: at(op.call), Return: at(op.ret)}
		if op.result == resUnknown {
			pop.Return, in.retUS = math.MaxInt64, math.MaxInt64
		}
		switch {
		case op.result == resFail:
			continue
		case op.kind == opRead:
			if op.result != resOK {
				continue // a read changes nothing
			}
			in.pos = []int{offset(op.part, op.txids[0])}
			o.found, o.consumed = op.found, op.consumed
		case op.kind == opPush:
			for _, id := range op.txids {
				in.pos = append(in.pos, offset(op.part, id))
			}
			if op.result == resOK {
				o.pushed = op.statuses
				break
			}
			if op.repush || answeredQueued[op.batchID] {
				continue // cannot have appended anything
			}
			inLog := false
			for _, p := range in.pos {
				inLog = inLog || p >= 0
			}
			if !inLog {
				continue // never applied
			}
			if m := merged[op.batchID]; m != nil {
				continue // the first lost attempt stands for all: one of them applied it
			}
			merged[op.batchID] = &pop
		case op.kind == opPop:
			if op.result != resOK {
				continue // a lease nobody holds; the model does not see it
			}
			in.batch = op.batch
			o.lease = op.lease
			for _, id := range op.txids {
				o.pos = append(o.pos, offset(op.part, id))
			}
		case op.kind == opAck:
			in.lease, in.status = op.lease, op.statuses
			for _, id := range op.txids {
				in.pos = append(in.pos, offset(op.part, id))
			}
			if op.result == resOK {
				o.acks = op.acks
				o.leaseRejected = true
				for _, a := range op.acks {
					o.leaseRejected = o.leaseRejected && !a.success && a.err == "invalid or expired lease"
				}
			}
		}
		seen[op.part] = true
		out = append(out, pop)
	}
	for part := range r.audit {
		seen[part] = true
	}
	var parts []string
	for part := range seen {
		parts = append(parts, part)
	}
	sort.Strings(parts)
	for _, part := range parts {
		in := &mInput{kind: opFinal, part: part, logLen: len(r.audit[part])}
		out = append(out, porcupine.Operation{ClientId: 0, Input: in, Output: &mOutput{}, Call: at(r.finalAt), Return: at(r.finalAt) + 1})
	}
	return out
}

// visualize writes porcupine's HTML view of one partition's history next
// to the test's temporary files and logs where.
func (r *chaosRun) visualize(model porcupine.Model, history []porcupine.Operation, part string) {
	var ops []porcupine.Operation
	for _, op := range history {
		if op.Input.(*mInput).part == part {
			ops = append(ops, op)
		}
	}
	_, info := porcupine.CheckOperationsVerbose(model, ops, r.cfg.checkTimeout)
	path := filepath.Join(os.TempDir(), fmt.Sprintf("queen-chaos-%d-%s.html", r.seed, part))
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		r.t.Logf("visualize %s: %v", part, err)
		return
	}
	r.t.Logf("porcupine's view of partition %s: %s", part, path)
}

// invariants checks the history by counting, independently of the model:
//   - no loss: every push answered queued or duplicate is in its
//     partition's log, and every logged message was delivered to group g;
//   - dedup: no transaction id is logged twice in a partition, and every
//     answer and delivery of an id names one message id;
//   - no delivery after a committing ack: once an ack answered success for
//     a message it committed (completed, below any nack in its call, and
//     not a no-op) or dead-lettered, no pop that started later delivers it;
//   - every delivered payload carries its own transaction id.
func (r *chaosRun) invariants() []string {
	var bad []string
	logged := map[string]map[string]string{} // partition -> txid -> message id
	for part, log := range r.audit {
		m := map[string]string{}
		for _, e := range log {
			if _, dup := m[e.txid]; dup {
				bad = append(bad, fmt.Sprintf("dedup: transaction id %s is logged twice in partition %s", e.txid, part))
			}
			m[e.txid] = e.msgID
		}
		logged[part] = m
	}
	msgID := map[string]string{} // partition/txid -> the first message id heard
	sameMsg := func(part, txid, id, where string) {
		k := part + "/" + txid
		if id == "" {
			return
		}
		if prev, ok := msgID[k]; ok && prev != id {
			bad = append(bad, fmt.Sprintf("dedup: %s is message %s and also %s (%s)", k, prev, id, where))
		}
		msgID[k] = id
		if l, ok := logged[part][txid]; ok && l != id {
			bad = append(bad, fmt.Sprintf("dedup: %s is logged as message %s but %s says %s", k, l, where, id))
		}
	}
	delivered := map[string]bool{}
	committedAt := map[string]time.Time{}
	for _, op := range r.ops {
		if op.result != resOK {
			continue
		}
		switch op.kind {
		case opRead:
			if !op.payloadOK && op.found {
				bad = append(bad, fmt.Sprintf("payload: read #%d via %s answered a payload that does not carry its transaction id", op.id, op.node))
			}
			if op.found {
				sameMsg(op.part, op.txids[0], op.msgIDs[0], fmt.Sprintf("read #%d", op.id))
			}
		case opPush:
			for i, id := range op.txids {
				if op.statuses[i] == "failed" {
					continue // not stored by this request: checkFailedItems
				}
				if _, ok := logged[op.part][id]; !ok {
					bad = append(bad, fmt.Sprintf("loss: push #%d of %s/%s was answered %s via %s but the partition's log lacks it",
						op.id, op.part, id, op.statuses[i], op.node))
				}
				sameMsg(op.part, id, op.msgIDs[i], fmt.Sprintf("push #%d answered %s", op.id, op.statuses[i]))
			}
		case opPop:
			if !op.payloadOK {
				bad = append(bad, fmt.Sprintf("payload: pop #%d via %s delivered a payload that does not carry its transaction id", op.id, op.node))
			}
			for i, id := range op.txids {
				delivered[op.part+"/"+id] = true
				sameMsg(op.part, id, op.msgIDs[i], fmt.Sprintf("pop #%d", op.id))
			}
		case opAck:
			for i, id := range op.txids {
				if op.statuses[i] != "completed" {
					if op.acks[i].dlq {
						committedAt[op.part+"/"+id] = op.ret
					}
					break // what follows a nack in the call is not applied
				}
				if a := op.acks[i]; a.success && !a.noop {
					if _, ok := committedAt[op.part+"/"+id]; !ok {
						committedAt[op.part+"/"+id] = op.ret
					}
				}
			}
		}
	}
	var lost []string
	for part, log := range r.audit {
		for _, e := range log {
			if !delivered[part+"/"+e.txid] {
				lost = append(lost, part+"/"+e.txid)
			}
		}
	}
	sort.Strings(lost)
	if len(lost) > 0 {
		bad = append(bad, fmt.Sprintf("loss: %d logged messages were never delivered to group %s, e.g. %v", len(lost), chaosGroup, head(lost, 10)))
	}
	for _, op := range r.ops {
		if op.kind != opPop || op.result != resOK {
			continue
		}
		for _, id := range op.txids {
			if at, ok := committedAt[op.part+"/"+id]; ok && op.call.After(at) {
				bad = append(bad, fmt.Sprintf("delivered after its ack: %s/%s was committed at +%v, then delivered by pop #%d via %s (called at +%v, lease %s)",
					op.part, id, r.since(at), op.id, op.node, r.since(op.call), short(op.lease)))
			}
		}
	}
	return bad
}

// checkFailedItems counts the push items answered failed and, of those,
// the ones the final log holds anyway (failed-but-stored): docs/api.md
// promises failed only for an item certainly not stored, so that count must
// be 0. An item some earlier attempt of its batch may have stored (that
// attempt's answer was lost) is counted apart: the failed answer spoke for
// its own request only. It also checks chaosSideQueue's log (split pushes):
// every item answered queued or duplicate is in it, once.
func (r *chaosRun) checkFailedItems() {
	inLog := map[string]bool{}
	for part, log := range r.audit {
		for _, e := range log {
			inLog[chaosQueue+"/"+part+"/"+e.txid] = true
		}
	}
	for part, log := range r.sideAudit {
		for _, e := range log {
			k := chaosSideQueue + "/" + part + "/" + e.txid
			if inLog[k] {
				r.t.Errorf("dedup: %s is logged twice", k)
			}
			inLog[k] = true
		}
	}
	unknownBefore := map[int]bool{} // batches with an attempt whose answer was lost
	var failed, stored, storedEarlier, split, sideItems int
	var examples []string
	for _, op := range r.ops {
		if op.kind != opPush {
			continue
		}
		if op.result != resOK {
			unknownBefore[op.batchID] = unknownBefore[op.batchID] || op.result == resUnknown
			continue
		}
		if len(op.sideTxids) > 0 {
			split++
			sideItems += len(op.sideTxids)
		}
		check := func(queue, part string, txids, statuses []string) {
			for i, id := range txids {
				k := queue + "/" + part + "/" + id
				switch {
				case statuses[i] != "failed":
					if queue == chaosSideQueue && !inLog[k] {
						r.t.Errorf("loss: push #%d of %s was answered %s via %s but the log lacks it", op.id, k, statuses[i], op.node)
					}
				case !inLog[k]:
					failed++
				case unknownBefore[op.batchID]:
					failed++
					storedEarlier++
				default:
					failed++
					stored++
					examples = append(examples, fmt.Sprintf("#%d %s via %s", op.id, k, op.node))
				}
			}
		}
		check(chaosQueue, op.part, op.txids, op.statuses)
		check(chaosSideQueue, op.sidePart, op.sideTxids, op.sideStatuses)
	}
	r.t.Logf("CHAOS split pushes answered: %d (%d items for %s); items answered failed: %d; failed-but-stored: %d "+
		"(and %d stored by an earlier attempt of theirs whose answer was lost)", split, sideItems, chaosSideQueue, failed, stored, storedEarlier)
	if stored > 0 {
		r.t.Errorf("failed-but-stored: %d push items were answered failed but the log holds them, e.g. %v", stored, head(examples, 5))
	}
}

// checkDeadLetters requires every message an ack answered dlq:true for to
// be in the dead-letter queue of group g, and every dead letter there to be
// a message some ack nacked failed.
func (r *chaosRun) checkDeadLetters() {
	filed := map[string]bool{}
	for offset := 0; ; {
		path := fmt.Sprintf("/api/v1/dlq?queue=%s&consumerGroup=%s&limit=1000&offset=%d", chaosQueue, chaosGroup, offset)
		code, b, err := r.c.do(10*time.Second, "GET", r.c.nodes[0].url(path), nil)
		if err != nil || code != http.StatusOK {
			r.t.Errorf("read the dead-letter queue: %d %v %s", code, err, b)
			return
		}
		var page struct {
			Messages []struct {
				TransactionID string `json:"transactionId"`
				Partition     string `json:"partition"`
			} `json:"messages"`
			Pagination struct {
				HasMore bool `json:"hasMore"`
			} `json:"pagination"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			r.t.Errorf("dead-letter queue: %v: %s", err, b)
			return
		}
		for _, m := range page.Messages {
			filed[m.Partition+"/"+m.TransactionID] = true
		}
		offset += len(page.Messages)
		if !page.Pagination.HasMore || len(page.Messages) == 0 {
			break
		}
	}
	nacked, answered := map[string]bool{}, 0
	for _, op := range r.ops {
		if op.kind != opAck || op.result == resFail {
			continue
		}
		for i, id := range op.txids {
			if op.statuses[i] == "failed" {
				nacked[op.part+"/"+id] = true
			}
			if op.result == resOK && op.acks[i].dlq {
				answered++
				if !filed[op.part+"/"+id] {
					r.t.Errorf("dead letter: ack #%d answered dlq:true for %s/%s, which the DLQ of group %s lacks", op.id, op.part, id, chaosGroup)
				}
			}
		}
	}
	var stray []string
	for k := range filed {
		if !nacked[k] {
			stray = append(stray, k)
		}
	}
	if len(stray) > 0 {
		r.t.Errorf("dead letter: %d rows for messages no ack nacked failed, e.g. %v", len(stray), head(stray, 5))
	}
	r.t.Logf("dead letters: %d filed, %d answered dlq:true to a client", len(filed), answered)
}
