package server

import (
	"errors"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/diskspace"
	"github.com/queenmq/queen/server/wire"
)

// Disk space is a managed resource. Each node's Options.Storage guards the
// filesystems of its data directories; the routes whose table row says
// addsData are refused with 507 insufficient_storage (Retry-After) before
// they run while one of them is below its reserve. Everything else (pops,
// acks, deletes, retention, which the leader proposes itself) goes on
// inside the reserve, because that is how space comes back.
//
// The leader proposes, so its edge decides for the cluster; but every
// follower appends the same log, and a follower whose disk fills would stop
// appending and, with another one down, stall every commit. So each
// follower reports its guard's verdict to the leader every
// storageReportInterval (POST /internal/v1/cluster/storage, to the leader
// address it already relays to), and the leader refuses data while any
// report younger than storageReportTTL says a node is below its reserve. A
// node that stops reporting (down, cut off, removed) stops counting when
// its last report expires: a node that cannot append anything holds up no
// commit once it is gone, and Raft's quorum covers it as it covers any
// crash. A follower's own edge checks its own guard too, which also covers
// its spool.
//
// Reports go over HTTP, node to node, like relays, because the leader knows
// its followers only by their Raft addresses. They carry the cluster
// secret, the node credential: the route is a cluster route like join and
// leave, so a cluster without a secret does not hear its followers' disks
// (each follower says so in its log), and a forged report cannot turn a
// cluster's writes off.

// storageReportInterval is how often a follower reports to the leader.
const storageReportInterval = 500 * time.Millisecond

// storageReportTTL is how long the leader believes a report.
const storageReportTTL = 3 * time.Second

// storageRetryAfter is the Retry-After of a 507, in seconds: space comes
// back through retention sweeps (every 5 s by default) and compactions, so
// sooner retries would mostly be refused again.
const storageRetryAfter = "5"

// dataCharge is how many bytes a request that adds data is counted for per
// byte of its body, while it is written: once in the Raft log, once in the
// engine.
const dataCharge = 2

// storageState holds the other nodes' reports and the 507 counter.
type storageState struct {
	// mu guards peers; nothing is taken while holding it.
	mu    sync.Mutex
	peers map[string]peerStorage // by node id
	// refused counts 507 answers (queen_insufficient_storage_total).
	refused *metrics.Counter
	idOnce  sync.Once
	id      string // this node's id (nodeID)
}

// peerStorage is one node's last report.
type peerStorage struct {
	ok     bool
	reason string
	at     time.Time
}

func newStorageState(set *metrics.Set) *storageState {
	return &storageState{peers: map[string]peerStorage{},
		refused: set.GetOrCreateCounter(`queen_insufficient_storage_total`)}
}

// record keeps a node's report.
func (st *storageState) record(id string, ok bool, reason string, at time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.peers[id] = peerStorage{ok: ok, reason: reason, at: at}
}

// low returns a node whose fresh report says it is below its reserve (the
// first by id), without allocating: it runs on every request that adds data.
func (st *storageState) low(now time.Time) (id, reason string, found bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for pid, p := range st.peers {
		if !p.ok && now.Sub(p.at) < storageReportTTL && (!found || pid < id) {
			id, reason, found = pid, p.reason, true
		}
	}
	return id, reason, found
}

// nodeReport is one node's storage as this node last heard it.
type nodeReport struct {
	id     string
	ok     bool
	reason string
	age    time.Duration
}

// fresh returns the reports younger than storageReportTTL, by node id.
func (st *storageState) fresh(now time.Time) []nodeReport {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []nodeReport
	for id, p := range st.peers {
		if age := now.Sub(p.at); age < storageReportTTL {
			out = append(out, nodeReport{id: id, ok: p.ok, reason: p.reason, age: age})
		}
	}
	slices.SortFunc(out, func(a, b nodeReport) int {
		if a.id < b.id {
			return -1
		}
		if a.id > b.id {
			return 1
		}
		return 0
	})
	return out
}

