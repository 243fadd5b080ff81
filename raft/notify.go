package raft

import (
	"slices"
	"sync"
)

// touchSet collects the queues an apply batch may have made deliverable.
type touchSet struct {
	queues []string
	all    bool
}

// add adds queues to the set ("" is no queue).
func (t *touchSet) add(queues ...string) {
	for _, q := range queues {
		if q != "" && !slices.Contains(t.queues, q) {
			t.queues = append(t.queues, q)
		}
	}
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

// count returns the number of registered watches.
func (n *notifier) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, set := range n.watchers {
		c += len(set)
	}
	return c
}
