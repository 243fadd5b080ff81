package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// The load driver. Each connection is one goroutine with its own request,
// response, body buffer and histograms, so the hot loop allocates nothing and
// shares only a few atomic counters: the driver must never be what limits the
// broker. Bodies are written by appending into a reused buffer; replies are
// read only as far as needed (a push reply is counted, a pop reply is
// scanned for the three fields an ack needs).

// Run drives the broker at opts.URLs with opts.Workload until the run's
// duration, its message count, the queues running dry (popack) or ctx ends
// it, and reports what it measured. progress, when not nil, receives a
// progress bar; the caller decides whether it is a terminal. An error means
// the options were invalid; failed requests are counted in the report.
func Run(ctx context.Context, opts Options, progress io.Writer) (Report, error) {
	if err := opts.Validate(); err != nil {
		return Report{}, err
	}
	r := newRun(ctx, opts)
	defer r.close()
	var bar *progressBar
	if progress != nil {
		bar = startProgress(r, progress)
	}
	var wg sync.WaitGroup
	workers := make([]*worker, opts.Conns)
	pushers := opts.pushConns()
	r.pushersLeft.Store(int64(pushers))
	for i := range workers {
		w := r.newWorker(i, i < pushers)
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch {
			case w.pusher:
				w.runPush()
			case r.opts.Workload == Read:
				w.runRead()
			default:
				w.runPop()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(r.start)
	if bar != nil {
		bar.stop()
	}
	return r.report(workers, elapsed), nil
}

// run is the state the connections share.
type run struct {
	opts     Options
	ctx      context.Context
	clients  []*fasthttp.HostClient
	bases    []string
	payloads [][]byte
	txnBase  []byte   // transaction id prefix, unique per run
	queues   []string // queue names
	parts    []string // partition names; nil: the Default partition
	groups   []string // consumer groups; "" is queue mode
	start    time.Time
	deadline time.Time // the run's time limit
	hard     time.Time // no request outlives this

	pushed, popped, acked atomic.Int64
	pushClaims            atomic.Int64 // messages claimed by pushers (Messages limit)
	paced                 atomic.Int64 // push requests scheduled so far (Rate)
	ackClaims             atomic.Int64 // messages claimed by poppers (Messages limit)
	lastDelivery          atomic.Int64 // unix ns of the last delivered pop, or of the pushers finishing
	lastDone              atomic.Int64 // unix ns of the last successful push or ack reply
	pushersLeft           atomic.Int64
}

func newRun(ctx context.Context, o Options) *run {
	r := &run{opts: o, ctx: ctx, start: time.Now()}
	r.deadline = r.start.Add(o.runDuration())
	r.hard = r.deadline.Add(min(o.Timeout, 10*time.Second))
	r.lastDelivery.Store(r.start.UnixNano())
	for _, u := range o.URLs {
		t, _ := parseTarget(u, o.AllowRemote) // validated
		r.bases = append(r.bases, t.base)
		r.clients = append(r.clients, &fasthttp.HostClient{
			Addr:                          t.addr,
			IsTLS:                         t.isTLS,
			Name:                          "queen-bench",
			NoDefaultUserAgentHeader:      true,
			MaxConns:                      o.Conns,
			MaxConnWaitTimeout:            o.Timeout,
			MaxIdleConnDuration:           time.Minute,
			ReadTimeout:                   o.Timeout,
			WriteTimeout:                  o.Timeout,
			ReadBufferSize:                16 << 10,
			WriteBufferSize:               64 << 10,
			DisableHeaderNamesNormalizing: true,
			DisablePathNormalizing:        true,
		})
	}
	seed := o.Seed
	if seed == 0 {
		seed = uint64(r.start.UnixNano())
	}
	// Distinct documents, up to 64 MiB of them.
	r.payloads = Payloads(min(max((64<<20)/o.Size, 16), 1024), o.Size, seed)
	// Transaction ids must be fresh on every run, whatever the seed: a
	// rerun on the same queue would otherwise be deduplicated.
	r.txnBase = strconv.AppendUint([]byte("bench-"), uint64(r.start.UnixNano()), 36)
	r.txnBase = append(r.txnBase, '-')
	if o.Queues == 1 {
		r.queues = []string{o.Queue}
	} else {
		for i := range o.Queues {
			r.queues = append(r.queues, o.Queue+"-"+strconv.Itoa(i))
		}
	}
	if o.Partitions > 1 {
		for i := range o.Partitions {
			r.parts = append(r.parts, "p"+strconv.Itoa(i))
		}
	}
	r.groups = []string{""}
	if o.Groups > 0 {
		r.groups = r.groups[:0]
		for i := range o.Groups {
			r.groups = append(r.groups, "bench-g"+strconv.Itoa(i))
		}
	}
	return r
}

func (r *run) close() {
	for _, c := range r.clients {
		c.CloseIdleConnections()
	}
}

// timeLeft reports whether the run's time is not up and ctx is live.
func (r *run) timeLeft() bool {
	return r.ctx.Err() == nil && time.Now().Before(r.deadline)
}

// drained reports whether poppers should stop for lack of messages: no
// delivery for Idle, and (mixed) no pusher left.
func (r *run) drained() bool {
	if r.pushersLeft.Load() > 0 {
		return false
	}
	return time.Since(time.Unix(0, r.lastDelivery.Load())) >= r.opts.Idle
}

// claim takes up to want messages of the run's Messages budget from c; 0
// means the budget is spent. The budget counts pushes, except in popack,
// where it counts acks.
func (r *run) claim(c *atomic.Int64, want int) int {
	if r.opts.Messages == 0 || (c == &r.ackClaims) != (r.opts.Workload == PopAck) {
		return want
	}
	end := c.Add(int64(want))
	if over := end - r.opts.Messages; over > 0 {
		if over >= int64(want) {
			c.Add(-int64(want))
			return 0
		}
		c.Add(-over)
		return want - int(over)
	}
	return want
}

// worker is one connection.
type worker struct {
	r      *run
	id     int
	pusher bool
	client *fasthttp.HostClient
	base   string

	req, ack *fasthttp.Request
	resp     *fasthttp.Response
	body     []byte // request body being built
	uri      []byte
	reply    popReply
	seq      int
	backoff  time.Duration
	timer    *time.Timer

	pushLat, popLat, ackLat *Histogram
	readLat                 *Histogram
	pushReqs, popReqs       int64
	ackReqs, emptyPops      int64
	readReqs, readsOK       int64
	errs                    map[string]int64
}

func (r *run) newWorker(id int, pusher bool) *worker {
	w := &worker{r: r, id: id, pusher: pusher, client: r.clients[id%len(r.clients)], base: r.bases[id%len(r.bases)],
		req: fasthttp.AcquireRequest(), resp: fasthttp.AcquireResponse(), errs: map[string]int64{},
		seq: id * 7919}
	w.req.Header.SetContentType("application/json")
	switch {
	case pusher:
		w.pushLat = new(Histogram)
		w.req.Header.SetMethod(fasthttp.MethodPost)
		w.req.SetRequestURI(w.base + "/api/v1/push")
	case r.opts.Workload == Read:
		w.readLat = new(Histogram)
		w.req.Header.SetMethod(fasthttp.MethodGet)
		w.req.SetRequestURI(w.base + r.opts.readPath())
	default:
		w.popLat, w.ackLat = new(Histogram), new(Histogram)
		w.req.Header.SetMethod(fasthttp.MethodGet)
		w.ack = fasthttp.AcquireRequest()
		w.ack.Header.SetMethod(fasthttp.MethodPost)
		w.ack.Header.SetContentType("application/json")
		w.ack.SetRequestURI(w.base + "/api/v1/ack/batch")
	}
	return w
}

func (w *worker) release() {
	fasthttp.ReleaseRequest(w.req)
	fasthttp.ReleaseResponse(w.resp)
	if w.ack != nil {
		fasthttp.ReleaseRequest(w.ack)
	}
	if w.timer != nil {
		w.timer.Stop()
	}
}

// do sends req and reads the reply into w.resp, within the request timeout
// and the run's hard end.
func (w *worker) do(req *fasthttp.Request) error {
	dl := time.Now().Add(w.r.opts.Timeout)
	if dl.After(w.r.hard) {
		dl = w.r.hard
	}
	return w.client.DoDeadline(req, w.resp, dl)
}

// failed counts a failed exchange (a transport error or a non-2xx status),
// pauses before the next attempt, and reports whether it failed.
func (w *worker) failed(op string, err error) bool {
	switch code := w.resp.StatusCode(); {
	case err != nil:
		w.errs[op+"/"+errorClass(err)]++
	case code/100 != 2:
		w.errs[op+"/http_"+strconv.Itoa(code)]++
	default:
		w.backoff = 0
		return false
	}
	w.backoff = min(max(2*w.backoff, 5*time.Millisecond), 250*time.Millisecond)
	w.sleep(w.backoff)
	return true
}

// errorClass names a transport error for the report.
func errorClass(err error) string {
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout):
		return "timeout"
	case errors.Is(err, fasthttp.ErrNoFreeConns), errors.Is(err, fasthttp.ErrConnPoolStrategyNotImpl):
		return "no_free_conns"
	case errors.Is(err, fasthttp.ErrConnectionClosed):
		return "conn_closed"
	}
	return "transport"
}

