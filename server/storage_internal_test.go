package server

import (
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// A report counts for storageReportTTL, then is forgotten: a node that
// stops reporting stops holding the cluster's writes.
func TestStorageState_Fresh_ForgetsOldReports(t *testing.T) {
	st := newStorageState(metrics.NewSet())
	now := time.Now()
	st.record("old", false, "full", now.Add(-storageReportTTL))
	st.record("n3", false, "full", now.Add(-storageReportTTL+time.Millisecond))
	st.record("n2", true, "", now)
	got := st.fresh(now)
	if len(got) != 2 || got[0].id != "n2" || got[1].id != "n3" || got[1].ok {
		t.Fatalf("fresh reports %+v, want n2 (ok) and n3 (low), sorted, without old", got)
	}
	if id, reason, low := st.low(now); !low || id != "n3" || reason != "full" {
		t.Fatalf("low: %q %q %v, want n3 (old has expired)", id, reason, low)
	}
	// A newer report replaces the older one.
	st.record("n3", true, "", now)
	if got := st.fresh(now); got[1].id != "n3" || !got[1].ok {
		t.Fatalf("after n3 recovered: %+v", got)
	}
	if id, _, low := st.low(now); low {
		t.Fatalf("low: %q after every fresh report is ok", id)
	}
}
