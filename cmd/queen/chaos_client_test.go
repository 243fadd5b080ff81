package main

// The fault-schedule test's clients (chaos_test.go): pushers and consumers
// that record every operation they invoke, with its call and answer times and
// what they were told.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// opResult is what a client knows of an operation's outcome.
type opResult uint8

const (
	resOK      opResult = iota // answered: the answer says what happened
	resFail                    // refused before anything could apply (no_leader, not_leader, forward_expired, leadership_transfer, queue_moving, 4xx)
	resUnknown                 // no answer, or a 5xx after the command may have been proposed
)

func (r opResult) String() string { return [...]string{"ok", "fail", "unknown"}[r] }

// chaosOp is one recorded operation.
type chaosOp struct {
	id     int
	client int // -1: the drain
	kind   opKind
	node   string
	call   time.Time
	ret    time.Time // when the answer, or the client's give-up, came
	result opResult
	code   int    // HTTP status; 0 for a transport error
	detail string // the error code or transport error, for reports
	part   string // partition name

	// push
	batchID int // attempts of one batch share it (retries resend the same ids)
	repush  bool
	// push: the ids pushed; pop: delivered, in order; ack: acked, in order.
	txids    []string
	statuses []string // push: each item's answer; ack: each item's status
	msgIDs   []string // push: answered message ids; pop: delivered ones

	// pop
	wildcard  bool
	batch     int
	lease     string // pop: taken; ack: carried
	partID    string // the partition's UUID (pop, ack)
	payloadOK bool   // pop: every payload carried its own transaction id

	// ack
	acks   []ackOutcome
	single bool // POST /api/v1/ack rather than /ack/batch

	// read: the message exists; group g consumed it.
	found, consumed bool

	// push with --groups: the items for the side queue (placed in another
	// group than chaosQueue, so the push is split), in one of its
	// partitions, and each one's answer. The model does not see them.
	sidePart     string
	sideTxids    []string
	sideStatuses []string
}

// chaosWire are the JSON shapes the clients read.
type chaosPopMessage struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	LeaseID       string          `json:"leaseId"`
	Data          json.RawMessage `json:"data"`
}

type chaosPop struct {
	LeaseID  string            `json:"leaseId"`
	Messages []chaosPopMessage `json:"messages"`
}

type chaosAckResult struct {
	Success bool    `json:"success"`
	Error   *string `json:"error"`
	Noop    bool    `json:"noop"`
	DLQ     bool    `json:"dlq"`
}

// chaosOutcome classifies an HTTP exchange. Only codes that promise nothing
// was applied count as a failure; every other error leaves the outcome
// unknown (ARCHITECTURE.md, "Forwarding"). queue_moving is one of them: the
// freeze of a queue being moved refuses a command before it writes
// anything, the node retries only such refusals until it gives up with
// that answer, and an attempt of unknown outcome on the way makes the
// answer outcome_unknown instead (cluster/hostmove.go retryMoving,
// cluster/hostrelay.go runPart).
func chaosOutcome(code int, body []byte, err error) (opResult, string) {
	switch {
	case err != nil:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return resUnknown, "client timeout"
		}
		msg := err.Error()
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		return resUnknown, msg
	case code < 300:
		return resOK, ""
	case code >= 500:
		e, _ := c2(body)
		switch e.Code {
		case "no_leader", "not_leader", "forward_expired", "leadership_transfer", "queue_moving":
			return resFail, e.Code
		}
		return resUnknown, fmt.Sprintf("%d %s", code, e.Code)
	default:
		return resFail, fmt.Sprintf("%d %s", code, body)
	}
}

// partSlot is a partition pushers may still add to, and how much.
type partSlot struct {
	name string
	left int
}

// partitions hands out partitions: a few are active at a time, each takes a
// fixed number of messages and is then replaced by a fresh one, so that no
// partition's history grows past what porcupine checks quickly, however long
// the run.
type partitions struct {
	mu       sync.Mutex
	capacity int
	active   []*partSlot
	all      []string
}

