package engine

import (
	"math/rand/v2"

	"github.com/queenmq/queen/engine/keyspace"
)

// PopCmd asks for messages (docs/semantics.md §4).
type PopCmd struct {
	Queue     string // "" with Namespace or Task set: a discovery pop across queues
	Partition string // "" pops any partition of Queue (wildcard)
	Namespace string
	Task      string
	Group     string // "" means QueueMode
	// Batch caps the messages returned, across all claimed partitions (>= 1).
	Batch int
	// Partitions caps how many partitions a wildcard pop claims (>= 1).
	Partitions int
	// AutoAck commits the delivered messages in the same command: no lease,
	// at-most-once (docs/semantics.md §4.8).
	AutoAck bool
	// SubscriptionMode (SubAll, SubNew, SubFrom) and SubscriptionFrom (µs,
	// with SubFrom) apply only on a named group's first contact (docs/semantics.md §4.6).
	SubscriptionMode uint8
	SubscriptionFrom int64
	// LeaseSeconds overrides the queue's leaseTime when > 0.
	LeaseSeconds int64
}

// Message is one delivered message.
type Message struct {
	ID            ID
	TransactionID string
	TraceID       ID
	HasTrace      bool
	Payload       []byte // aliases an immutable decoded segment: never modify
	Sealed        bool   // Payload is an envelope the broker sealed (PushItem.Sealed)
	ProducerSub   string
	CreatedAt     int64
	Queue         string
	Partition     string
	PartitionID   ID
	Offset        Offset
	RetryCount    uint32 // the (partition, group) retry budget consumed so far
	Attempt       uint32 // deliveries of this batch's first message, this one included
}

// Claim is one partition a pop took messages from.
type Claim struct {
	Queue          string
	Partition      string
	PartitionID    ID
	LeaseExpiresAt int64 // 0 with autoAck
}

// PopResult is what a pop delivered. LeaseID is zero with autoAck or when
// nothing was delivered.
type PopResult struct {
	Group        string
	LeaseID      ID
	Messages     []Message
	Claims       []Claim
	DeadLettered int // messages dead-lettered by maxDeliveries (docs/decisions.md B5) on the way
	// reads are the claimed ranges whose frames are read after the commit
	// (Engine.Finish fills Messages from them).
	reads []popRead
}

const (
	defaultLeaseSeconds = 60
	maxCandidates       = 512 // wildcard partitions tried per pop, as Queen caps them
)

// pop claims up to cmd.Partitions partitions for the group and delivers up to
// cmd.Batch messages under one lease (docs/semantics.md §4, §5).
func (b *Batch) pop(st Stamp, cmd PopCmd) (PopResult, error) {
	now := st.Time
	m := &minter{seed: st.Seed}
	group := cmd.Group
	if group == "" {
		group = QueueMode
	}
	res := PopResult{Group: group}
	budget := max(cmd.Batch, 1)
	lease := m.next()
	if cmd.AutoAck {
		lease = ID{}
	}
	leaseFor := func(q *queue) int64 {
		s := cmd.LeaseSeconds
		if s <= 0 {
			s = q.config.Get(OptLeaseTime)
		}
		if s <= 0 {
			s = defaultLeaseSeconds
		}
		return s
	}

	sc := b.e.popScope(&cmd, group)
	switch {
	case sc.single != nil:
		_, err := b.claim(now, m, &cmd, group, sc.single, budget, lease, leaseFor(sc.single.q), &res)
		return b.finishPop(res, lease), err
	case sc.create:
		// Record the subscription before any push (docs/semantics.md §1.1).
		if err := ValidateQueueName(cmd.Queue); err != nil {
			return res, err
		}
		if b.e.arriving(cmd.Queue) {
			return res, ErrQueueNotFound
		}
		sc.queues = []*queue{b.queueFor(cmd.Queue, now, m)}
	}
	queues := sc.queues

	var candidates []*partition
	for _, q := range queues {
		if group != QueueMode && q.subs[group] == nil {
			if err := b.subscribe(now, &cmd, group, q); err != nil {
				return res, err
			}
		}
		for _, p := range q.parts {
			if b.mayHavePending(now, p, group) {
				candidates = append(candidates, p)
			}
		}
	}
	rng := rand.New(rand.NewPCG(m.rngSeed()))
	rng.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
	if len(candidates) > maxCandidates {
		candidates = candidates[:maxCandidates]
	}
	wanted := max(cmd.Partitions, 1)
	for _, p := range candidates {
		if budget == 0 || len(res.Claims) == wanted {
			break
		}
		n, err := b.claim(now, m, &cmd, group, p, budget, lease, leaseFor(p.q), &res)
		if err != nil {
			return b.finishPop(res, lease), err
		}
		budget -= n
	}
	return b.finishPop(res, lease), nil
}

func (b *Batch) finishPop(res PopResult, lease ID) PopResult {
	if len(res.Claims) > 0 {
		res.LeaseID = lease
	}
	return res
}

