package raft_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
)

// TestHost_MoveCommandsRunOnTheGroupTheyName copies a queue from its
// group into the other one through Host.Propose, each chunk proposed on
// another host (relayed to the target group's leader where that host does
// not lead it), then drops the source copy: every replica of the target
// ends holding the queue as the source had it, and no replica of the
// source keeps it. The placement is not touched: that is the move's
// orchestration, not these commands'.
func TestHost_MoveCommandsRunOnTheGroupTheyName(t *testing.T) {
	c := openCurrentHosts(t, 3, 2)
	c.settled()
	c.relayInProcess()
	c.addressesKnown()
	c.atMaxVersion()
	const src, dst = uint32(1), uint32(2)
	for i := range 20 {
		c.push(src, "orders", fmt.Sprintf("t-%d", i))
	}
	leaders := c.settled()
	from := c.h[leaders[src]].Group(src).Engine()
	want, err := from.Queue("orders")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := from.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if snap != nil {
			snap.Close() // the test failed part way
		}
	})
	var pos []byte
	for seq := 0; ; seq++ {
		chunk, err := snap.ExportQueue("orders", pos, 512)
		if err != nil {
			t.Fatal(err)
		}
		cmd := engine.ImportQueueCmd{Group: dst, Queue: "orders", ID: chunk.ID, Epoch: 1, Seq: uint32(seq), Last: chunk.Last, KVs: chunk.KVs}
		r, err := c.h[seq%3].Propose(ctxT(t), cmd)
		if err != nil || r.Err != nil {
			t.Fatalf("import chunk %d on host %d: %v %v", seq, seq%3, err, r.Err)
		}
		if res, ok := r.Value.(engine.ImportResult); !ok || res.Next != uint32(seq+1) || res.Done != chunk.Last {
			t.Fatalf("import chunk %d answered %#v", seq, r.Value)
		}
		if chunk.Last {
			if seq < 3 {
				t.Fatalf("only %d chunks", seq+1)
			}
			break
		}
		pos = chunk.Next
	}
	snap.Close()
	snap = nil
	r, err := c.h[1].Propose(ctxT(t), engine.DropQueueCmd{Group: src, Queue: "orders", ID: want.ID})
	if err != nil || r.Err != nil || r.Value != true {
		t.Fatalf("drop: %v %v %v", r.Value, err, r.Err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for i, h := range c.h {
		for {
			got, err := h.Group(dst).Engine().Queue("orders")
			_, gone := h.Group(src).Engine().Queue("orders")
			if err == nil && reflect.DeepEqual(got, want) && errors.Is(gone, engine.ErrQueueNotFound) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("host %d: target %+v (%v), source %v", i, got, err, gone)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, g := range []uint32{0, 7} {
		if _, err := c.h[0].Propose(ctxT(t), engine.DropQueueCmd{Group: g, Queue: "orders", ID: want.ID}); !errors.Is(err, engine.ErrInvalid) {
			t.Fatalf("a drop on group %d: %v", g, err)
		}
	}
}