func newPartitions(active, capacity int) *partitions {
	p := &partitions{capacity: capacity}
	for range active {
		p.active = append(p.active, p.fresh())
	}
	return p
}

func (p *partitions) fresh() *partSlot {
	s := &partSlot{name: fmt.Sprintf("p%04d", len(p.all)), left: p.capacity}
	p.all = append(p.all, s.name)
	return s
}

// take reserves up to k messages in a random active partition.
func (p *partitions) take(rng *rand.Rand, k int) (string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := rng.IntN(len(p.active))
	s := p.active[i]
	k = min(k, s.left)
	s.left -= k
	if s.left == 0 {
		p.active[i] = p.fresh()
	}
	return s.name, k
}

// recent picks one of the last few partitions handed out.
func (p *partitions) recent(rng *rand.Rand) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := min(len(p.all), 2*len(p.active)+2)
	return p.all[len(p.all)-1-rng.IntN(n)]
}

func (p *partitions) names() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.all...)
}

// record appends an operation to the history.
func (r *chaosRun) record(op *chaosOp) {
	r.mu.Lock()
	op.id = len(r.ops)
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// exchange sends one request to n and records its times and outcome in op.
func (r *chaosRun) exchange(op *chaosOp, n *qnode, timeout time.Duration, method, path string, body []byte) []byte {
	op.node = n.id
	op.call = time.Now()
	code, b, err := r.c.do(timeout, method, n.url(path), body)
	op.ret = time.Now()
	op.code = code
	op.result, op.detail = chaosOutcome(code, b, err)
	if op.kind == opRead && code == http.StatusNotFound {
		if e, _ := c2(b); e.Code == "message_not_found" {
			op.result, op.detail = resOK, "" // an answer: the message does not exist
		}
	}
	if op.result == resFail && code >= 400 && code < 500 && code != http.StatusRequestTimeout {
		r.t.Errorf("%s via %s: unexpected %s", op.kind, n.id, op.detail)
	}
	return b
}

// randomNode is a node for a client's request: a founder, or the joiner
// once it serves (chaos_join_test.go), as a load balancer would pick.
func (r *chaosRun) randomNode(rng *rand.Rand) *qnode {
	nodes := r.serving()
	return nodes[rng.IntN(len(nodes))]
}

// pusher pushes batches of fresh ids to the active partitions, retrying a
// batch with the same ids (dedup makes that safe) until it is answered or
// the run stops; now and then it pushes an answered id again, which must be
// answered duplicate.
func (r *chaosRun) pusher(client int, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(r.seed, uint64(client)))
	var answered []pushItem // ids answered queued, to push again
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(20+rng.IntN(100)) * time.Millisecond):
		}
		var items []pushItem
		repush := len(answered) > 0 && rng.IntN(100) < 5
		if repush {
			items = []pushItem{answered[rng.IntN(len(answered))]}
		} else {
			part, k := r.parts.take(rng, 1+rng.IntN(4))
			for i := range k {
				id := fmt.Sprintf("c%d-%d-%d", client, seq, i)
				items = append(items, pushItem{Queue: chaosQueue, Partition: part, TransactionID: id, Payload: map[string]any{"id": id}})
				r.reads.pushed(part, id)
			}
		}
		main := len(items)
		var side []pushItem
		if r.split && rng.IntN(3) == 0 {
			// A split push: items for a queue of another group.
			sidePart := fmt.Sprintf("s%d", rng.IntN(chaosSideParts))
			for i := range 1 + rng.IntN(2) {
				id := fmt.Sprintf("c%d-%d-s%d", client, seq, i)
				side = append(side, pushItem{Queue: chaosSideQueue, Partition: sidePart, TransactionID: id, Payload: map[string]any{"id": id}})
			}
		}
		body, _ := json.Marshal(map[string]any{"items": append(append([]pushItem(nil), items...), side...)})
		batchID := int(r.batches.Add(1))
		for attempt := 0; ; attempt++ {
			op := &chaosOp{client: client, kind: opPush, part: items[0].Partition, batchID: batchID, repush: repush}
			for _, it := range items {
				op.txids = append(op.txids, it.TransactionID)
			}
			for _, it := range side {
				op.sidePart = it.Partition
				op.sideTxids = append(op.sideTxids, it.TransactionID)
			}
			n := r.randomNode(rng)
			b := r.exchange(op, n, r.cfg.requestTimeout, "POST", "/api/v1/push", body)
			partID := ""
			if op.result == resOK {
				var res []pushResult
				if err := json.Unmarshal(b, &res); err != nil || len(res) != main+len(side) {
					r.t.Errorf("push via %s: %d results for %d items (%v): %s", n.id, len(res), main+len(side), err, b)
					op.result = resUnknown
				} else {
					for i, x := range res {
						if x.Status == "failed" && x.Error == "" {
							r.t.Errorf("push via %s: item %s answered failed with an empty error", n.id, x.TransactionID)
						}
						if i >= main {
							op.sideStatuses = append(op.sideStatuses, x.Status)
							continue
						}
						op.statuses = append(op.statuses, x.Status)
						op.msgIDs = append(op.msgIDs, x.MessageID)
						if x.PartitionID != "" {
							partID = x.PartitionID
							r.reads.partitionID(op.part, partID)
						}
						if x.Status == "queued" && !repush {
							answered = append(answered, items[i])
						}
					}
				}
			}
			r.record(op)
			if op.result == resOK {
				// Read your write, a time in four, through any node
				// (a follower two times in three).
				if j := rng.IntN(4 * main); j < main && op.statuses[j] == "queued" && partID != "" {
					r.read(client, rng, readTarget{op.part, op.txids[j]}, partID)
				}
				break
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(50+rng.IntN(150)) * time.Millisecond):
			}
		}
	}
}

