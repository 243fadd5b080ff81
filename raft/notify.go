package raft

import (
	"sync"

	"github.com/queenmq/queen/engine"
)

// touchSet collects the queues an apply batch may have made deliverable.
type touchSet struct {
	queues []string
	all    bool
}

// addQueued adds the queues of the pushes that were queued, and returns res.
func (t *touchSet) addQueued(res []engine.PushResult) []engine.PushResult {
	for i := range res {
		if res[i].Status == engine.Queued {
			t.add(res[i].Queue)
		}
	}
	return res
}

func (t *touchSet) add(q string) {
	if q == "" {
		return
	}
	for _, x := range t.queues {
		if x == q {
			return
		}
	}
	t.queues = append(t.queues, q)
}

// notifier wakes parked long-poll pops after applies. Sends never block: each
// watcher has a one-slot channel, and one pending wake-up is enough.
type notifier struct {
	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{} // by queue; "" = every queue
}

func newNotifier() *notifier {
	return &notifier{watchers: map[string]map[chan struct{}]struct{}{}}
}

func (n *notifier) watch(queue string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	set := n.watchers[queue]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		n.watchers[queue] = set
	}
	set[ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.watchers[queue], ch)
		if len(n.watchers[queue]) == 0 {
			delete(n.watchers, queue)
		}
		n.mu.Unlock()
	}
}

func (n *notifier) notify(t touchSet) {
	if !t.all && len(t.queues) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	wake := func(set map[chan struct{}]struct{}) {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	if t.all {
		for _, set := range n.watchers {
			wake(set)
		}
		return
	}
	for _, q := range t.queues {
		wake(n.watchers[q])
	}
	wake(n.watchers[""])
}
