package cluster_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenmq/queen/raft"
)

// lockedBuffer is a log destination the hosts' goroutines share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestHost_GroupedStartLogsNoWarnings: a grouped three-node start (groups
// on R of N, the cluster version rising from 1 as the nodes read each
// other) and a leader's hand-off are routine, so no node logs a WARN or an
// ERROR for them, which should mean an operator may need to act. Before,
// every look at the directory warned "record the voters each group has
// ... cluster runs at 1" until the version rose, and the old leader of a
// hand-off logged hashicorp/raft's ERROR "peer has newer term, stopping
// replication". (While the hosts start one after another, a node does
// log that it cannot reach one not listening yet: that is not checked.)
func TestHost_GroupedStartLogsNoWarnings(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	c := openHostsOf(t, 3, 2, 2, func(o *raft.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		// The version rises only after a few looks at the directory.
		o.Versions, o.VersionInterval = allCurrent{}, 500*time.Millisecond
	})
	c.relayInProcess()
	c.leaders(nil)
	c.layoutRecorded(2)
	c.spreadSettled()
	leaders := c.settled()
	if out := logs.String(); strings.Contains(out, "record the voters") {
		t.Fatalf("a grouped start warned while the cluster version rose:\n%s", out)
	}
	logs.Reset()
	for g := uint32(1); g <= 2; g++ {
		if err := c.h[leaders[g]].Group(g).TransferLeadership(); err != nil {
			t.Fatalf("hand group %d's leadership over: %v", g, err)
		}
	}
	c.settled()
	time.Sleep(time.Second) // what the old leaders log after the hand-off
	if out := logs.String(); out != "" {
		t.Fatalf("a leader's hand-off logged WARN or ERROR:\n%s", out)
	}
}