// consumer pops from a random node (a wildcard pop, or one partition, with
// or without a long-poll) and acks what it got in one of several ways:
// everything at once, in two parts, one message at a time, with a failed or
// retry nack in the middle, too late (after the lease), or not at all.
func (r *chaosRun) consumer(client int, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(r.seed, uint64(client)))
	for {
		select {
		case <-stop:
			return
		default:
		}
		op := r.pop(client, rng)
		switch {
		case op == nil:
			time.Sleep(time.Duration(10+rng.IntN(40)) * time.Millisecond)
		case op.result != resOK:
			time.Sleep(time.Duration(50+rng.IntN(100)) * time.Millisecond)
		default:
			r.settle(client, rng, op)
		}
	}
}

// pop does one pop for group g and records it unless it delivered nothing.
func (r *chaosRun) pop(client int, rng *rand.Rand) *chaosOp {
	op := &chaosOp{client: client, kind: opPop, batch: 1 + rng.IntN(5), wildcard: rng.IntN(4) > 0}
	path := "/api/v1/pop/queue/" + chaosQueue
	if !op.wildcard {
		op.part = r.parts.recent(rng)
		path += "/partition/" + op.part
	}
	q := url.Values{"batch": {fmt.Sprint(op.batch)}, "consumerGroup": {chaosGroup},
		"leaseSeconds": {fmt.Sprint(int(r.cfg.lease / time.Second))}}
	timeout := r.cfg.requestTimeout
	if rng.IntN(10) < 3 {
		q.Set("wait", "true")
		q.Set("timeout", "500")
		timeout += 500 * time.Millisecond
	}
	b := r.exchange(op, r.randomNode(rng), timeout, "GET", path+"?"+q.Encode(), nil)
	if op.result == resOK && op.code == http.StatusNoContent {
		r.emptyPops.Add(1)
		return nil
	}
	if op.result == resOK && !r.decodePop(op, b) {
		op.result = resUnknown
	}
	r.record(op)
	return op
}

