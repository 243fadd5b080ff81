package analytics

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queenmq/queen/engine"
)

// Analytics records one node's per-minute series and, on the leader, the
// other nodes' (see the package doc for what is counted, the bounds and
// how the minutes travel). Its methods are safe for concurrent use.
type Analytics struct {
	now         func() time.Time
	sampleEvery time.Duration
	shipEvery   time.Duration
	store       func() (engine.StoreStats, error)
	instance    string // this process, for the nodes that ship to it

	// inflight counts the requests being handled (registries.response).
	inflight atomic.Int64
	// started runs the server's loops once (Once).
	started sync.Once
	// broker is the broker the recorder measures (Bind).
	broker Broker

	// rotating serialises rotations, which read the broker between
	// holding mu.
	rotating sync.Mutex

	// mu guards everything below; nothing is taken while holding it.
	mu     sync.Mutex
	cur    minuteRecord   // the minute being counted (At 0: none yet)
	idx    map[string]int // cur.Queues by name
	call   uint64         // counting calls, to count a request once per queue
	parked map[string]int // long-polls parked now, by queue
	self   ring
	peers  map[string]*ring // other nodes' minutes, by node id (on the leader)
	port   int              // this node's HTTP port, for system-metrics
	// Sampler state.
	proc          procStats
	procAt        time.Time
	requestsSeen  uint64
	storageErrors uint64
	// Shipping state (on a follower).
	shipLeader, shipInstance string
	shipThrough              int64 // the newest minute the leader has
	pullMore                 bool  // the leader has more of the other nodes' minutes
}

// Options configures New; zero fields take defaults.
type Options struct {
	// Now is the clock minutes are counted by (default time.Now).
	Now func() time.Time
	// SampleInterval is how often the gauges are sampled (default 1 s).
	SampleInterval time.Duration
	// ShipInterval is how often a follower sends its sealed minutes to
	// the leader (default 1 s).
	ShipInterval time.Duration
	// Store reports the engine's store statistics for
	// /api/v1/analytics/postgres-stats (`queen serve` passes the engine's
	// StoreStats); nil leaves those figures empty.
	Store func() (engine.StoreStats, error)
}

// Bounds of the ring (see Analytics).
const (
	analyticsMinutes         = 24 * 60
	analyticsQueuesPerMinute = 256
	analyticsQueueEntries    = 1 << 16
	analyticsNodes           = 16
	// analyticsOtherQueue counts the queues of a minute past its cap.
	analyticsOtherQueue = "__other__"
	// analyticsShipMinutes is the most minutes one shipment carries.
	analyticsShipMinutes = 60
	// analyticsSkewMinutes is how far ahead of the leader's clock a
	// shipped minute may be and still be kept.
	analyticsSkewMinutes = 60
)

// New returns an empty recorder. A server builds its own unless its
// Options.Analytics gives one; one recorder serves one server (Bind).
func New(o Options) *Analytics {
	a := &Analytics{now: o.Now, sampleEvery: o.SampleInterval, shipEvery: o.ShipInterval, store: o.Store,
		idx: map[string]int{}, parked: map[string]int{}, peers: map[string]*ring{}}
	if a.now == nil {
		a.now = time.Now
	}
	if a.sampleEvery <= 0 {
		a.sampleEvery = time.Second
	}
	if a.shipEvery <= 0 {
		a.shipEvery = time.Second
	}
	var b [8]byte
	rand.Read(b[:])
	a.instance = hex.EncodeToString(b[:])
	return a
}

// queueMinute is one queue's counters in one minute on one node. The lag
// is in ms, over every delivered message (PopMessages of them).
type queueMinute struct {
	Queue        string `json:"q"`
	PushRequests int64  `json:"pushReq,omitempty"`
	PushMessages int64  `json:"pushMsg,omitempty"`
	PopMessages  int64  `json:"popMsg,omitempty"`
	PopEmpty     int64  `json:"popEmpty,omitempty"`
	AckRequests  int64  `json:"ackReq,omitempty"`
	AckSuccess   int64  `json:"ackOk,omitempty"`
	AckFailed    int64  `json:"ackFailed,omitempty"`
	Transactions int64  `json:"tx,omitempty"`
	LagSum       int64  `json:"lagSum,omitempty"`
	LagMax       int64  `json:"lagMax,omitempty"`
	// ParkedSum adds up the parked long-polls of every sample of the
	// minute: ParkedSum / nodeMinute.Samples is the minute's gauge.
	ParkedSum int64 `json:"parked,omitempty"`
	// Partitions is the queue's partition count when the minute ended,
	// -1 when it was not read.
	Partitions int64 `json:"parts"`
	call       uint64
}

