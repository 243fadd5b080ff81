package command

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/internal/wire"
)

// The directory's load signal (issue 30 item 5, cluster/balance.go): each
// data group's leader reports, every load interval, how fast messages and
// bytes arrive in the group and in its hottest queues, and the directory's
// leader moves queues from the hottest group to the coolest on it. Its
// value, beside directory.go's:
//
//	load/<g>   term ";" at ";" msgs ";" msgsPerSec ";" bytesPerSec, then one
//	           line per queue: "\n" queue "\t" msgs "\t" msgsPerSec "\t"
//	           bytesPerSec "\t" pinned (0 or 1)
//
// (queue names hold no control characters, so they cannot hold the
// separators). The leader computes the rates before it proposes, so the
// apply reads no clock: at is the report's stamp (µs), which a reader
// compares with its own clock to tell a report that stopped coming.

// MaxLoadQueues bounds the queues one GroupLoad reports: the hottest few
// are what a balancer moves, and the record stays a few KB whatever the
// number of queues.
const MaxLoadQueues = 16

// GroupLoad is a data group's leader reporting the group's load at its
// term.
type GroupLoad struct {
	Group uint32
	Term  uint64
	// Msgs counts the messages ever pushed into the group's queues (the
	// sum of their partitions' next offsets); MsgsPerSec and BytesPerSec
	// are the rates over the last interval, of every queue of the group.
	Msgs        uint64
	MsgsPerSec  float64
	BytesPerSec float64
	// Queues are the group's hottest queues by MsgsPerSec, at most
	// MaxLoadQueues.
	Queues []QueueLoad
}

// Load is a group's report as the directory stores it.
type Load struct {
	GroupLoad
	// At is the report's stamp (µs).
	At int64
}

// QueueLoad is one queue's part of a GroupLoad.
type QueueLoad struct {
	Queue       string
	Msgs        uint64
	MsgsPerSec  float64
	BytesPerSec float64
	// Pinned is set for a queue a stream reads or writes: it stays in its
	// group (engine refuses to export it).
	Pinned bool
}

// Apply stores the report unless the stored one is from a later term.
// Value: bool, whether it was stored; Err ErrInvalid for a group that is
// not a data group, more than MaxLoadQueues queues, an invalid or repeated
// queue name, or a rate that is negative or not a number.
func (c GroupLoad) Apply(b *engine.Batch, st engine.Stamp) engine.Result {
	refuse := func(why string, args ...any) engine.Result {
		return engine.Result{Value: false, Err: fmt.Errorf("%w: load of group %d: %s", engine.ErrInvalid, c.Group, fmt.Sprintf(why, args...))}
	}
	n := GroupCount(b.ClusterValue)
	switch {
	case c.Group == 0 || c.Group > n:
		return refuse("not a data group (the cluster has %d)", n)
	case len(c.Queues) > MaxLoadQueues:
		return refuse("%d queues, at most %d", len(c.Queues), MaxLoadQueues)
	case !rate(c.MsgsPerSec) || !rate(c.BytesPerSec):
		return refuse("rates %v and %v", c.MsgsPerSec, c.BytesPerSec)
	}
	seen := make(map[string]bool, len(c.Queues))
	for _, q := range c.Queues {
		if err := engine.ValidateQueueName(q.Queue); err != nil {
			return refuse("%v", err)
		}
		if seen[q.Queue] || !rate(q.MsgsPerSec) || !rate(q.BytesPerSec) {
			return refuse("queue %q repeated or with rates %v and %v", q.Queue, q.MsgsPerSec, q.BytesPerSec)
		}
		seen[q.Queue] = true
	}
	if old := LoadOf(b.ClusterValue, c.Group); old.Term > c.Term {
		return engine.Result{Value: false}
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%d;%d;%d;%s;%s", c.Term, st.Time, c.Msgs, ftoa(c.MsgsPerSec), ftoa(c.BytesPerSec))
	for _, q := range c.Queues {
		pinned := 0
		if q.Pinned {
			pinned = 1
		}
		fmt.Fprintf(&s, "\n%s\t%d\t%s\t%s\t%d", q.Queue, q.Msgs, ftoa(q.MsgsPerSec), ftoa(q.BytesPerSec), pinned)
	}
	b.SetClusterValue(loadKey(c.Group), s.String())
	return engine.Result{Value: true}
}

// LoadOf is group g's last load report, the zero Load (Group set) while
// it has none.
func LoadOf(v ClusterValues, g uint32) Load {
	out := Load{GroupLoad: GroupLoad{Group: g}}
	lines := strings.Split(v(loadKey(g)), "\n")
	head := strings.Split(lines[0], ";")
	if len(head) != 5 {
		return out
	}
	out.Term, _ = strconv.ParseUint(head[0], 10, 64)
	out.At, _ = strconv.ParseInt(head[1], 10, 64)
	out.Msgs, _ = strconv.ParseUint(head[2], 10, 64)
	out.MsgsPerSec, _ = strconv.ParseFloat(head[3], 64)
	out.BytesPerSec, _ = strconv.ParseFloat(head[4], 64)
	for _, l := range lines[1:] {
		f := strings.Split(l, "\t")
		if len(f) != 5 {
			continue
		}
		q := QueueLoad{Queue: f[0], Pinned: f[4] == "1"}
		q.Msgs, _ = strconv.ParseUint(f[1], 10, 64)
		q.MsgsPerSec, _ = strconv.ParseFloat(f[2], 64)
		q.BytesPerSec, _ = strconv.ParseFloat(f[3], 64)
		out.Queues = append(out.Queues, q)
	}
	return out
}

// rate reports whether f is a rate: finite and not negative.
func rate(f float64) bool { return f >= 0 && !math.IsInf(f, 1) }

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func loadKey(g uint32) string { return "load/" + strconv.FormatUint(uint64(g), 10) }

func appendGroupLoad(w *wire.Writer, c GroupLoad) {
	w.Uvarint(uint64(c.Group))
	w.Uvarint(c.Term)
	w.Uvarint(c.Msgs)
	w.I64(int64(math.Float64bits(c.MsgsPerSec)))
	w.I64(int64(math.Float64bits(c.BytesPerSec)))
	w.Uvarint(uint64(len(c.Queues)))
	for _, q := range c.Queues {
		w.Str(q.Queue)
		w.Uvarint(q.Msgs)
		w.I64(int64(math.Float64bits(q.MsgsPerSec)))
		w.I64(int64(math.Float64bits(q.BytesPerSec)))
		w.Bool(q.Pinned)
	}
}

func readGroupLoad(r *wire.Reader) GroupLoad {
	c := GroupLoad{Group: uint32(r.Uvarint()), Term: r.Uvarint(), Msgs: r.Uvarint()}
	c.MsgsPerSec = math.Float64frombits(uint64(r.I64()))
	c.BytesPerSec = math.Float64frombits(uint64(r.I64()))
	if n := r.Count(19); n > 0 {
		c.Queues = make([]QueueLoad, n)
		for i := range c.Queues {
			q := &c.Queues[i]
			q.Queue, q.Msgs = r.Str(), r.Uvarint()
			q.MsgsPerSec = math.Float64frombits(uint64(r.I64()))
			q.BytesPerSec = math.Float64frombits(uint64(r.I64()))
			q.Pinned = r.Bool()
		}
	}
	return c
}