// decodePop fills a 200 pop's delivery into op.
func (r *chaosRun) decodePop(op *chaosOp, b []byte) bool {
	var pr chaosPop
	if err := json.Unmarshal(b, &pr); err != nil || len(pr.Messages) == 0 || pr.LeaseID == "" {
		r.t.Errorf("pop via %s: %v: %s", op.node, err, b)
		return false
	}
	op.lease, op.payloadOK = pr.LeaseID, true
	for i, m := range pr.Messages {
		if i == 0 {
			op.part, op.partID = m.Partition, m.PartitionID
		}
		if m.Partition != op.part || m.LeaseID != pr.LeaseID {
			r.t.Errorf("pop via %s: one delivery spans partitions %s and %s or leases: %s", op.node, op.part, m.Partition, b)
			return false
		}
		var data struct{ ID string }
		if json.Unmarshal(m.Data, &data) != nil || data.ID != m.TransactionID {
			op.payloadOK = false
		}
		op.txids = append(op.txids, m.TransactionID)
		op.msgIDs = append(op.msgIDs, m.ID)
	}
	return true
}

// settle acks a delivery the way rng picks.
func (r *chaosRun) settle(client int, rng *rand.Rand, pop *chaosOp) {
	k := len(pop.txids)
	statuses := func(fill string) []string {
		s := make([]string, k)
		for i := range s {
			s[i] = fill
		}
		return s
	}
	switch x := rng.IntN(100); {
	case x < 50: // everything at once
		r.ack(client, rng, pop, 0, statuses("completed"), false)
	case x < 60: // in two parts (the second only if the first was answered)
		j := 1 + rng.IntN(k)
		if r.ack(client, rng, pop, 0, statuses("completed")[:j], false) && j < k && rng.IntN(3) > 0 {
			r.ack(client, rng, pop, j, statuses("completed")[j:], false)
		}
	case x < 68: // one message at a time
		for i := range k {
			if !r.ack(client, rng, pop, i, []string{"completed"}, true) {
				break
			}
		}
	case x < 88: // a nack at j, completed before it; after it nothing or completed (superseded)
		j := rng.IntN(k)
		s := statuses("completed")
		s[j] = "failed"
		if rng.IntN(3) == 0 {
			s[j] = "retry"
		}
		if rng.IntN(2) == 0 {
			s = s[:j+1]
		}
		r.ack(client, rng, pop, 0, s, false)
	case x < 93: // too late: the lease has expired
		time.Sleep(r.cfg.lease + 300*time.Millisecond)
		r.ack(client, rng, pop, 0, statuses("completed"), false)
	default: // never: the lease expires and the messages come back
	}
}

// ack acks pop's messages from index from on with statuses, and records it.
// It reports whether the ack was answered.
func (r *chaosRun) ack(client int, rng *rand.Rand, pop *chaosOp, from int, statuses []string, single bool) bool {
	op := &chaosOp{client: client, kind: opAck, part: pop.part, partID: pop.partID, lease: pop.lease, single: single,
		txids: pop.txids[from : from+len(statuses)], statuses: statuses}
	items := make([]ackItem, len(statuses))
	for i, st := range statuses {
		items[i] = ackItem{TransactionID: op.txids[i], PartitionID: pop.partID, LeaseID: pop.lease, Status: st}
	}
	var body []byte
	path := "/api/v1/ack/batch"
	if single {
		path = "/api/v1/ack"
		body, _ = json.Marshal(map[string]any{"transactionId": items[0].TransactionID, "partitionId": pop.partID,
			"leaseId": pop.lease, "status": items[0].Status, "consumerGroup": chaosGroup})
	} else {
		body, _ = json.Marshal(map[string]any{"consumerGroup": chaosGroup, "acknowledgments": items})
	}
	b := r.exchange(op, r.randomNode(rng), r.cfg.requestTimeout, "POST", path, body)
	if op.result == resOK {
		var res []chaosAckResult
		if err := json.Unmarshal(b, &res); err != nil || len(res) != len(items) {
			r.t.Errorf("ack via %s: %d results for %d items (%v): %s", op.node, len(res), len(items), err, b)
			op.result = resUnknown
		} else {
			for _, x := range res {
				a := ackOutcome{success: x.Success, noop: x.Noop, dlq: x.DLQ}
				if x.Error != nil {
					a.err = *x.Error
				}
				op.acks = append(op.acks, a)
			}
		}
	}
	r.record(op)
	return op.result == resOK
}

