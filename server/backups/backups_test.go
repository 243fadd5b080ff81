package backups_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/backup"
	"github.com/queenmq/queen/engine/enginetest"
	"github.com/queenmq/queen/server/backups"
)

// stream is a group's engine stream as backup.Writer.WriteGroup takes it.
type stream []byte

func (s stream) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(s)
	return int64(n), err
}

// oneGroup is another node's answer for group g: a backup file of g alone
// at index, holding s.
func oneGroup(t *testing.T, g uint32, index uint64, s []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := backup.NewWriter(&buf, backup.Manifest{Node: "n2", Groups: []backup.Group{{ID: g, Index: index, Queues: map[string]int64{"r": 2}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteGroup(stream(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// closer records that the View closed its body.
type closer struct {
	io.Reader
	closed bool
}

func (c *closer) Close() error { c.closed = true; return nil }

// A file of this node's replica and another node's group: the manifest
// describes each as its source has it, and the other node's stream is
// copied byte for byte into a file that verifies whole.
func TestWrite_LocalAndRemote(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Apply(engine.PushCmd{Items: []engine.PushItem{{Queue: "q", Payload: []byte(`1`)}, {Queue: "q", Payload: []byte(`2`)}}})
	snap, err := h.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	remoteStream := []byte("QSNP\x01the other node's group")
	remote, err := backups.Remote(2, io.NopCloser(bytes.NewReader(oneGroup(t, 2, 9, remoteStream))))
	if err != nil {
		t.Fatal(err)
	}
	views := []backups.View{backups.Local(1, snap), remote}
	defer backups.CloseAll(views)

	groups, err := backups.Describe(views)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || groups[0].ID != 1 || groups[0].Index != snap.Applied || groups[0].Queues["q"] != 2 ||
		groups[1].ID != 2 || groups[1].Index != 9 || groups[1].Queues["r"] != 2 {
		t.Fatalf("groups = %+v", groups)
	}
	var file bytes.Buffer
	if err := backups.Write(&file, backup.Manifest{Node: "n1", Groups: groups}, views); err != nil {
		t.Fatal(err)
	}
	m, err := backup.Verify(bytes.NewReader(file.Bytes()))
	if err != nil || len(m.Groups) != 2 {
		t.Fatalf("verify: %+v, %v", m, err)
	}
	r, err := backup.NewReader(bytes.NewReader(file.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	g, s, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(s)
	if err != nil || g.ID != 2 || !bytes.Equal(got, remoteStream) {
		t.Fatalf("group %d: %q, %v; want group 2: %q", g.ID, got, err, remoteStream)
	}
}

// Another node's file must hold the one group asked for: any other is
// corruption, and the View lets go of the body.
func TestRemote_WrongGroup(t *testing.T) {
	body := &closer{Reader: bytes.NewReader(oneGroup(t, 3, 1, []byte("x")))}
	if _, err := backups.Remote(2, body); !errors.Is(err, backup.ErrCorrupt) {
		t.Fatalf("err %v, want backup.ErrCorrupt", err)
	}
	if !body.closed {
		t.Fatal("the body is still open")
	}
}

// Another node's file cut short fails the backup: it never passes for a
// whole group.
func TestWrite_RemoteCutShort(t *testing.T) {
	full := oneGroup(t, 2, 9, bytes.Repeat([]byte("abc"), 1000))
	remote, err := backups.Remote(2, io.NopCloser(bytes.NewReader(full[:len(full)-8])))
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	groups, err := backups.Describe([]backups.View{remote})
	if err != nil {
		t.Fatal(err)
	}
	if err := backups.Write(io.Discard, backup.Manifest{Groups: groups}, []backups.View{remote}); err == nil {
		t.Fatal("a cut file was copied whole")
	}
}

// deadlineConn records the write deadlines set on it.
type deadlineConn struct {
	net.Conn
	deadlines []time.Time
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.deadlines = append(c.deadlines, t)
	return nil
}

// The writer passes every byte on and sets a deadline Timeout ahead at
// most once a second, not on every write.
func TestDeadlineWriter_Write(t *testing.T) {
	var out bytes.Buffer
	conn := &deadlineConn{}
	d := &backups.DeadlineWriter{W: &out, Conn: conn, Timeout: time.Minute}
	before := time.Now()
	for range 100 {
		if _, err := d.Write([]byte("ab")); err != nil {
			t.Fatal(err)
		}
	}
	if out.Len() != 200 {
		t.Fatalf("%d bytes written, want 200", out.Len())
	}
	if len(conn.deadlines) != 1 || conn.deadlines[0].Before(before.Add(time.Minute)) {
		t.Fatalf("deadlines %v, want one a minute ahead", conn.deadlines)
	}
}