// sleep waits d, or less if the run ends first.
func (w *worker) sleep(d time.Duration) {
	d = min(d, time.Until(w.r.deadline))
	if d <= 0 {
		return
	}
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	select {
	case <-w.timer.C:
	case <-w.r.ctx.Done():
	}
}

// runPush pushes batches until the run ends or the Messages budget is spent.
func (w *worker) runPush() {
	r := w.r
	defer w.release()
	defer func() {
		if r.pushersLeft.Add(-1) == 0 {
			r.lastDelivery.Store(time.Now().UnixNano()) // poppers get Idle from now to drain
		}
	}()
	for k := 0; r.timeLeft(); k++ {
		n := r.claim(&r.pushClaims, r.opts.Batch)
		if n == 0 {
			return
		}
		if r.opts.Rate > 0 {
			// The slot-th request of the run is due at start + slot*batch/rate.
			slot := r.paced.Add(1) - 1
			due := r.start.Add(time.Duration(float64(slot) * float64(r.opts.Batch) / r.opts.Rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				w.sleep(d)
			}
			if !r.timeLeft() {
				return
			}
		}
		queue := r.queues[(w.id+k)%len(r.queues)]
		part := ""
		if r.parts != nil {
			part = r.parts[(w.id*7+k)%len(r.parts)]
		}
		w.body = w.appendPush(w.body[:0], queue, part, n)
		w.req.SetBodyRaw(w.body)
		start := time.Now()
		err := w.do(w.req)
		w.pushReqs++
		if w.failed("push", err) {
			continue
		}
		w.pushLat.Record(time.Since(start))
		reply := w.resp.Body()
		bad := bytes.Count(reply, []byte(`"status":"failed"`))
		dup := bytes.Count(reply, []byte(`"status":"duplicate"`))
		if bad > 0 {
			w.errs["push/item_failed"] += int64(bad)
		}
		if dup > 0 {
			w.errs["push/duplicate"] += int64(dup)
		}
		r.pushed.Add(int64(n - bad - dup))
		r.lastDone.Store(time.Now().UnixNano())
	}
}

// appendPush appends a push body of n items to one partition.
func (w *worker) appendPush(b []byte, queue, part string, n int) []byte {
	b = append(b, `{"items":[`...)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"queue":"`...)
		b = append(b, queue...)
		if part != "" {
			b = append(b, `","partition":"`...)
			b = append(b, part...)
		}
		b = append(b, `","transactionId":"`...)
		b = append(b, w.r.txnBase...)
		b = strconv.AppendInt(b, int64(w.id), 36)
		b = append(b, '-')
		b = strconv.AppendInt(b, int64(w.seq), 36)
		b = append(b, `","payload":`...)
		b = append(b, w.r.payloads[w.seq%len(w.r.payloads)]...)
		b = append(b, '}')
		w.seq++
	}
	return append(b, `]}`...)
}

