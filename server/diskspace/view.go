package diskspace

import "time"

// View is what a node says of its free space (/health's "storage" and the
// storage gauges): its own guard and the fresh reports of the nodes that
// report to it.
type View struct {
	// OK is false while the node refuses data: its guard, or a report,
	// says a filesystem is below its reserve.
	OK bool
	// Reason says why not OK: the guard's reason, or "node <id>: <reason>"
	// for the first low report.
	Reason string
	// Guarded is whether the node has a guard at all (Guard is then the
	// zero Status when it has none).
	Guarded bool
	Guard   Status
	Nodes   []Report // the fresh reports, by node id
}

// NewView reads g (nil: no guard) and r at now.
func NewView(g *Guard, r *Reports, now time.Time) View {
	v := View{OK: true, Nodes: r.Fresh(now)}
	if g != nil {
		v.Guarded, v.Guard = true, g.Status()
		v.OK, v.Reason = v.Guard.OK, v.Guard.Reason
	}
	for _, n := range v.Nodes {
		if v.OK && !n.OK {
			v.OK, v.Reason = false, "node "+n.ID+": "+n.Reason
		}
	}
	return v
}

// LowNodes is how many of the reports say their node is below its reserve.
func (v View) LowNodes() uint64 {
	var low uint64
	for _, n := range v.Nodes {
		if !n.OK {
			low++
		}
	}
	return low
}

// JSONWriter is the JSON writer the edge answers with (server/wire's
// Writer has these methods): an interface, so that this package stays a
// leaf that imports nothing of the project.
type JSONWriter interface {
	Object(k string)
	EndObject()
	Array(k string)
	EndArray()
	Str(k, v string)
	Int(k string, v int64)
	Bool(k string, v bool)
}

// WriteJSON writes v as the member k ("storage" in /health):
//
//	{"ok", "reason"?, "reserveBytes", "directories": [{"path", "freeBytes", "error"?}],
//	 "nodes": [{"id", "ok", "reason"?, "ageMs"}]}
//
// ok is false while this node refuses data; reason says why. nodes are the
// fresh reports of the other nodes (on the leader).
func (v View) WriteJSON(w JSONWriter, k string) {
	w.Object(k)
	w.Bool("ok", v.OK)
	if !v.OK {
		w.Str("reason", v.Reason)
	}
	w.Int("reserveBytes", int64(v.Guard.MinFreeBytes))
	w.Array("directories")
	for _, d := range v.Guard.Dirs {
		w.Object("")
		w.Str("path", d.Path)
		w.Int("freeBytes", int64(d.Free))
		if d.Err != nil {
			w.Str("error", d.Err.Error())
		}
		w.EndObject()
	}
	w.EndArray()
	w.Array("nodes")
	for _, r := range v.Nodes {
		w.Object("")
		w.Str("id", r.ID)
		w.Bool("ok", r.OK)
		if !r.OK {
			w.Str("reason", r.Reason)
		}
		w.Int("ageMs", r.Age.Milliseconds())
		w.EndObject()
	}
	w.EndArray()
	w.EndObject()
}
