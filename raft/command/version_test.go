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

// TestVersion_Pinned pins the command version of every type. A row added
// to the table without .from(v) would be version 1, and proposed to the
// older binaries of a rolling upgrade, whose FSM cannot apply it: a new
// type takes MaxVersion+1 (raising MaxVersion) and is pinned here, and a
// version once given is never changed (version.go).
func TestVersion_Pinned(t *testing.T) {
	pinned := map[command.Type]uint8{
		command.TypeConfigure: 1, command.TypeDeleteQueue: 1, command.TypePush: 1, command.TypePop: 1,
		command.TypeAck: 1, command.TypeExtendLease: 1, command.TypeTransaction: 1, command.TypeReplay: 1,
		command.TypeDeleteDLQ: 1, command.TypeMoveToDLQ: 1, command.TypeSeek: 1, command.TypeDeleteGroup: 1,
		command.TypeUpdateSub: 1, command.TypeAnnounce: 1, command.TypeSweep: 1, command.TypePushPrepared: 1,
		command.TypeMaintenance: 1, command.TypeStreamRegister: 1, command.TypeStreamDelete: 1,
		command.TypeStreamCycle: 1, command.TypeTrace: 1, command.TypeGroups: 1, command.TypePlaceQueue: 1,
		command.TypeLookupQueue: 1, command.TypeLookupPart: 1, command.TypeLookupLease: 1,
		command.TypeOutboxTx: 2, command.TypeOutboxDelete: 2, command.TypeImportQueue: 2, command.TypeDropQueue: 2,
		command.TypeFreezeQueue: 2, command.TypeBeginMove: 2, command.TypeEndMove: 2, command.TypeAbortMove: 2,
		command.TypeReplicas: 3, command.TypeGroupLayout: 3, command.TypeReplicaStep: 3, command.TypeGroupLoad: 3,
		command.TypeNodeLeaving: 3,
	}
	rows := command.Rows()
	for _, r := range rows {
		want, ok := pinned[r.Type]
		switch got := command.TypeVersion(r.Type); {
		case !ok:
			t.Errorf("type %d (%v) is not pinned: give its row .from(%d) (MaxVersion+1, raising MaxVersion) and pin it here",
				r.Type, r.Command, command.MaxVersion+1)
		case got != want:
			t.Errorf("type %d (%v): version %d, pinned %d: a version once given never changes", r.Type, r.Command, got, want)
		}
	}
	if len(rows) != len(pinned) {
		t.Errorf("the table has %d rows, %d are pinned: a pinned type left the table", len(rows), len(pinned))
	}
}
