package analytics

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
)

// Host is what the recorder needs from the HTTP server it serves: package
// server implements it and hands it over with Bind.
type Host interface {
	// Queue and Queues read the broker's queues as this node holds them:
	// the partition counts of a sealed minute, queue-ops' created
	// partitions.
	Queue(name string) (engine.QueueInfo, error)
	Queues() ([]engine.QueueInfo, error)
	// StorageErrors is how many storage file operations have failed on
	// this node since it started.
	StorageErrors() uint64
	// NodeID names this node in the series.
	NodeID() string
	// Relay has the leader answer the request when this node follows one,
	// and reports whether it did; false when this node answers it itself
	// (it leads, or knows no leader to relay to).
	Relay(ctx *fasthttp.RequestCtx) bool
	// Fail answers the request with err as the HTTP edge's error table
	// maps it ({"error","code"}).
	Fail(ctx *fasthttp.RequestCtx, err error)
}

// Bind attaches the recorder to the server it serves, whose HTTP port
// system-metrics reports. A server binds its recorder once, before it
// serves.
func (a *Analytics) Bind(h Host, port int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.host, a.port = h, port
}

// Once runs start the first time it is called: the server starts the
// recorder's loops with it (SampleLoop, and its shipments with Ship).
func (a *Analytics) Once(start func()) { a.started.Do(start) }

// RequestStarted counts a request the server is handling, until its
// RequestDone (registries.response, the jobs gauge).
func (a *Analytics) RequestStarted() { a.inflight.Add(1) }

// RequestDone ends a request counted by RequestStarted.
func (a *Analytics) RequestDone() { a.inflight.Add(-1) }

// ShipInterval is how often a follower sends its sealed minutes to the
// leader (Options.ShipInterval).
func (a *Analytics) ShipInterval() time.Duration { return a.shipEvery }

// SampleLoop samples the gauges every Options.SampleInterval and seals
// each minute once the clock has passed it, until stop is closed.
// requests reports the requests the server has received since it started.
func (a *Analytics) SampleLoop(stop <-chan struct{}, requests func() uint64) {
	t := time.NewTicker(a.sampleEvery)
	defer t.Stop()
	for {
		var tick time.Time
		select {
		case <-stop:
			return
		case tick = <-t.C:
		}
		lag := time.Since(tick)
		a.rotate(a.host)
		a.sample(gauges{loopLag: lag, proc: readProc(), wall: time.Now(), requests: requests()})
	}
}
