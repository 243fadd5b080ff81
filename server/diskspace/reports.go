package diskspace

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// ReportTTL is how long a node believes another node's report: a node that
// stops reporting stops counting once its last report is this old.
const ReportTTL = 3 * time.Second

// Reports holds the verdicts other nodes sent this one about their own
// guards, each node's last one ("# Reports from other nodes" in the package
// doc). It is safe for concurrent use.
type Reports struct {
	// mu guards peers; nothing is taken while holding it.
	mu    sync.Mutex
	peers map[string]peer // by node id
}

// peer is one node's last report.
type peer struct {
	ok     bool
	reason string
	at     time.Time
}

// Report is one node's storage as this node last heard it.
type Report struct {
	ID     string
	OK     bool
	Reason string        // why the node is below its reserve; empty when OK
	Age    time.Duration // since the report was received
}

// NewReports returns an empty set of reports.
func NewReports() *Reports { return &Reports{peers: map[string]peer{}} }

// Record keeps a node's report, received at at; it replaces the node's
// earlier one.
func (r *Reports) Record(id string, ok bool, reason string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.peers[id] = peer{ok: ok, reason: reason, at: at}
}

// Low returns a node whose fresh report says it is below its reserve (the
// first by id), without allocating: it runs on every request that adds data.
func (r *Reports) Low(now time.Time) (id, reason string, found bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for pid, p := range r.peers {
		if !p.ok && now.Sub(p.at) < ReportTTL && (!found || pid < id) {
			id, reason, found = pid, p.reason, true
		}
	}
	return id, reason, found
}

// Fresh returns the reports younger than ReportTTL, by node id.
func (r *Reports) Fresh(now time.Time) []Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Report
	for id, p := range r.peers {
		if age := now.Sub(p.at); age < ReportTTL {
			out = append(out, Report{ID: id, OK: p.ok, Reason: p.reason, Age: age})
		}
	}
	slices.SortFunc(out, func(a, b Report) int { return strings.Compare(a.ID, b.ID) })
	return out
}