// admitData decides whether a request adding n body bytes may run: this
// node's guard (which counts the bytes until release) and the nodes that
// report to it. A refusal is a 507 naming the node, and is counted;
// release is never nil.
func (s *Server) admitData(n int64) (release func(), err error) {
	release, err = s.roomFor(n * dataCharge)
	if err != nil {
		s.storage.refused.Inc()
	}
	return release, err
}

// roomFor is admitData without the count: the spool's replay asks it too.
func (s *Server) roomFor(n int64) (release func(), err error) {
	release = func() {}
	if g := s.opts.Storage; g != nil {
		if release, err = g.Admit(n); err != nil {
			var short *diskspace.ShortageError
			if errors.As(err, &short) {
				err = shortage(s.nodeID(), short.Reason)
			}
			return release, err
		}
	}
	if id, reason, low := s.storage.low(time.Now()); low {
		release()
		return func() {}, shortage(id, reason)
	}
	return release, nil
}

// shortage is the 507 of a node below its reserve; the client reads
// "node <id>: <reason>".
func shortage(node, reason string) error {
	return &apiError{Kind: diskspace.ErrBelowReserve, Msg: "node " + node + ": " + reason}
}

// nodeID returns this node's id, read once from the broker.
func (s *Server) nodeID() string {
	s.storage.idOnce.Do(func() { s.storage.id = s.broker.Status().ID })
	return s.storage.id
}

// storageReport records another node's report:
// POST /internal/v1/cluster/storage {"id", "ok", "reason"}.
func (s *Server) storageReport(ctx *fasthttp.RequestCtx, _ *params) {
	if !s.clustered() {
		s.writeError(ctx, notImplemented("this broker is not a cluster"))
		return
	}
	var (
		id, reason string
		ok, hasOK  bool
	)
	err := wire.DecodeObject(ctx.PostBody(), false, func(sc *wire.Scanner, key []byte) (err error) {
		switch string(key) {
		case "id":
			id, _, err = sc.OptString("id")
		case "ok":
			ok, hasOK, err = sc.OptBool("ok")
		case "reason":
			reason, _, err = sc.OptString("reason")
		default:
			err = sc.Skip()
		}
		return err
	})
	switch {
	case err != nil:
	case id == "":
		err = badRequest("id is required")
	case !hasOK:
		err = badRequest("ok is required")
	case !ok && reason == "":
		err = badRequest("reason is required when ok is false")
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	s.storage.record(id, ok, reason, time.Now())
	noContent(ctx)
}

// reportLoop reports this node's storage to the leader while it follows;
// with queues spread over groups, to every other node that leads one.
func (s *Server) reportLoop(stop <-chan struct{}) {
	const noSecret = "this node's free space is not reported to the leader: reports need the cluster secret (--cluster-secret-file); the leader will accept data while this disk is below its reserve"
	if !s.groups.leaderKnownUnread() {
		s.reportToGroupLeaders(stop, noSecret)
		return
	}
	var outcome changeLog // logged when it changes, not every half second
	s.followLoop(stop, storageReportInterval, noSecret,
		func(st raft.Status) {
			outcome.note(s.log, s.sendReport(st.ID, st.LeaderHTTP), "storage report to the leader failed",
				"storage reports reach the leader again", "leader", st.Leader)
		})
}

// reportToGroupLeaders is reportLoop for a grouped broker: every data
// group's leader proposes that group's pushes, so each must know when a
// replica of its group is low on disk.
func (s *Server) reportToGroupLeaders(stop <-chan struct{}, noSecret string) {
	defer s.loops.Done()
	t := time.NewTicker(storageReportInterval)
	defer t.Stop()
	outcomes := map[string]*changeLog{}
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		sent := map[string]bool{}
		for _, g := range s.groupStatuses() {
			if g.group == 0 || g.Leader == "" || g.Leader == g.ID || g.LeaderHTTP == "" || sent[g.Leader] {
				continue
			}
			if s.opts.ClusterSecret == "" {
				s.log.Warn(noSecret)
				return
			}
			sent[g.Leader] = true
			o := outcomes[g.Leader]
			if o == nil {
				o = &changeLog{}
				outcomes[g.Leader] = o
			}
			o.note(s.log, s.sendReport(g.ID, g.LeaderHTTP), "storage report to a group leader failed",
				"storage reports reach the group leader again", "leader", g.Leader)
		}
	}
}

