package command_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft/command"
)

// sampleResults are one value of every type a result codec carries, with
// every field set; TestTable_Complete wants one for each row that relays.
func sampleResults() []any {
	id := engine.ID{1, 2, 3}
	return []any{
		[]engine.PushResult{
			{Status: engine.Queued, MessageID: id, PartitionID: engine.ID{9}, TransactionID: "t1", Queue: "q"},
			{Status: engine.Duplicate, MessageID: id, TransactionID: "t2", Queue: "q"},
			{Status: engine.Rejected, MessageID: id, TransactionID: "t3", Queue: "q!",
				Err: fmt.Errorf("%w: %s", engine.ErrInvalid, "queue name too long")},
		},
		[]engine.AckResult{
			{TransactionID: "a", Success: true, LeaseReleased: true, Queue: "q", Partition: "p"},
			{TransactionID: "b", Error: "invalid or expired lease", Noop: true, DLQ: true, Dropped: true},
		},
		uint32(7),
		-3,
		engine.GroupDeleted{Cursors: 4, Metadata: true},
		true,
		struct{}{},
		engine.ImportResult{Next: 12, Done: true},
		uint64(1) << 40,
		engine.ReplayResult{Queue: "q", Partition: "p", RowsRemoved: 2,
			Push: engine.PushResult{Status: engine.Queued, MessageID: id, PartitionID: engine.ID{7}, TransactionID: "r1", Queue: "q"}},
		engine.TxResult{ID: engine.ID{4, 5}, Success: true, Error: "lease expired",
			Pushes: []engine.PushResult{{Status: engine.Queued, MessageID: id, PartitionID: engine.ID{8}, TransactionID: "x1", Queue: "q"}},
			Acks:   []engine.AckResult{{TransactionID: "x2", Success: true, LeaseReleased: true, Queue: "q", Partition: "p"}}},
	}
}

// TestTable_Complete walks every command type up to TypeLast and fails
// when one has no row in the table, no command in a golden entry, or, for
// a row that relays (a result codec), no sample result that round-trips
// through it. A row says whether it relays: its result codec, or
// notRelayed, is an argument of the row, not an afterthought elsewhere.
func TestTable_Complete(t *testing.T) {
	rows := map[command.Type]command.Row{}
	for _, r := range command.Rows() {
		rows[r.Type] = r
	}
	golden := map[command.Type]bool{}
	for _, g := range goldenEntries {
		b, err := os.ReadFile(filepath.Join("testdata", g.file))
		if err != nil {
			t.Fatal(err)
		}
		cmds, err := command.DecodeEntry(undump(t, string(b)))
		if err != nil {
			t.Errorf("%s: %v", g.file, err)
			continue
		}
		for _, c := range cmds {
			typ, _ := command.TypeOf(c.Cmd)
			golden[typ] = true
		}
	}
	samples := map[reflect.Type]any{}
	for _, v := range sampleResults() {
		samples[reflect.TypeOf(v)] = v
	}
	for typ := command.Type(1); typ <= command.TypeLast; typ++ {
		r, ok := rows[typ]
		switch {
		case !ok:
			t.Errorf("type %d has no row in the command table", typ)
			continue
		case !golden[typ]:
			t.Errorf("type %d (%v) is in no golden entry (golden_test.go)", typ, r.Command)
		}
		if r.Result == nil {
			continue
		}
		v, ok := samples[r.Result]
		if !ok {
			t.Errorf("type %d (%v) relays a %v: no sample result for it (sampleResults)", typ, r.Command, r.Result)
			continue
		}
		b, err := command.AppendResult(nil, typ, v)
		if err != nil {
			t.Errorf("type %d: append result: %v", typ, err)
			continue
		}
		if got, err := command.ReadResult(typ, b); err != nil || !reflect.DeepEqual(got, v) {
			t.Errorf("type %d: result read back %#v, %v; wrote %#v", typ, got, err, v)
		}
	}
	for typ, r := range rows {
		if typ == 0 || typ > command.TypeLast {
			t.Errorf("type %d (%v) is outside 1..TypeLast: raise TypeLast", typ, r.Command)
		}
	}
}

