package backups

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/backup"
)

// View is one group's state held for a backup: a snapshot of this node's
// replica, or another node's backup file of the group, read up to its
// manifest.
type View struct {
	group uint32
	snap  *engine.Snapshot
	from  *backup.Reader // with body, when snap is nil
	body  io.Closer
}

// Local is group g's state as snap holds it; the View owns snap.
func Local(g uint32, snap *engine.Snapshot) View { return View{group: g, snap: snap} }

// Remote reads group g's backup file from body (another node's answer)
// up to its manifest, which must name g alone; the View owns body, which
// is closed on an error.
func Remote(g uint32, body io.ReadCloser) (View, error) {
	from, err := backup.NewReader(body)
	if err != nil {
		body.Close()
		return View{}, err
	}
	if got := from.Manifest().Groups; len(got) != 1 || got[0].ID != g {
		from.Close()
		body.Close()
		return View{}, fmt.Errorf("%w: group %d's backup holds groups %+v", backup.ErrCorrupt, g, got)
	}
	return View{group: g, from: from, body: body}, nil
}

// Close lets go of what v holds.
func (v View) Close() {
	if v.snap != nil {
		v.snap.Close()
	}
	if v.body != nil {
		v.from.Close()
		v.body.Close()
	}
}

// CloseAll closes every view.
func CloseAll(views []View) {
	for _, v := range views {
		v.Close()
	}
}

// Describe is the manifest's account of views: each group's index and
// message counts, as its snapshot, or the other node's manifest, has them.
func Describe(views []View) ([]backup.Group, error) {
	var out []backup.Group
	for _, v := range views {
		if v.snap == nil {
			out = append(out, v.from.Manifest().Groups[0])
			continue
		}
		counts, err := v.snap.QueueCounts()
		if err != nil {
			return nil, err
		}
		out = append(out, backup.Group{ID: v.group, Index: v.snap.Applied, Queues: counts})
	}
	return out, nil
}

// Write writes the backup file of views, which m describes, to w.
func Write(w io.Writer, m backup.Manifest, views []View) error {
	bw, err := backup.NewWriter(w, m)
	if err != nil {
		return err
	}
	for i, v := range views {
		if v.snap != nil {
			err = bw.WriteGroup(v.snap)
		} else {
			err = copyGroup(bw, v.from, m.Groups[i])
		}
		if err != nil {
			return err
		}
	}
	return bw.Close()
}

// copyGroup writes the one group of another node's backup file into bw:
// its stream as it comes, every frame's checksum verified on the way, and
// the file's trailer read after it (a stream cut short fails here, never
// passing for a whole group).
func copyGroup(bw *backup.Writer, from *backup.Reader, want backup.Group) error {
	g, stream, err := from.Next()
	if err != nil {
		return fmt.Errorf("backup: group %d from another node: %w", want.ID, err)
	}
	if g.ID != want.ID || g.Index != want.Index {
		return fmt.Errorf("%w: group %d at %d from another node, want %d at %d", backup.ErrCorrupt, g.ID, g.Index, want.ID, want.Index)
	}
	if err := bw.WriteGroup(copyFrom{stream}); err != nil {
		return err
	}
	if _, _, err := from.Next(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("backup: group %d from another node: the file's end: %w", want.ID, errors.Join(err, backup.ErrCorrupt))
	}
	return nil
}

// copyFrom is a stream read whole into a writer (backup.Writer.WriteGroup).
type copyFrom struct{ r io.Reader }

func (c copyFrom) WriteTo(w io.Writer) (int64, error) { return io.Copy(w, c.r) }

// DeadlineWriter pushes conn's write deadline on as the stream makes
// progress: a backup takes as long as the store is large, and only a
// stalled reader should time out.
type DeadlineWriter struct {
	W       io.Writer
	Conn    net.Conn
	Timeout time.Duration
	last    time.Time
}

func (d *DeadlineWriter) Write(p []byte) (int, error) {
	if now := time.Now(); now.Sub(d.last) > time.Second {
		d.last = now
		d.Conn.SetWriteDeadline(now.Add(d.Timeout))
	}
	return d.W.Write(p)
}