// add adds o's counters to q (the partition count is the larger).
func (q *queueMinute) add(o *queueMinute) {
	q.PushRequests += o.PushRequests
	q.PushMessages += o.PushMessages
	q.PopMessages += o.PopMessages
	q.PopEmpty += o.PopEmpty
	q.AckRequests += o.AckRequests
	q.AckSuccess += o.AckSuccess
	q.AckFailed += o.AckFailed
	q.Transactions += o.Transactions
	q.LagSum += o.LagSum
	q.LagMax = max(q.LagMax, o.LagMax)
	q.ParkedSum += o.ParkedSum
	q.Partitions = max(q.Partitions, o.Partitions)
}

// nodeMinute is a node's counters in one minute (Queen's worker row).
// Samples is how many times the sampler ran in the minute; the *Sum
// fields add up one value per sample. Lag is in ms over PopMessages.
type nodeMinute struct {
	PushRequests int64 `json:"pushReq,omitempty"`
	PushMessages int64 `json:"pushMsg,omitempty"`
	PopRequests  int64 `json:"popReq,omitempty"`
	PopMessages  int64 `json:"popMsg,omitempty"`
	AckRequests  int64 `json:"ackReq,omitempty"`
	AckMessages  int64 `json:"ackMsg,omitempty"`
	AckSuccess   int64 `json:"ackOk,omitempty"`
	AckFailed    int64 `json:"ackFailed,omitempty"`
	Transactions int64 `json:"tx,omitempty"`
	DLQ          int64 `json:"dlq,omitempty"`
	Jobs         int64 `json:"jobs,omitempty"`     // requests received
	DBErrors     int64 `json:"dbErrors,omitempty"` // failed storage file operations
	LagSum       int64 `json:"lagSum,omitempty"`
	LagMax       int64 `json:"lagMax,omitempty"`
	Samples      int64 `json:"samples,omitempty"`
	LoopLagSum   int64 `json:"loopLagSum,omitempty"` // ms, how late the sampler's tick fired
	LoopLagMax   int64 `json:"loopLagMax,omitempty"`
	JobsSum      int64 `json:"jobsSum,omitempty"` // requests in flight, parked long-polls not counted
	JobsMax      int64 `json:"jobsMax,omitempty"`
}

func (n *nodeMinute) add(o *nodeMinute) {
	n.PushRequests += o.PushRequests
	n.PushMessages += o.PushMessages
	n.PopRequests += o.PopRequests
	n.PopMessages += o.PopMessages
	n.AckRequests += o.AckRequests
	n.AckMessages += o.AckMessages
	n.AckSuccess += o.AckSuccess
	n.AckFailed += o.AckFailed
	n.Transactions += o.Transactions
	n.DLQ += o.DLQ
	n.Jobs += o.Jobs
	n.DBErrors += o.DBErrors
	n.LagSum += o.LagSum
	n.LagMax = max(n.LagMax, o.LagMax)
	n.Samples += o.Samples
	n.LoopLagSum += o.LoopLagSum
	n.LoopLagMax = max(n.LoopLagMax, o.LoopLagMax)
	n.JobsSum += o.JobsSum
	n.JobsMax = max(n.JobsMax, o.JobsMax)
}

// System metrics sampled every second (system-metrics' metrics).
const (
	sysCPUUser = iota // process CPU % × 100 in user mode over the interval
	sysCPUSystem
	sysRSS
	sysVirtual
	sysInflight // requests in flight (registries.response)
	numSys
)

// sysStat is one system metric over a minute: the sum of its samples
// (the mean is Sum / Samples), their min and max and the last one.
type sysStat struct {
	Sum  int64 `json:"sum"`
	Min  int64 `json:"min"`
	Max  int64 `json:"max"`
	Last int64 `json:"last"`
}

func (s *sysStat) sample(v int64, first bool) {
	if first {
		*s = sysStat{Sum: v, Min: v, Max: v, Last: v}
		return
	}
	s.Sum += v
	s.Min, s.Max, s.Last = min(s.Min, v), max(s.Max, v), v
}

