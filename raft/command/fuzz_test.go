package command_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft/command"
)

// FuzzEntryRoundTrip: whatever DecodeEntry accepts, AppendEntry writes back
// into bytes that decode to the same commands (decode(encode(x)) = x for
// every x the decoder can produce), and nothing it is fed panics. The seeds
// are the golden entries and the sample commands.
func FuzzEntryRoundTrip(f *testing.F) {
	for _, g := range goldenEntries {
		b, err := os.ReadFile(filepath.Join("testdata", g.file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(undump(f, string(b)))
	}
	f.Add(command.AppendEntry(nil, sampleCommands()))
	f.Fuzz(func(t *testing.T, b []byte) {
		cmds, err := command.DecodeEntry(b)
		if err != nil {
			return
		}
		again, err := command.DecodeEntry(command.AppendEntry(nil, cmds))
		if err != nil {
			t.Fatalf("re-encoded entry does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, cmds) {
			t.Fatalf("round trip changed the commands:\n got %+v\nwant %+v", again, cmds)
		}
	})
}

// Every command type the log defines has a row in the table, and the golden
// entry holds one command of each: a type added without a row, or without a
// golden command, fails here.
func TestTable_EveryTypeHasARowAndAGoldenCommand(t *testing.T) {
	seen := map[command.Type]bool{}
	for _, g := range goldenEntries {
		for _, s := range g.cmds() {
			typ, ok := command.TypeOf(s.Cmd)
			if !ok {
				t.Fatalf("%T has no row", s.Cmd)
			}
			seen[typ] = true
		}
	}
	for typ := command.TypeConfigure; typ <= command.TypeLast; typ++ {
		if !seen[typ] {
			t.Errorf("type %d has no command in a golden entry (testdata)", typ)
		}
	}
	if _, ok := command.TypeOf(fakeCommand{}); ok {
		t.Error("a command outside the table has a type")
	}
}

type fakeCommand struct{}

func (fakeCommand) Apply(*engine.Batch, engine.Stamp) engine.Result { return engine.Result{} }
