package server

import (
	"errors"
	"reflect"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/internal/wire"
	"github.com/queenmq/queen/raft"
)

// Every value a relayed command answers reads back as it was written, and
// a truncated or unknown answer is ErrCorrupt, never a panic or a value.
func TestResult_RoundTrip(t *testing.T) {
	id := engine.ID{1, 2, 3}
	values := []any{
		[]engine.PushResult{
			{Status: engine.Queued, MessageID: id, PartitionID: engine.ID{9}, TransactionID: "t1", Queue: "q"},
			{Status: engine.Duplicate, MessageID: id, TransactionID: "t2", Queue: "q"},
		},
		[]engine.AckResult{
			{TransactionID: "a", Success: true, LeaseReleased: true, Queue: "q", Partition: "p"},
			{TransactionID: "b", Error: "invalid or expired lease", Noop: true, DLQ: true, Dropped: true},
		},
		[]engine.AckResult{},
		uint32(7),
		-3,
		engine.GroupDeleted{Cursors: 4, Metadata: true},
		true,
		false,
		engine.ReplayResult{Queue: "q", Partition: "p", RowsRemoved: 2,
			Push: engine.PushResult{Status: engine.Queued, MessageID: id, PartitionID: engine.ID{7}, TransactionID: "r1", Queue: "q"}},
	}
	for _, v := range values {
		b, err := appendResult(nil, v)
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		got, err := readResult(b)
		if err != nil {
			t.Fatalf("%T: read: %v", v, err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Fatalf("%T: read %#v, wrote %#v", v, got, v)
		}
		for n := range len(b) {
			if _, err := readResult(b[:n]); !errors.Is(err, wire.ErrCorrupt) {
				t.Fatalf("%T cut at %d of %d bytes: err %v, want ErrCorrupt", v, n, len(b), err)
			}
		}
	}
	if _, err := readResult([]byte{99}); !errors.Is(err, wire.ErrCorrupt) {
		t.Fatalf("unknown kind: err %v", err)
	}
	if _, err := appendResult(nil, "a string"); !errors.Is(err, raft.ErrResultType) {
		t.Fatalf("a value no relay answers: err %v, want ErrResultType", err)
	}
}

// A relayed command's error answer becomes the table's sentinel with the
// answer's text, so the node the client reached answers it the same; an
// unknown code is a failed relay.
func TestRelayedError_MapsCodesBack(t *testing.T) {
	resp := &fasthttp.Response{}
	resp.SetStatusCode(fasthttp.StatusInsufficientStorage)
	resp.SetBodyString(`{"error":"node n2: below reserve","code":"insufficient_storage"}`)
	err := relayedError(resp)
	row, msg, ok := classify(err)
	if !ok || row.code != "insufficient_storage" || row.status != fasthttp.StatusInsufficientStorage || msg != "node n2: below reserve" {
		t.Fatalf("relayed 507: row %+v msg %q ok %v", row, msg, ok)
	}
	resp.SetStatusCode(fasthttp.StatusTeapot)
	resp.SetBodyString(`{"error":"?","code":"no_such_code"}`)
	if err := relayedError(resp); !errors.Is(err, raft.ErrForward) {
		t.Fatalf("unknown code: err %v, want ErrForward", err)
	}
}