// mayHavePending is the cheap candidate filter of a wildcard pop: the
// partition is not validly leased to the group and holds offsets past its
// cursor (or the group has no cursor there yet).
func (b *Batch) mayHavePending(now int64, p *partition, group string) bool {
	return b.e.mayHavePending(now, p, group)
}

func (e *Engine) mayHavePending(now int64, p *partition, group string) bool {
	if p.rec.Next <= p.rec.Start {
		return false
	}
	r := p.cursors[group]
	if r == nil {
		return true
	}
	return !r.leaseLive(now) && r.rec.RetryAfter <= now && Offset(r.rec.Committed) < p.last()
}

// subscribe records a named group's subscription on q and seeds its cursor on
// every existing partition (docs/semantics.md §4.6). The first registration wins.
func (b *Batch) subscribe(now int64, cmd *PopCmd, group string, q *queue) error {
	s := &sub{rec: keyspace.SubRecord{Mode: cmd.SubscriptionMode, CreatedAt: now}}
	switch cmd.SubscriptionMode {
	case SubNew:
		s.rec.Timestamp = now
	case SubFrom:
		s.rec.Timestamp = cmd.SubscriptionFrom
	}
	q.subs[group] = s
	b.putSub(q, group, s)
	for _, p := range q.parts {
		if p.cursors[group] != nil {
			continue
		}
		committed := Offset(p.rec.Start - 1)
		switch s.rec.Mode {
		case SubNew:
			committed = p.last()
		case SubFrom:
			c, err := b.e.offsetAtTime(b.pb, p, s.rec.Timestamp)
			if err != nil {
				return err
			}
			committed = c
		}
		b.newRow(p, group, committed, now)
	}
	return nil
}

// seed is where a group's cursor starts on a partition it meets for the
// first time: from its stored subscription, else (single-partition route,
// docs/semantics.md §4.6) from this pop's own parameters. Queue mode starts at the
// oldest retained message.
func (b *Batch) seed(now int64, cmd *PopCmd, group string, p *partition) (Offset, error) {
	if group == QueueMode {
		return Offset(p.rec.Start - 1), nil
	}
	mode, ts := cmd.SubscriptionMode, cmd.SubscriptionFrom
	if s := p.q.subs[group]; s != nil {
		mode, ts = s.rec.Mode, s.rec.Timestamp
	} else if mode == SubNew {
		return p.last(), nil
	}
	if mode == SubAll {
		return Offset(p.rec.Start - 1), nil
	}
	return b.e.offsetAtTime(b.pb, p, ts)
}

func (b *Batch) newRow(p *partition, group string, committed Offset, now int64) *row {
	r := &row{p: p, group: group, rec: keyspace.CursorRecord{
		Committed: int64(committed), BatchEnd: -1, AttemptOffset: -1, CreatedAt: now,
	}}
	p.cursors[group] = r
	b.touchRow(r)
	return r
}

// claim leases the next span of p to the group and appends its messages to
// res. It returns how many messages it delivered.
func (b *Batch) claim(now int64, m *minter, cmd *PopCmd, group string, p *partition, budget int, lease ID, leaseSeconds int64, res *PopResult) (int, error) {
	r := p.cursors[group]
	if r == nil {
		committed, err := b.seed(now, cmd, group, p)
		if err != nil {
			return 0, err
		}
		r = b.newRow(p, group, committed, now)
	}
	if r.leaseLive(now) || r.rec.RetryAfter > now {
		return 0, nil
	}
	if r.rec.Lease != (ID{}) {
		// An expired lease: this claim ends it, whether or not it delivers.
		b.setLease(r, ID{}, 0, 0)
	}
	cfg := p.q.config
	if w := cfg.Get(OptWindowBuffer) * secondUS; w > 0 && p.rec.LastWriteAt > now-w {
		return 0, nil
	}
	if r.rec.Committed < p.rec.Start-1 {
		// Retention deleted what the cursor had not reached: resume at the
		// oldest retained message (docs/semantics.md §8.1).
		r.rec.Committed = p.rec.Start - 1
		b.touchRow(r)
	}
	last := p.last()
	if d := cfg.Get(OptDelayedProcessing) * secondUS; d > 0 {
		visible, err := b.e.lastVisible(b.pb, p, now-d)
		if err != nil {
			return 0, err
		}
		last = min(last, visible)
	}
	from := Offset(r.rec.Committed + 1)
	if maxDeliveries := cfg.Get(OptMaxDeliveries); maxDeliveries > 0 {
		// docs/decisions.md B5: a message delivered maxDeliveries times without a terminal ack
		// is dead-lettered instead of delivered again.
		for from <= last && r.rec.AttemptOffset == int64(from) && int64(r.rec.AttemptCount) >= maxDeliveries {
			filed, err := b.fileDeadLetter(now, m, r, from, "max deliveries exceeded", r.rec.RetryCount, r.rec.AttemptCount)
			if err != nil {
				return 0, err
			}
			if filed {
				res.DeadLettered++
			}
			r.rec.Committed = int64(from)
			r.rec.TotalConsumed++
			r.rec.LastConsumedAt = now
			r.rec.RetryCount = 0
			r.rec.AttemptOffset, r.rec.AttemptCount = -1, 0
			b.touchRow(r)
			from++
		}
	}
	if from > last {
		return 0, nil
	}
	to := min(last, from+Offset(budget)-1)

	if r.rec.AttemptOffset == int64(from) {
		r.rec.AttemptCount++
	} else {
		r.rec.AttemptOffset, r.rec.AttemptCount = int64(from), 1
	}
	n := int(to - from + 1) // offsets [Start, Next) are contiguous: every one is stored
	// The frames are read after the commit, outside the serial apply path,
	// by whoever wants the answer (popread.go).
	base, known := p.recentBase(int64(from))
	res.reads = append(res.reads, popRead{part: p.id, from: from, to: to, base: base, baseKnown: known,
		queue: p.q.name, partition: p.rec.Name, retry: r.rec.RetryCount, attempt: r.rec.AttemptCount})
	if n == 0 {
		return 0, nil
	}
	claim := Claim{Queue: p.q.name, Partition: p.rec.Name, PartitionID: p.id}
	if cmd.AutoAck {
		r.rec.Committed = int64(to)
		r.rec.TotalConsumed += int64(n)
		r.rec.LastConsumedAt = now
		r.rec.AttemptOffset, r.rec.AttemptCount = -1, 0
	} else {
		claim.LeaseExpiresAt = now + leaseSeconds*secondUS
		b.setLease(r, lease, claim.LeaseExpiresAt, now)
		r.rec.BatchEnd = int64(to)
	}
	b.touchRow(r)
	res.Claims = append(res.Claims, claim)
	return n, nil
}