// runPop pops and acks until the run ends, the Messages budget is acked, or
// the queues stay empty for Idle.
func (w *worker) runPop() {
	r := w.r
	defer w.release()
	group := r.groups[w.id%len(r.groups)]
	empties := 0
	for k := 0; r.timeLeft(); k++ {
		if r.drained() {
			return
		}
		want := r.claim(&r.ackClaims, r.opts.Batch)
		if want == 0 {
			if r.acked.Load() >= r.opts.Messages {
				return
			}
			w.sleep(time.Millisecond) // others hold the rest of the budget
			continue
		}
		got := w.popAck(r.queues[(w.id+k)%len(r.queues)], group, want)
		if got < want && r.opts.Messages > 0 && r.opts.Workload == PopAck {
			r.ackClaims.Add(int64(got - want))
		}
		if got > 0 {
			empties = 0
			continue
		}
		// Empty (or failed): back off a little, up to 20 ms, so idle
		// poppers do not spin against the broker.
		empties++
		w.sleep(time.Duration(min(empties, 20)) * time.Millisecond)
	}
}

// popAck pops up to want messages of queue for group and acks them all;
// it returns how many were acked.
func (w *worker) popAck(queue, group string, want int) int {
	r := w.r
	w.uri = append(w.uri[:0], w.base...)
	w.uri = append(w.uri, "/api/v1/pop/queue/"...)
	w.uri = append(w.uri, queue...)
	w.uri = append(w.uri, "?wait=false&batch="...)
	w.uri = strconv.AppendInt(w.uri, int64(want), 10)
	if group != "" {
		w.uri = append(w.uri, "&consumerGroup="...)
		w.uri = append(w.uri, group...)
	}
	w.req.SetRequestURIBytes(w.uri)
	start := time.Now()
	err := w.do(w.req)
	w.popReqs++
	if w.failed("pop", err) {
		return 0
	}
	popped := time.Since(start)
	if err := scanPop(w.resp.Body(), &w.reply); err != nil {
		w.errs["pop/decode"]++
		return 0
	}
	n := len(w.reply.messages)
	if n == 0 {
		w.emptyPops++
		return 0
	}
	w.popLat.Record(popped)
	r.popped.Add(int64(n))
	r.lastDelivery.Store(time.Now().UnixNano())

	// The ack body copies the addresses out of the pop reply before the
	// response buffer is reused.
	w.body = appendAck(w.body[:0], &w.reply, group)
	w.ack.SetBodyRaw(w.body)
	start = time.Now()
	err = w.do(w.ack)
	w.ackReqs++
	if w.failed("ack", err) {
		return 0
	}
	w.ackLat.Record(time.Since(start))
	ok := bytes.Count(w.resp.Body(), []byte(`"success":true`))
	if ok < n {
		w.errs["ack/item_failed"] += int64(n - ok)
	}
	r.acked.Add(int64(ok))
	r.lastDone.Store(time.Now().UnixNano())
	return ok
}

// appendAck appends an ack/batch body completing every message of p.
func appendAck(b []byte, p *popReply, group string) []byte {
	b = append(b, `{"acknowledgments":[`...)
	for i, m := range p.messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"transactionId":"`...)
		b = append(b, m.transactionID...)
		b = append(b, `","partitionId":"`...)
		b = append(b, m.partitionID...)
		lease := m.leaseID
		if len(lease) == 0 {
			lease = p.leaseID
		}
		if len(lease) > 0 {
			b = append(b, `","leaseId":"`...)
			b = append(b, lease...)
		}
		b = append(b, `","status":"completed"}`...)
	}
	b = append(b, ']')
	if group != "" {
		b = append(b, `,"consumerGroup":"`...)
		b = append(b, group...)
		b = append(b, '"')
	}
	return append(b, '}')
}

// runRead GETs the read path until the run ends.
func (w *worker) runRead() {
	r := w.r
	defer w.release()
	for r.timeLeft() {
		t0 := time.Now()
		err := w.do(w.req)
		w.readReqs++
		if w.failed("read", err) {
			continue
		}
		w.readLat.Record(time.Since(t0))
		w.readsOK++
		r.lastDone.Store(time.Now().UnixNano())
	}
}
