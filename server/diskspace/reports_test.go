package diskspace_test

import (
	"testing"
	"time"

	"github.com/queenmq/queen/server/diskspace"
)

// TestReports_Fresh_ForgetsOldReports: a report counts for ReportTTL, then
// is forgotten: a node that stops reporting stops holding the cluster's
// writes.
func TestReports_Fresh_ForgetsOldReports(t *testing.T) {
	r := diskspace.NewReports()
	now := time.Now()
	r.Record("old", false, "full", now.Add(-diskspace.ReportTTL))
	r.Record("n3", false, "full", now.Add(-diskspace.ReportTTL+time.Millisecond))
	r.Record("n2", true, "", now)
	got := r.Fresh(now)
	if len(got) != 2 || got[0].ID != "n2" || got[1].ID != "n3" || got[1].OK || got[1].Reason != "full" {
		t.Fatalf("fresh reports %+v, want n2 (ok) and n3 (low), sorted, without old", got)
	}
	if id, reason, low := r.Low(now); !low || id != "n3" || reason != "full" {
		t.Fatalf("Low: %q %q %v, want n3 (old has expired)", id, reason, low)
	}
	// A newer report replaces the older one.
	r.Record("n3", true, "", now)
	if got := r.Fresh(now); got[1].ID != "n3" || !got[1].OK {
		t.Fatalf("after n3 recovered: %+v", got)
	}
	if id, _, low := r.Low(now); low {
		t.Fatalf("Low: %q after every fresh report is ok", id)
	}
}
