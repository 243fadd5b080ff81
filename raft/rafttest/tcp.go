package rafttest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenmq/queen/internal/porttest"
	"github.com/queenmq/queen/raft"
)

// FreeAddrs returns n distinct loopback TCP addresses reserved for the rest
// of t (internal/porttest): tests run in parallel and restart nodes on their
// addresses, which a port picked by listen(:0) and closed does not survive.
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	return porttest.Addrs(t, n)
}

// OpenTCP opens node id on the TCP transport at addr (Options tuned for
// tests, then adjust) with its data in dir, and closes it at cleanup.
func OpenTCP(t testing.TB, id, dir, addr string, adjust func(*raft.Options)) *raft.Node {
	t.Helper()
	o := Options(id, dir)
	o.RaftAddr = addr
	o.HTTPAddr = "http-" + id
	o.RetentionInterval = 0 // a quiet node appends nothing by itself
	if adjust != nil {
		adjust(&o)
	}
	n, err := raft.Open(o)
	if err != nil {
		t.Fatalf("open %s at %s: %v", id, addr, err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// WaitLeader waits up to 20 s until one of nodes is leader and every other
// names it, and returns it.
func WaitLeader(t testing.TB, nodes ...*raft.Node) *raft.Node {
	t.Helper()
	var last string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var leader *raft.Node
		agree := true
		var desc []string
		for _, n := range nodes {
			st := n.Status()
			desc = append(desc, fmt.Sprintf("%s:%s(leader %q)", st.ID, st.Role, st.Leader))
			if st.Role == "leader" {
				leader = n
			}
		}
		if leader != nil {
			for _, n := range nodes {
				if n.Status().Leader != leader.Status().ID {
					agree = false
				}
			}
			if agree {
				return leader
			}
		}
		last = strings.Join(desc, " ")
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no leader all of %d nodes agree on within 20s: %s", len(nodes), last)
	return nil
}

// WaitApplied waits up to 20 s until every node has applied the same index,
// at least index, and then requires identical engine digests there.
func WaitApplied(t testing.TB, index uint64, nodes ...*raft.Node) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		at, same := nodes[0].Status().Applied, true
		for _, n := range nodes[1:] {
			same = same && n.Status().Applied == at
		}
		if same && at >= index {
			var digests [][32]byte
			for _, n := range nodes {
				d, err := n.Engine().Digest()
				if err != nil {
					t.Fatal(err)
				}
				digests = append(digests, d)
			}
			moved := false
			for _, n := range nodes {
				moved = moved || n.Status().Applied != at
			}
			if !moved {
				for i, d := range digests {
					if d != digests[0] {
						t.Fatalf("%s: engine digest at applied %d differs from %s's", nodes[i].Status().ID, at, nodes[0].Status().ID)
					}
				}
				return
			}
		}
		if time.Now().After(deadline) {
			var desc []string
			for _, n := range nodes {
				desc = append(desc, fmt.Sprintf("%s applied %d", n.Status().ID, n.Status().Applied))
			}
			t.Fatalf("after 20s the nodes have not all applied the same index >= %d: %s", index, strings.Join(desc, ", "))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Logs records a node's log messages for tests that wait on what a node
// reported (every level, debug included).
type Logs struct {
	mu   sync.Mutex
	msgs []string
}

// Logger returns a logger writing into l.
func (l *Logs) Logger() *slog.Logger { return slog.New(logsHandler{l: l}) }

// Count returns how many records so far had a message containing s or an
// attribute value containing s.
func (l *Logs) Count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}

type logsHandler struct {
	l     *Logs
	attrs []slog.Attr
}

func (h logsHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h logsHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.l.mu.Lock()
	h.l.msgs = append(h.l.msgs, b.String())
	h.l.mu.Unlock()
	return nil
}

func (h logsHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logsHandler{l: h.l, attrs: append(append([]slog.Attr{}, h.attrs...), attrs...)}
}

func (h logsHandler) WithGroup(string) slog.Handler { return h }
