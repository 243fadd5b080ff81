package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/relay"
	"github.com/queenmq/queen/server/spool"
)

// Maintainer is implemented by brokers with Queen's cluster-wide maintenance
// switches (docs/semantics.md §12): while push maintenance is on, pushes go to this
// node's spool and are answered "buffered"; while pop maintenance is on,
// every pop answers 204. raft.Node implements it; the switches are set by
// proposing command.Maintenance.
type Maintainer interface {
	Maintenance() (push, pop bool)
}

// drainLoop replays the spool whenever push maintenance is off.
func (s *Server) drainLoop(m Maintainer, stop <-chan struct{}) {
	defer close(s.drained)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if push, _ := m.Maintenance(); push || s.spool.Pending() == 0 {
			continue
		}
		// Replaying adds the spooled data to the store: not while a disk
		// of the cluster is below its reserve (a follower's replay is a
		// command the leader's propose route checks, as it checks a
		// relayed push; this covers the leader's own).
		if _, err := s.roomFor(0); err != nil {
			continue
		}
		if err := s.spool.Drain(s.replaySpooled); err != nil {
			s.log.Warn("spool replay", "err", err)
		}
	}
}

// spoolReplayHeader marks a push that replays another node's spool. It
// counts only on a request that carries the cluster secret. A follower
// relays its spool this way only to a leader without the cluster path (an
// older version, cluster.ErrNoPath) or without the secret; the push route
// keeps reading it, since a follower of an older version still sends its
// replays so to a leader of this one during a rolling upgrade.
const spoolReplayHeader = "X-Queen-Spool-Replay"

// replaySpooled pushes one spool file's items (Spool.Drain) through the
// broker's proposer, as stored, sealed bits and producer subjects
// included: here on the leader or a grouped broker, and from a follower to
// the leader on the cluster path (cluster.Proxy), which only nodes speak,
// like any other command. Their transaction ids make a replay that runs
// again (an answer lost, the node stopped before the file was removed)
// answer duplicates instead of storing twice. Only when the path does not
// carry the push (cluster.ErrNoPath: an older leader, or an entry past the
// body limit) or there is none (no cluster secret) does a follower relay
// the items to the leader as an ordinary HTTP push (relayPush).
func (s *Server) replaySpooled(items []engine.PushItem) error {
	ctx, cancel := context.WithTimeout(s.ctx, forwardTimeout)
	defer cancel()
	res, err := raft.Propose[[]engine.PushResult](ctx, s.send, engine.PushCmd{Items: items})
	switch {
	case err == nil:
		s.countPushed(res) // the leader counts only the pushes its push route answers
		return nil
	case errors.Is(err, cluster.ErrNoPath),
		s.cluster == nil && s.groups.leaderKnownUnread() && errors.Is(err, raft.ErrNotLeader):
		return s.relayPush(items)
	}
	return fmt.Errorf("server: spool replay: %w", err)
}

// relayPush relays spooled items to the leader as an HTTP push of their
// plaintext (relayBody): the replay's way to a leader the cluster path
// does not reach.
func (s *Server) relayPush(items []engine.PushItem) error {
	st := s.broker.Status()
	if st.LeaderHTTP == "" {
		return fmt.Errorf("server: spool replay: no leader")
	}
	body, err := s.relayBody(items)
	if err != nil {
		return err
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	// As a node of the cluster (relay.Requests.To): the leader keeps the
	// producerSub each item was spooled with. Without the secret the
	// replay is an anonymous push (refused when JWT is on: configure it).
	s.relay.To(req, st.LeaderHTTP, "/api/v1/push")
	req.Header.SetContentType("application/json")
	if s.opts.ClusterSecret != "" {
		req.Header.Set(spoolReplayHeader, "1")
	}
	relay.SetDeadline(req, forwardTimeout)
	req.SetBodyRaw(body) // not copied into, nor left in, fasthttp's pool
	if err := s.relay.Do(req, resp, forwardTimeout); err != nil {
		return fmt.Errorf("server: spool replay: %w", err)
	}
	if resp.StatusCode() != fasthttp.StatusCreated {
		return fmt.Errorf("server: spool replay: leader answered %d: %s", resp.StatusCode(), resp.Body())
	}
	return nil
}

// relayBody is the push request a follower relays for spooled items. The
// leader cannot take a request's word that a payload is already sealed: any
// client could say so of a captured envelope and have it opened on read. So
// sealed items are opened here and relayed as the plaintext the client sent,
// as a forwarded push carries it, and the leader seals them again by the
// queue's flag. An item that does not open under this node's key fails the
// replay; its file stays for the next attempt.
func (s *Server) relayBody(items []engine.PushItem) ([]byte, error) {
	body := []byte(`{"items":[`)
	for i := range items {
		it := items[i]
		if it.Sealed {
			plain, ok := s.crypt.Open(it.Payload)
			if !ok {
				return nil, errSpoolUnopened
			}
			it.Payload, it.Sealed = plain, false
		}
		if i > 0 {
			body = append(body, ',')
		}
		b, err := spool.MarshalItem(&it)
		if err != nil {
			return nil, err
		}
		body = append(body, b...)
	}
	return append(body, "]}"...), nil
}

// bufferPush answers a push during push maintenance: its items go to the
// spool, and each is answered "buffered" (201), or the whole request 500s
// when the spool cannot be written (docs/semantics.md §12).
func (s *Server) bufferPush(ctx *fasthttp.RequestCtx, items []engine.PushItem) {
	if s.spool == nil {
		s.writeError(ctx, errNoSpool)
		return
	}
	if err := s.spool.Write(items); err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startReply(ctx)
	w.Array("")
	for i := range items {
		it := &items[i]
		w.Object("")
		w.Int("index", int64(i))
		w.Str("status", "buffered")
		w.Str("queue", it.Queue)
		w.Str("queueName", it.Queue)
		partition := it.Partition
		if partition == "" {
			partition = engine.DefaultPartition
		}
		w.Str("partition", partition)
		w.Str("transactionId", it.TransactionID)
		w.Str("transaction_id", it.TransactionID)
		w.EndObject()
	}
	w.EndArray()
	sendReply(ctx, fasthttp.StatusCreated, w)
}
