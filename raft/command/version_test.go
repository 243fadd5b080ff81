package command_test

import (
	"testing"

	"github.com/queenmq/queen/raft/command"
)

// TestVersion_Rows checks that every type of the table has a command
// version between 1 and MaxVersion, that a command and its raw bytes
// (as a relayed push is proposed) need the same, and that a type the
// table does not list needs none (0: never proposable).
func TestVersion_Rows(t *testing.T) {
	for _, r := range command.Rows() {
		if v := command.TypeVersion(r.Type); v < 1 || v > command.MaxVersion {
			t.Errorf("type %d (%v): version %d, want 1..%d", r.Type, r.Command, v, command.MaxVersion)
		}
	}
	c := command.Announce{NodeID: "n1", HTTP: "h:1"}
	entry := command.AppendEntry(nil, []command.Stamped{{Cmd: c}})
	_, raw, err := command.Single(entry)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := command.Version(command.Stamped{Cmd: c}), command.Version(command.Stamped{Raw: raw}); a != 1 || b != 1 {
		t.Fatalf("announce: version %d, raw %d; want 1, 1", a, b)
	}
	if v := command.TypeVersion(command.TypeLast + 1); v != 0 {
		t.Fatalf("unlisted type: version %d, want 0", v)
	}
}