// sendReport posts this node's guard verdict to the leader at addr.
func (s *Server) sendReport(id, addr string) error {
	gs := s.opts.Storage.Status()
	w := wire.Writer{}
	w.Object("")
	w.Str("id", id)
	w.Bool("ok", gs.OK)
	if !gs.OK {
		w.Str("reason", gs.Reason)
	}
	w.EndObject()
	_, err := s.postToLeader(addr, "/internal/v1/cluster/storage", id, w.Bytes(), storageReportInterval*2, fasthttp.StatusNoContent)
	return err
}

// storageView is /health's "storage": this node's guard and the reports it
// holds.
type storageView struct {
	ok     bool
	reason string
	guard  diskspace.Status
	nodes  []nodeReport
}

func (s *Server) storageView() storageView {
	v := storageView{ok: true, nodes: s.storage.fresh(time.Now())}
	if g := s.opts.Storage; g != nil {
		v.guard = g.Status()
		v.ok, v.reason = v.guard.OK, v.guard.Reason
	}
	for _, r := range v.nodes {
		if v.ok && !r.ok {
			v.ok, v.reason = false, "node "+r.id+": "+r.reason
		}
	}
	return v
}

// writeStorage writes /health's "storage" member:
//
//	{"ok", "reason"?, "reserveBytes", "directories": [{"path", "freeBytes", "error"?}],
//	 "nodes": [{"id", "ok", "reason"?, "ageMs"}]}
//
// ok is false while this node refuses data; reason says why. nodes are the
// fresh reports of the other nodes (on the leader).
func (s *Server) writeStorage(w *wire.Writer) {
	v := s.storageView()
	w.Object("storage")
	w.Bool("ok", v.ok)
	if !v.ok {
		w.Str("reason", v.reason)
	}
	w.Int("reserveBytes", int64(v.guard.MinFreeBytes))
	w.Array("directories")
	for _, d := range v.guard.Dirs {
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
	for _, r := range v.nodes {
		w.Object("")
		w.Str("id", r.id)
		w.Bool("ok", r.ok)
		if !r.ok {
			w.Str("reason", r.reason)
		}
		w.Int("ageMs", r.age.Milliseconds())
		w.EndObject()
	}
	w.EndArray()
	w.EndObject()
}

// writeStorageMetrics writes the storage gauges at scrape time:
// queen_storage_free_bytes{dir}, queen_storage_reserve_bytes,
// queen_storage_below_reserve (this node) and
// queen_storage_nodes_below_reserve (the nodes reporting to this one).
func (s *Server) writeStorageMetrics(w io.Writer) {
	v := s.storageView()
	for _, d := range v.guard.Dirs {
		if d.Err == nil {
			metrics.WriteGaugeUint64(w, `queen_storage_free_bytes{dir="`+labelValue(d.Path)+`"}`, d.Free)
		}
	}
	metrics.WriteGaugeUint64(w, "queen_storage_reserve_bytes", v.guard.MinFreeBytes)
	metrics.WriteGaugeUint64(w, "queen_storage_below_reserve", boolGauge(s.opts.Storage != nil && !v.guard.OK))
	var low uint64
	for _, r := range v.nodes {
		if !r.ok {
			low++
		}
	}
	metrics.WriteGaugeUint64(w, "queen_storage_nodes_below_reserve", low)
}