// retentionMinute is what the leader's retention sweeps deleted in a
// minute: messages by retention (retentionSeconds or
// completedRetentionSeconds: the sweep does not tell them apart), messages
// evicted by maxWaitTimeSeconds, and the partitions each sweep cut
// (Queen's history records).
type retentionMinute struct {
	Retention int64 `json:"retention,omitempty"`
	Evicted   int64 `json:"evicted,omitempty"`
	Events    int64 `json:"events,omitempty"`
}

// minuteRecord is one node's minute.
type minuteRecord struct {
	At        int64           `json:"at"`               // unix minute
	Queues    []queueMinute   `json:"queues,omitempty"` // by name once sealed
	Node      nodeMinute      `json:"node"`
	Sys       [numSys]sysStat `json:"sys"`
	Retention retentionMinute `json:"retention"`
}

// ring is one node's sealed minutes, oldest first, within the bounds.
type ring struct {
	minutes []minuteRecord
	entries int        // queue entries across minutes
	totals  nodeMinute // running totals since the node started
	port    int
	seen    time.Time // when the node last shipped (peers)
}

// put adds or replaces the minute m.At.
func (r *ring) put(m minuteRecord) {
	m.Queues = capQueues(m.Queues)
	i, found := slices.BinarySearchFunc(r.minutes, m.At, func(x minuteRecord, at int64) int { return cmp.Compare(x.At, at) })
	if found {
		r.entries -= len(r.minutes[i].Queues)
		r.minutes[i] = m
	} else {
		r.minutes = slices.Insert(r.minutes, i, m)
	}
	r.entries += len(m.Queues)
}

// trim drops the minutes older than the window ending at now (a unix
// minute), then the oldest ones while the queue entries exceed their cap.
func (r *ring) trim(now int64) {
	drop := 0
	for drop < len(r.minutes) && (r.minutes[drop].At <= now-analyticsMinutes || r.entries > analyticsQueueEntries) {
		r.entries -= len(r.minutes[drop].Queues)
		drop++
	}
	if drop > 0 {
		r.minutes = slices.Delete(r.minutes, 0, drop)
	}
}

// span returns the minutes from..to (unix minutes, inclusive), shared:
// sealed records are never modified, only replaced.
func (r *ring) span(from, to int64) []minuteRecord {
	cmpAt := func(x minuteRecord, at int64) int { return cmp.Compare(x.At, at) }
	i, _ := slices.BinarySearchFunc(r.minutes, from, cmpAt)
	j, found := slices.BinarySearchFunc(r.minutes, to, cmpAt)
	if found {
		j++
	}
	return slices.Clone(r.minutes[i:max(i, j)])
}

// capQueues folds the queues of a minute past analyticsQueuesPerMinute
// (by name) into analyticsOtherQueue.
func capQueues(qs []queueMinute) []queueMinute {
	if len(qs) <= analyticsQueuesPerMinute {
		return qs
	}
	slices.SortFunc(qs, func(a, b queueMinute) int { return strings.Compare(a.Queue, b.Queue) })
	other := queueMinute{Queue: analyticsOtherQueue, Partitions: -1}
	kept := make([]queueMinute, 0, analyticsQueuesPerMinute)
	for i := range qs {
		if qs[i].Queue != analyticsOtherQueue && len(kept) < analyticsQueuesPerMinute-1 {
			kept = append(kept, qs[i])
			continue
		}
		other.add(&qs[i])
	}
	other.Partitions = -1 // a count of several queues' partitions means nothing
	return append(kept, other)
}

// unixMinute is t's minute since the epoch.
func unixMinute(t time.Time) int64 {
	s := t.Unix()
	if s < 0 {
		return (s - 59) / 60
	}
	return s / 60
}

// minute returns the record being counted, starting it at now's minute if
// there is none; mu is held. A minute the clock has passed keeps counting
// until the sampler seals it (at most a sample interval late).
func (a *Analytics) minute() *minuteRecord {
	if a.cur.At == 0 {
		a.cur.At = unixMinute(a.now())
	}
	return &a.cur
}

// queue returns the current minute's entry for name, creating it (or the
// overflow entry once the minute has analyticsQueuesPerMinute-1 queues);
// mu is held.
func (a *Analytics) queue(name string) *queueMinute {
	m := a.minute()
	if i, ok := a.idx[name]; ok {
		return &m.Queues[i]
	}
	if len(m.Queues) >= analyticsQueuesPerMinute-1 {
		name = analyticsOtherQueue
		if i, ok := a.idx[name]; ok {
			return &m.Queues[i]
		}
	}
	name = strings.Clone(name)
	a.idx[name] = len(m.Queues)
	m.Queues = append(m.Queues, queueMinute{Queue: name, Partitions: -1})
	return &m.Queues[len(m.Queues)-1]
}

