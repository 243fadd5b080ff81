package analytics

import (
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// Broker is the broker's state on this node as the recorder reads it:
// the queues (a sealed minute's partition counts, queue-ops' created
// partitions) and the status (this node's id, names the series; the
// storage errors since it started). Package server's Broker has it.
type Broker interface {
	Queue(name string) (engine.QueueInfo, error)
	Queues() ([]engine.QueueInfo, error)
	Status() raft.Status
}

// Bind attaches the recorder to the broker it measures, and names the HTTP
// port system-metrics reports. A server binds its recorder once, before it
// serves.
func (a *Analytics) Bind(b Broker, port int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.broker, a.port = b, port
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
		a.rotate(a.broker)
		a.sample(gauges{loopLag: lag, proc: readProc(), wall: time.Now(), requests: requests()})
	}
}