// Every result reads back as it was written, and a truncated one is
// ErrCorrupt, never a panic or a value. A result asked of a row that does
// not relay, or of the wrong type, is ErrNotRelayed.
func TestResult_RoundTrip(t *testing.T) {
	for _, r := range command.Rows() {
		if r.Result == nil {
			continue
		}
		for _, v := range sampleResults() {
			if reflect.TypeOf(v) != r.Result {
				continue
			}
			b, err := command.AppendResult(nil, r.Type, v)
			if err != nil {
				t.Fatalf("type %d: %v", r.Type, err)
			}
			for n := range len(b) {
				if _, err := command.ReadResult(r.Type, b[:n]); !errors.Is(err, command.ErrCorrupt) {
					t.Fatalf("type %d cut at %d of %d bytes: err %v, want ErrCorrupt", r.Type, n, len(b), err)
				}
			}
		}
	}
	if _, err := command.AppendResult(nil, command.TypePop, engine.PopResult{}); !errors.Is(err, command.ErrNotRelayed) {
		t.Fatalf("a pop's result: err %v, want ErrNotRelayed", err)
	}
	if _, err := command.AppendResult(nil, command.TypeAck, "a string"); !errors.Is(err, command.ErrNotRelayed) {
		t.Fatalf("an ack answering a string: err %v, want ErrNotRelayed", err)
	}
	if _, err := command.ReadResult(command.TypeSweep, nil); !errors.Is(err, command.ErrNotRelayed) {
		t.Fatalf("reading a sweep's result: err %v, want ErrNotRelayed", err)
	}
}

// A command another node encoded is proposed as its bytes (Stamped.Raw):
// the entry holds it with the proposer's time written over its own, its
// seed and body as sent, and decodes to the command that was encoded.
func TestStamped_Raw(t *testing.T) {
	pp, err := engine.PushCmd{Items: []engine.PushItem{{Queue: "q", TransactionID: "t", Payload: []byte(`{"a":1}`)}}}.
		Prepare(engine.ID{7, 7, 7, 7, 7, 7, 0x70, 7, 0x80})
	if err != nil {
		t.Fatal(err)
	}
	seed := engine.ID{1, 2, 3}
	sent := command.AppendEntry(nil, []command.Stamped{{Stamp: engine.Stamp{Seed: seed}, Cmd: pp}})
	typ, raw, err := command.Single(sent)
	if err != nil || typ != command.TypePushPrepared {
		t.Fatalf("Single: %d, %v; want a prepared push", typ, err)
	}
	const now = 1_754_000_000_000_001
	got, err := command.DecodeEntry(command.AppendEntry(nil, []command.Stamped{{Stamp: engine.Stamp{Time: now}, Raw: raw}}))
	if err != nil {
		t.Fatal(err)
	}
	want := command.Stamped{Stamp: engine.Stamp{Time: now, Seed: seed}, Cmd: pp}
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("proposed raw: %+v, want %+v", got, want)
	}
	two := command.AppendEntry(nil, []command.Stamped{{Cmd: pp}, {Cmd: pp}})
	for _, bad := range [][]byte{two, sent[:len(sent)-1], {0x51, 1, 1, 1, byte(command.TypeSweep)}} {
		if _, _, err := command.Single(bad); !errors.Is(err, command.ErrCorrupt) {
			t.Errorf("Single(% x...): err %v, want ErrCorrupt", bad[:min(len(bad), 8)], err)
		}
	}
}

// layoutNames are the rows whose layout in doc.go goes by another name
// than their Go type's (without "Cmd").
var layoutNames = map[string]string{
	"PreparedPush":       "PushPrepared",
	"PreparedCycle":      "StreamCycle",
	"UpdateSubscription": "UpdateSub",
}

// TestTable_EveryRowHasALayout: every row's body layout is in the
// package doc (doc.go, a line "//\t<Name> <layout>"), the format's
// documentation where it lives. A row added without it fails here.
func TestTable_EveryRowHasALayout(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^//\t([A-Z]\w*) +\S`).FindAllStringSubmatch(string(b), -1) {
		documented[m[1]] = true
	}
	for _, r := range command.Rows() {
		typ := r.Command
		if typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		name := strings.TrimSuffix(typ.Name(), "Cmd")
		if n, ok := layoutNames[name]; ok {
			name = n
		}
		if !documented[name] {
			t.Errorf("type %d (%v) has no layout in doc.go: add a line \"//\\t%s <its body>\"", r.Type, r.Command, name)
		}
	}
}