// firstInCall reports whether q is touched for the first time by the
// current counting call (a request counts once per queue).
func (a *Analytics) firstInCall(q *queueMinute) bool {
	if q.call == a.call {
		return false
	}
	q.call = a.call
	return true
}

// lagMillis is a delivery's lag: now − createdAt, in whole ms (rounded),
// never negative.
func lagMillis(nowUS, createdAt int64) int64 {
	return (max(nowUS-createdAt, 0) + 500) / 1000
}

// Pushed counts a push request's results (the server's countPushed calls
// it on the one node that counts the push: ARCHITECTURE.md "Counting
// once").
func (a *Analytics) Pushed(res []engine.PushResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.call++
	n := &a.minute().Node
	n.PushRequests++
	var q *queueMinute
	for i := range res {
		r := &res[i]
		if q == nil || q.Queue != r.Queue {
			q = a.queue(r.Queue)
		}
		if a.firstInCall(q) {
			q.PushRequests++
		}
		if r.Status == engine.Queued || r.Status == engine.Duplicate || r.Status == engine.Pending {
			q.PushMessages++
			n.PushMessages++
		}
	}
}

// Popped counts a pop request: its delivered messages and their lag, or an
// empty pop of queue ("" for a discovery pop, counted on the node only).
// The messages of an autoAck pop were acked by it (completed): they count
// as acked successes too, what status' "processed" shows, as
// messages.completed does.
func (a *Analytics) Popped(queue string, autoAck bool, res *engine.PopResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now().UnixMicro()
	n := &a.minute().Node
	n.PopRequests++
	n.DLQ += int64(res.DeadLettered)
	if len(res.Messages) == 0 {
		if queue != "" {
			a.queue(queue).PopEmpty++
		}
		return
	}
	var q *queueMinute
	for i := range res.Messages {
		m := &res.Messages[i]
		if q == nil || q.Queue != m.Queue {
			q = a.queue(m.Queue)
		}
		lag := lagMillis(now, m.CreatedAt)
		q.PopMessages++
		q.LagSum += lag
		q.LagMax = max(q.LagMax, lag)
		n.PopMessages++
		n.LagSum += lag
		n.LagMax = max(n.LagMax, lag)
		if autoAck {
			q.AckSuccess++
			n.AckMessages++
			n.AckSuccess++
		}
	}
}

// Acked counts an ack request: the broker's results and the items refused
// before reaching it (a malformed id: failed, with no queue).
func (a *Analytics) Acked(res []engine.AckResult, refused int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.call++
	n := &a.minute().Node
	n.AckRequests++
	n.AckMessages += int64(len(res) + refused)
	n.AckFailed += int64(refused)
	a.countAcks(n, res, true)
}

// countAcks counts ack results into n and their queues, and with requests
// one ack request for each queue they name; mu is held.
func (a *Analytics) countAcks(n *nodeMinute, res []engine.AckResult, requests bool) {
	for i := range res {
		r := &res[i]
		if r.DLQ {
			n.DLQ++
		}
		if !r.Success {
			n.AckFailed++
		} else {
			n.AckSuccess++
		}
		if r.Queue == "" {
			continue
		}
		q := a.queue(r.Queue)
		if a.firstInCall(q) && requests {
			q.AckRequests++
		}
		if r.Success {
			q.AckSuccess++
		} else {
			q.AckFailed++
		}
	}
}

// Transacted counts a transaction that applied: one transaction for the
// node and for each queue it touched, its pushes and its acks.
func (a *Analytics) Transacted(res *engine.TxResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.call++
	n := &a.minute().Node
	n.Transactions++
	n.AckMessages += int64(len(res.Acks))
	for i := range res.Pushes {
		r := &res.Pushes[i]
		q := a.queue(r.Queue)
		if a.firstInCall(q) {
			q.Transactions++
		}
		if r.Status == engine.Queued || r.Status == engine.Duplicate || r.Status == engine.Pending {
			q.PushMessages++
			n.PushMessages++
		}
	}
	for i := range res.Acks {
		if q := res.Acks[i].Queue; q != "" {
			if e := a.queue(q); a.firstInCall(e) {
				e.Transactions++
			}
		}
	}
	a.countAcks(n, res.Acks, false)
}

