package server

import (
	"errors"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/diskspace"
	"github.com/queenmq/queen/server/wire"
)

// Disk space is a managed resource (package diskspace, "# Reports from
// other nodes" in its doc): this file holds the HTTP side, the 507 and the
// reports a follower sends to its leader.

// storageReportInterval is how often a follower reports to the leader.
const storageReportInterval = 500 * time.Millisecond

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
	reports *diskspace.Reports
	// refused counts 507 answers (queen_insufficient_storage_total).
	refused *metrics.Counter
	idOnce  sync.Once
	id      string // this node's id (nodeID)
}

func newStorageState(set *metrics.Set) *storageState {
	return &storageState{reports: diskspace.NewReports(),
		refused: set.GetOrCreateCounter(`queen_insufficient_storage_total`)}
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
	if id, reason, low := s.storage.reports.Low(time.Now()); low {
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
	s.storage.reports.Record(id, ok, reason, time.Now())
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
// replica of its group is low on disk. A node reports to the leaders of
// the groups it holds a replica of, and only to them: a group on other
// nodes appends nothing here, so this disk cannot stall it, and its
// leader would otherwise refuse data for a disk it never writes to (and,
// on R of N, every node would send 2(N-1) reports a second where it
// needs at most 2R).
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
			if g.group == 0 || g.Role == "none" || g.Leader == "" || g.Leader == g.ID || g.LeaderHTTP == "" || sent[g.Leader] {
				continue // the directory takes no data; "none": no replica here
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
	_, err := s.postToLeader(addr, cluster.StoragePath, w.Bytes(), storageReportInterval*2, fasthttp.StatusNoContent)
	return err
}

// storageView is what this node says of its free space: its guard and
// the reports it holds (/health's "storage", the storage gauges).
func (s *Server) storageView() diskspace.View {
	return diskspace.NewView(s.opts.Storage, s.storage.reports, time.Now())
}
