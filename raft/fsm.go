package raft

import (
	"fmt"
	"io"
	"log/slog"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft/command"
)

// fsm is the thin, deterministic adapter between Raft and the engine: a
// whole Raft batch becomes one engine batch, one Pebble batch, whose applied
// index is written with it. Entries at or below the engine's applied index
// are already in the store and are skipped, so a restart never applies a
// command twice and never replays the full history.
type fsm struct {
	e      *engine.Engine
	notify *notifier
	log    *slog.Logger
	// id is this node's id: an entry proposed elsewhere (its Extensions
	// name the proposer) is applied without building results nobody reads.
	id string
}

// result is one command's outcome, as the proposer receives it.
type result struct {
	value any
	err   error
}

var _ hraft.BatchingFSM = (*fsm)(nil)

func (f *fsm) Apply(l *hraft.Log) any { return f.ApplyBatch([]*hraft.Log{l})[0] }

// ApplyBatch applies logs in one engine batch. A storage failure panics: the
// node cannot go on with memory and disk apart, and on restart the applied
// index makes the replay exact.
func (f *fsm) ApplyBatch(logs []*hraft.Log) []any {
	out := make([]any, len(logs))
	applied := f.e.Applied()
	b, err := f.e.Begin()
	if err != nil {
		panic(fmt.Sprintf("raft: fsm: begin engine batch: %v", err))
	}
	// Pops leave reading their messages to the proposer (Node.await), out
	// of this serial loop.
	b.DeferReads(true)

	var (
		last    uint64
		touched touchSet
	)
	for i, l := range logs {
		if l.Index <= applied {
			continue
		}
		last = l.Index
		if l.Type != hraft.LogCommand {
			continue
		}
		b.SkipResults(string(l.Extensions) != f.id)
		cmds, err := command.DecodeEntry(l.Data)
		if err != nil {
			// Never skip a command: an entry this binary cannot read means
			// it must not serve (an older binary in a newer cluster).
			panic(fmt.Sprintf("raft: fsm: log %d: %v", l.Index, err))
		}
		results := make([]result, len(cmds))
		for j := range cmds {
			results[j] = apply(b, &cmds[j], &touched)
		}
		out[i] = results
	}
	if err := b.Commit(last); err != nil {
		panic(fmt.Sprintf("raft: fsm: commit: %v", err))
	}
	f.notify.notify(touched)
	return out
}

// apply runs one command against the batch.
func apply(b *engine.Batch, c *command.Command, t *touchSet) result {
	st := c.Stamp
	switch c.Type {
	case command.TypeConfigure:
		v, err := b.Configure(st, c.Configure)
		return result{v, err}
	case command.TypeDeleteQueue:
		t.add(c.Queue)
		return result{b.DeleteQueue(c.Queue), nil}
	case command.TypePush:
		return result{t.addQueued(b.Push(st, c.Push)), nil}
	case command.TypePushPrepared:
		return result{t.addQueued(b.PushPrepared(st, c.Prepared)), nil}
	case command.TypePop:
		v, err := b.Pop(st, c.Pop)
		return result{v, err}
	case command.TypeAck:
		v := b.Ack(st, c.Ack)
		for i := range v {
			if v[i].LeaseReleased || v[i].DLQ || v[i].Dropped {
				t.add(v[i].Queue)
			}
		}
		return result{v, nil}
	case command.TypeExtendLease:
		return result{b.ExtendLease(st, c.Lease, c.Seconds), nil}
	case command.TypeTransaction:
		v := b.Transaction(st, c.Ops, c.Leases)
		for i := range v.Pushes {
			t.add(v.Pushes[i].Queue)
		}
		for i := range v.Acks {
			t.add(v.Acks[i].Queue)
		}
		return result{v, nil}
	case command.TypeReplay:
		v, err := b.Replay(st, c.Replay)
		t.add(v.Queue)
		return result{v, err}
	case command.TypeDeleteDLQ:
		v, err := b.DeleteDLQ(c.Address.PartitionID, c.Address.TransactionID, c.Address.Group)
		return result{v, err}
	case command.TypeMoveToDLQ:
		v, err := b.MoveToDLQ(st, c.Address.PartitionID, c.Address.TransactionID, c.Address.Group, c.Address.Error)
		t.add(v.Queue)
		return result{v, err}
	case command.TypeSeek:
		v, err := b.Seek(st, c.Seek)
		t.add(c.Seek.Queue)
		return result{v, err}
	case command.TypeDeleteGroup:
		n, meta := b.DeleteGroup(c.Group.Group, c.Group.Queue, c.Group.DeleteMetadata)
		t.all = true
		return result{groupDeleted{n, meta}, nil}
	case command.TypeUpdateSub:
		return result{b.UpdateSubscription(c.Group.Group, c.Group.Timestamp), nil}
	case command.TypeAnnounce:
		b.SetClusterValue(httpKey(c.Announce.NodeID), c.Announce.HTTP)
		return result{}
	case command.TypeMaintenance:
		v := ""
		if c.Maintenance.Enabled {
			v = "on"
		}
		b.SetClusterValue(maintenanceKey(c.Maintenance.Pop), v)
		if !c.Maintenance.Enabled {
			t.all = true // parked pops may deliver again
		}
		return result{}
	case command.TypeSweep:
		v, err := b.Sweep(st)
		return result{v, err}
	}
	panic(fmt.Sprintf("raft: fsm: unknown command type %d", c.Type))
}

type groupDeleted struct {
	deleted  int
	metadata bool
}

func httpKey(nodeID string) string { return "http/" + nodeID }

func maintenanceKey(pop bool) string {
	if pop {
		return "maintenance/pop"
	}
	return "maintenance/push"
}

// Snapshot makes the engine durable up to its applied index and returns a
// reference to it (see snapstore.go): its cost does not grow with the store.
// Raft never calls Snapshot concurrently with Apply.
func (f *fsm) Snapshot() (hraft.FSMSnapshot, error) {
	if err := f.e.Sync(); err != nil {
		return nil, err
	}
	return refSnapshot(f.e.Applied()), nil
}

// Restore replaces the engine's store with a snapshot.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if err := f.e.Restore(rc); err != nil {
		return fmt.Errorf("raft: restore snapshot: %w", err)
	}
	f.notify.notify(touchSet{all: true})
	return nil
}

// refSnapshot is a reference to the engine at an index.
type refSnapshot uint64

func (r refSnapshot) Persist(sink hraft.SnapshotSink) error {
	if _, err := sink.Write(encodeRef(uint64(r))); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (refSnapshot) Release() {}