// Park moves the parked gauge of queue by delta ("" is not counted).
func (a *Analytics) Park(queue string, delta int) {
	if queue == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.parked[queue] += delta; a.parked[queue] <= 0 {
		delete(a.parked, queue)
	}
}

// RecordSweep counts what a retention sweep deleted in the current minute.
// `queen serve` passes it to the Raft node (raft.Options.OnSweep), which
// calls it on the leader after each sweep.
func (a *Analytics) RecordSweep(res engine.SweepResult) {
	if res.Messages == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	r := &a.minute().Retention
	r.Retention += res.Messages - res.Evicted
	r.Evicted += res.Evicted
	r.Events += int64(res.Partitions)
}

// procStats is the process as the operating system reports it.
type procStats struct {
	user, system time.Duration // CPU time since the process started
	rss, virtual int64         // bytes
}

// gauges is one sample's instantaneous values.
type gauges struct {
	loopLag  time.Duration // how late the sampler's tick fired
	proc     procStats
	wall     time.Time // when proc was read
	requests uint64    // requests received since the server started
}

// sample records one sample of the gauges into the current minute.
func (a *Analytics) sample(g gauges) {
	inflight := a.inflight.Load()
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.minute()
	n := &m.Node
	first := n.Samples == 0
	n.Samples++
	var parked int64
	for q, c := range a.parked {
		a.queue(q).ParkedSum += int64(c)
		parked += int64(c)
	}
	lag := g.loopLag.Milliseconds()
	n.LoopLagSum += lag
	n.LoopLagMax = max(n.LoopLagMax, lag)
	jobs := max(inflight-parked, 0)
	n.JobsSum += jobs
	n.JobsMax = max(n.JobsMax, jobs)
	n.Jobs += int64(g.requests - a.requestsSeen)
	a.requestsSeen = g.requests
	var user, system int64
	if wall := g.wall.Sub(a.procAt); !a.procAt.IsZero() && wall > 0 {
		user = int64((g.proc.user - a.proc.user) * 10000 / wall)
		system = int64((g.proc.system - a.proc.system) * 10000 / wall)
	}
	a.proc, a.procAt = g.proc, g.wall
	m.Sys[sysCPUUser].sample(max(user, 0), first)
	m.Sys[sysCPUSystem].sample(max(system, 0), first)
	m.Sys[sysRSS].sample(g.proc.rss, first)
	m.Sys[sysVirtual].sample(g.proc.virtual, first)
	m.Sys[sysInflight].sample(inflight, first)
}

// rotate seals the current minute once the clock has passed it: it reads
// the partition counts of its queues and the storage error count from b
// (without holding mu), then files the minute in the node's ring and ages
// every ring out. Queries call it too, so a minute that is over is served
// without waiting for the sampler.
func (a *Analytics) rotate(b Broker) {
	a.rotating.Lock()
	defer a.rotating.Unlock()
	now := unixMinute(a.now())
	a.mu.Lock()
	at := a.cur.At
	if at == 0 || at >= now {
		a.mu.Unlock()
		return
	}
	names := make([]string, len(a.cur.Queues))
	for i := range a.cur.Queues {
		names[i] = a.cur.Queues[i].Queue
	}
	a.mu.Unlock()
	parts := make([]int64, len(names))
	for i, name := range names {
		parts[i] = -1
		if name == analyticsOtherQueue {
			continue
		}
		if q, err := b.Queue(name); err == nil {
			parts[i] = int64(len(q.Partitions))
		}
	}
	errs := b.Status().StorageErrors
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.cur
	for i := range names {
		m.Queues[i].Partitions = parts[i]
	}
	if errs >= a.storageErrors {
		m.Node.DBErrors += int64(errs - a.storageErrors)
	}
	a.storageErrors = errs
	slices.SortFunc(m.Queues, func(x, y queueMinute) int { return strings.Compare(x.Queue, y.Queue) })
	a.self.put(m)
	a.self.totals.add(&m.Node)
	a.cur = minuteRecord{}
	clear(a.idx)
	a.age(now)
}

// age trims every ring to the window ending at now and forgets the nodes
// with nothing left; mu is held.
func (a *Analytics) age(now int64) {
	a.self.trim(now)
	for id, r := range a.peers {
		if r.trim(now); len(r.minutes) == 0 {
			delete(a.peers, id)
		}
	}
}
