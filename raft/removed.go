package raft

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	hraft "github.com/hashicorp/raft"
)

// A node that was removed.
//
// A leader stops replicating to a server once the configuration that
// removes it is appended, so the removed server may never apply it: it
// keeps its old configuration, knows no leader, and went on answering
// clients (a push relayed with what it last knew, a pop of its stale
// store). So a node that has known no leader for removalAfter asks the other
// servers of its configuration what they hold (the status probe,
// identity.go). When a majority of them answer with state and none counts
// it a member, it has been removed: Removed is closed, and serve stops.
//
// No member can be taken for removed this way: the configuration that added
// it was appended on a majority of the configuration it belongs to, so of
// any majority of the others at least one lists it (a server lists the
// configurations it has appended, committed or not).
var (
	removalAfter = 10 * time.Second
	removalEvery = 2 * time.Second
)

// removal watches for this node's removal (see above).
type removal struct {
	once sync.Once
	ch   chan struct{}
}

func newRemoval() *removal { return &removal{ch: make(chan struct{})} }

// Removed is closed once the node knows it was removed from the cluster.
func (r *removal) Removed() <-chan struct{} { return r.ch }

// watch runs until done: while leaderless() has held for removalAfter, it
// asks the servers conf() lists every removalAfter, and closes the channel
// when they say this node was removed.
func (r *removal) watch(s *streamLayer, self string, leaderless func() bool, conf func() (hraft.Configuration, error),
	log *slog.Logger, done <-chan struct{}) {
	var since, asked time.Time
	t := time.NewTicker(removalEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-done:
			return
		}
		if !leaderless() {
			since = time.Time{}
			continue
		}
		if since.IsZero() {
			since = time.Now()
		}
		if time.Since(since) < removalAfter || time.Since(asked) < removalAfter {
			continue
		}
		asked = time.Now()
		c, err := conf()
		if err != nil {
			continue
		}
		if members, ok := removedFrom(s, self, c); ok {
			log.Warn("raft: this node was removed from the cluster: it stops serving", "members", strings.Join(members, ", "))
			r.once.Do(func() { close(r.ch) })
			return
		}
	}
}

// removedFrom asks the servers of conf other than self, and reports
// whether a majority of them answered with state and none lists self, with
// the members they list.
func removedFrom(s *streamLayer, self string, conf hraft.Configuration) ([]string, bool) {
	var others []hraft.Server
	for _, srv := range conf.Servers {
		if string(srv.ID) != self {
			others = append(others, srv)
		}
	}
	if len(others) == 0 {
		return nil, false
	}
	var members []string
	answered := 0
	for _, srv := range others {
		st, err := s.askStatus(string(srv.Address))
		if err != nil || st.Node != string(srv.ID) || !st.State || !st.Known {
			continue
		}
		if slices.Contains(st.Members, self) {
			return nil, false
		}
		answered++
		for _, m := range st.Members {
			if !slices.Contains(members, m) {
				members = append(members, m)
			}
		}
	}
	slices.Sort(members)
	return members, answered > len(others)/2
}

// Removed is closed once this node knows it was removed from the cluster;
// a Host's groups leave that to the Host.
func (n *Node) Removed() <-chan struct{} { return n.removal.Removed() }

// leaderless reports whether the node knows no leader.
func (n *Node) leaderless() bool {
	_, id := n.raft.LeaderWithID()
	return id == ""
}
