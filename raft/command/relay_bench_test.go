package command_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft/command"
)

// BenchmarkRelayedPush is the leader's work on a push a follower prepared,
// from the bytes received to the log entry (the FSM's decode after the
// commit is the same either way): "reencode" is the path before issue 27
// (decode a copy, encode it again with the leader's stamp), "raw" the one
// path's (check that it decodes, copy the bytes and write the time over
// them); "unchecked" is what the check costs (the raw path without it).
//
//	go test -run '^$' -bench RelayedPush -benchmem ./raft/command
func BenchmarkRelayedPush(b *testing.B) {
	items := make([]engine.PushItem, 100)
	for i := range items {
		items[i] = engine.PushItem{Queue: "bench", TransactionID: fmt.Sprintf("t-%d", i),
			Payload: []byte(fmt.Sprintf(`{"order":%d,"customer":"c-%d","lines":[{"sku":"a","n":1},{"sku":"b","n":2}]}`, i, i%17))}
	}
	seed := engine.ID{1, 2, 3, 4, 5, 6, 0x70, 8, 0x80}
	pp, err := engine.PushCmd{Items: items}.Prepare(seed)
	if err != nil {
		b.Fatal(err)
	}
	entry := command.AppendEntry(nil, []command.Stamped{{Stamp: engine.Stamp{Seed: seed}, Cmd: pp}})
	stamp := engine.Stamp{Time: 1_754_000_000_000_000, Seed: seed}
	var buf []byte
	b.Run("reencode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cmds, err := command.DecodeEntry(bytes.Clone(entry))
			if err != nil {
				b.Fatal(err)
			}
			buf = command.AppendEntry(buf[:0], []command.Stamped{{Stamp: stamp, Cmd: cmds[0].Cmd}})
		}
	})
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, raw, err := command.Single(entry)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := command.DecodeEntry(entry); err != nil {
				b.Fatal(err)
			}
			buf = command.AppendEntry(buf[:0], []command.Stamped{{Stamp: stamp, Raw: bytes.Clone(raw)}})
		}
	})
	b.Run("unchecked", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, raw, err := command.Single(entry)
			if err != nil {
				b.Fatal(err)
			}
			buf = command.AppendEntry(buf[:0], []command.Stamped{{Stamp: stamp, Raw: bytes.Clone(raw)}})
		}
	})
}
