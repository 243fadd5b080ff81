package raft

import (
	"io"
	"log/slog"
	"sync"

	hraft "github.com/hashicorp/raft"
)

// heldSnapshots answers, in front of hashicorp/raft, an InstallSnapshot
// whose last entry this replica already holds: rule 6 of the Raft paper's
// InstallSnapshot ("if an existing log entry has the same index and term as
// the snapshot's last included entry, retain log entries following it and
// reply"), which hashicorp/raft does not implement. It installs every
// snapshot it is sent: it restores the FSM to the snapshot's index, drops
// the whole log (the log store is monotonic) and sets the configuration to
// the snapshot's, even when this replica's log already runs past the
// snapshot. A leader sent a joiner the same snapshot twice, the second time
// after the joiner had appended the entries that added it and made it a
// voter: the joiner's configuration went back to the snapshot's, which did
// not list it, and stayed so (no later entry changed the configuration), so
// it never stood for election and its /health said it was no member (the
// chaos suite, seed 984274746, TestChaos in CI).
//
// Such a request is answered Success without a restore, after its snapshot
// stream is read through (the transport carries it on the same
// connection): the leader then sends the entries after the snapshot's last,
// which this replica holds or takes. Only a request of this replica's
// current term is answered so: one of another term goes to Raft, which
// steps down or refuses as the protocol says.
type heldSnapshots struct {
	hraft.Transport
	out  chan hraft.RPC
	stop chan struct{}
	once sync.Once
	// holds reports whether this replica holds the entry at index with
	// term: in its log, or as its latest snapshot's last entry.
	holds func(index, term uint64) bool
	// term is this replica's current term, as Raft stored it.
	term   func() (uint64, error)
	header hraft.RPCHeader
	log    *slog.Logger
}

// newHeldSnapshots wraps t (which must also implement hraft.WithPreVote and
// hraft.WithClose, as the network and in-memory transports do).
func newHeldSnapshots(t hraft.Transport, id string, holds func(index, term uint64) bool, term func() (uint64, error), log *slog.Logger) *heldSnapshots {
	h := &heldSnapshots{Transport: t, out: make(chan hraft.RPC), stop: make(chan struct{}), holds: holds, term: term, log: log,
		header: hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte(id),
			Addr: t.EncodePeer(hraft.ServerID(id), t.LocalAddr())}}
	go h.run()
	return h
}

// Consumer is where Raft reads the RPCs sent to it.
func (h *heldSnapshots) Consumer() <-chan hraft.RPC { return h.out }

// RequestPreVote forwards to the transport (hraft.WithPreVote).
func (h *heldSnapshots) RequestPreVote(id hraft.ServerID, target hraft.ServerAddress, args *hraft.RequestPreVoteRequest, resp *hraft.RequestPreVoteResponse) error {
	return h.Transport.(hraft.WithPreVote).RequestPreVote(id, target, args, resp)
}

// Close stops the filter and closes the transport (hraft.WithClose).
func (h *heldSnapshots) Close() error {
	h.halt()
	if c, ok := h.Transport.(hraft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// halt stops the filter without closing the transport (one the node was
// given, which its owner closes).
func (h *heldSnapshots) halt() { h.once.Do(func() { close(h.stop) }) }

func (h *heldSnapshots) run() {
	in := h.Transport.Consumer()
	for {
		var rpc hraft.RPC
		select {
		case rpc = <-in:
		case <-h.stop:
			return
		}
		if req, ok := rpc.Command.(*hraft.InstallSnapshotRequest); ok && h.held(req) {
			h.answer(rpc, req)
			continue
		}
		select {
		case h.out <- rpc:
		case <-h.stop:
			return
		}
	}
}

// held reports whether req can be answered without installing it.
func (h *heldSnapshots) held(req *hraft.InstallSnapshotRequest) bool {
	term, err := h.term()
	return err == nil && term == req.Term && h.holds(req.LastLogIndex, req.LastLogTerm)
}

// answer reads req's snapshot through and answers Success.
func (h *heldSnapshots) answer(rpc hraft.RPC, req *hraft.InstallSnapshotRequest) {
	if rpc.Reader != nil {
		if n, err := io.CopyN(io.Discard, rpc.Reader, req.Size); err != nil {
			rpc.Respond(nil, err)
			h.log.Warn("raft: read through a snapshot this replica holds", "index", req.LastLogIndex, "read", n, "size", req.Size, "err", err)
			return
		}
	}
	h.log.Info("raft: a snapshot whose last entry this replica holds was answered without installing it",
		"index", req.LastLogIndex, "term", req.LastLogTerm, "leader", string(req.ID))
	rpc.Respond(&hraft.InstallSnapshotResponse{RPCHeader: h.header, Term: req.Term, Success: true}, nil)
}

// holds reports whether the replica holds the entry at index with term:
// in its log, or as its latest snapshot's last entry (heldSnapshots).
func (d *disk) holds(index, term uint64) bool {
	var l hraft.Log
	if err := d.log.GetLog(index, &l); err == nil {
		return l.Term == term
	}
	metas, err := d.snaps.List()
	return err == nil && len(metas) > 0 && metas[0].Index == index && metas[0].Term == term
}

// currentTerm is the term Raft last stored.
func (d *disk) currentTerm() (uint64, error) { return d.log.GetUint64([]byte("CurrentTerm")) }
