package diskspace_test

import (
	"testing"
	"time"

	"github.com/queenmq/queen/server/diskspace"
)

// TestView_ReportsMakeTheNodeRefuse: without a guard of its own a node is
// OK until a fresh report says another node is low; the first low node by
// id is the reason, and every low one is counted.
func TestView_ReportsMakeTheNodeRefuse(t *testing.T) {
	r := diskspace.NewReports()
	now := time.Now()
	if v := diskspace.NewView(nil, r, now); !v.OK || v.Guarded || v.Reason != "" || v.LowNodes() != 0 {
		t.Fatalf("no guard, no reports: %+v", v)
	}
	r.Record("n3", false, "disk full", now)
	r.Record("n2", false, "also full", now)
	r.Record("n4", true, "", now)
	v := diskspace.NewView(nil, r, now)
	if v.OK || v.Reason != "node n2: also full" || v.LowNodes() != 2 || len(v.Nodes) != 3 {
		t.Fatalf("two low reports: %+v (low %d)", v, v.LowNodes())
	}
}