// popScope is what a pop looks at, as the model stands: the one partition
// it names (single), or the queues whose partitions it may claim, or that it
// must first create the queue a named group pops (create). Neither set:
// there is nothing to pop. Pop and popIsEmpty both read it, so the dry run
// targets what the pop would.
type popScope struct {
	single *partition
	queues []*queue
	create bool
}

func (e *Engine) popScope(cmd *PopCmd, group string) popScope {
	switch {
	case cmd.Queue != "" && cmd.Partition != "":
		if q := e.queues[cmd.Queue]; q != nil {
			if p := q.byName[cmd.Partition]; p != nil {
				return popScope{single: p}
			}
		}
		return popScope{}
	case cmd.Queue != "":
		q := e.queues[cmd.Queue]
		if q == nil {
			return popScope{create: group != QueueMode}
		}
		return popScope{queues: []*queue{q}}
	}
	var sc popScope
	for _, q := range e.sortedQueues() {
		if e.isFrozen(q.name) {
			continue // a move froze it (freeze.go)
		}
		if (cmd.Namespace == "" || q.rec.Namespace == cmd.Namespace) && (cmd.Task == "" || q.rec.Task == cmd.Task) {
			sc.queues = append(sc.queues, q)
		}
	}
	return sc
}

// popIsEmpty reports, from the applied state and without writing, that a pop
// would deliver nothing and change nothing: every partition it could claim
// is leased, delayed by retryDelay, or has nothing past the group's cursor,
// and the pop has no first contact to record. A proposer answers such a pop
// at once (PopCmd.Skip) instead of replicating a command that does nothing.
// It is conservative: false means only that the pop has to run. Discovery
// pops (no queue named) always run: their scope is every queue.
func (e *Engine) popIsEmpty(now int64, cmd PopCmd) bool {
	if cmd.Queue == "" {
		return false
	}
	return e.scopeIsEmpty(now, cmd)
}

// PopWouldDeliver reports, from the applied state and without writing,
// whether pop may deliver or change something here: the negation of
// popIsEmpty's test, made for a discovery pop too, over every queue of
// its scope. A node whose queues are spread over several engines (raft's
// Host) asks each before choosing where a discovery pop runs. Like
// popIsEmpty it is conservative: true means only that the pop has to run.
func (e *Engine) PopWouldDeliver(now int64, cmd PopCmd) bool { return !e.scopeIsEmpty(now, cmd) }

// scopeIsEmpty is popIsEmpty's test, for any pop.
func (e *Engine) scopeIsEmpty(now int64, cmd PopCmd) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	group := cmd.Group
	if group == "" {
		group = QueueMode
	}
	sc := e.popScope(&cmd, group)
	empty := func(p *partition) bool {
		if p.cursors[group] == nil && (p.rec.Next > p.rec.Start || (group != QueueMode && p.q.subs[group] == nil)) {
			// First contact: the pop seeds a cursor. Not on a partition
			// that holds no message, where the cursor a later pop seeds is
			// the same (seed: the oldest message in queue mode, from the
			// stored subscription for a named group); else a discovery pop
			// over several groups would be sent to every group with a
			// partition no pop has reached yet, and deliver nothing there.
			return false
		}
		return !e.mayHavePending(now, p, group)
	}
	switch {
	case sc.create:
		return false // a named group's pop records its subscription
	case sc.single != nil:
		return empty(sc.single)
	}
	for _, q := range sc.queues {
		if group != QueueMode && q.subs[group] == nil {
			return false
		}
		for _, p := range q.parts {
			if !empty(p) {
				return false
			}
		}
	}
	return true
}