// readTargets are the messages readers read: the last ids pushed to
// chaosQueue (whatever their pushes' outcomes), in partitions whose UUID a
// push answer has told.
type readTargets struct {
	mu      sync.Mutex
	partIDs map[string]string // partition name -> UUID
	recent  []readTarget      // a ring of the last ids pushed
	next    int
}

type readTarget struct{ part, txid string }

const readRing = 64

func (t *readTargets) pushed(part, txid string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.recent) < readRing {
		t.recent = append(t.recent, readTarget{part, txid})
		return
	}
	t.recent[t.next] = readTarget{part, txid}
	t.next = (t.next + 1) % readRing
}

func (t *readTargets) partitionID(part, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.partIDs == nil {
		t.partIDs = map[string]string{}
	}
	t.partIDs[part] = id
}

// pick chooses a recent id whose partition's UUID is known: half the time
// one of the last four pushed, whose push may still be on its way.
func (t *readTargets) pick(rng *rand.Rand) (readTarget, string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for range 8 {
		if len(t.recent) == 0 {
			break
		}
		i := rng.IntN(len(t.recent))
		if rng.IntN(2) == 0 {
			newest := len(t.recent) - 1
			if len(t.recent) == readRing {
				newest = t.next - 1 + readRing
			}
			i = (newest - rng.IntN(min(4, len(t.recent)))) % len(t.recent)
		}
		x := t.recent[i]
		if id, ok := t.partIDs[x.part]; ok {
			return x, id, true
		}
	}
	return readTarget{}, "", false
}

// reader reads recently pushed messages by transaction id through random
// nodes (followers two times in three), with the default, linearizable
// consistency, and records each read for the model (chaos_model_test.go:
// found, and consumed by group g).
func (r *chaosRun) reader(client int, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(r.seed, uint64(client)))
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(20+rng.IntN(80)) * time.Millisecond):
		}
		if target, partID, ok := r.reads.pick(rng); ok {
			r.read(client, rng, target, partID)
		}
	}
}

// read reads one message through a random node and records it.
func (r *chaosRun) read(client int, rng *rand.Rand, target readTarget, partID string) {
	op := &chaosOp{client: client, kind: opRead, part: target.part, partID: partID, txids: []string{target.txid}}
	b := r.exchange(op, r.randomNode(rng), r.cfg.requestTimeout, "GET",
		"/api/v1/messages/"+url.PathEscape(partID)+"/"+url.PathEscape(target.txid), nil)
	if op.result == resOK && op.code == http.StatusOK {
		var m struct {
			ID             string          `json:"id"`
			TransactionID  string          `json:"transactionId"`
			Partition      string          `json:"partition"`
			Data           json.RawMessage `json:"data"`
			ConsumerGroups []struct {
				Name     string `json:"name"`
				Consumed bool   `json:"consumed"`
			} `json:"consumerGroups"`
		}
		var data struct{ ID string }
		if err := json.Unmarshal(b, &m); err != nil || m.TransactionID != target.txid || m.Partition != target.part ||
			json.Unmarshal(m.Data, &data) != nil || data.ID != target.txid {
			r.t.Errorf("read of %s/%s via %s: %v: %s", target.part, target.txid, op.node, err, b)
			op.result = resUnknown
		} else {
			op.found, op.payloadOK = true, true
			op.msgIDs = []string{m.ID}
			for _, g := range m.ConsumerGroups {
				if g.Name == chaosGroup {
					op.consumed = g.Consumed
				}
			}
		}
	}
	r.record(op)
}
