package raft

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/raft/logstore"
)

// A lost disk never votes.
//
// Raft's safety rests on every voter keeping what it acknowledged. A node
// whose data directory is lost and that starts again under its old id with
// the same --peers (what a Kubernetes StatefulSet does with a new volume)
// has an empty log: it would bootstrap again, or grant its vote to any
// candidate, and a candidate that lacks committed entries could then win
// and truncate them on every other node. So a node is known by its store as
// well as its name:
//
//   - The store id is 16 random bytes minted the first time a data
//     directory's Raft log store opens, kept in group 1's stable keys
//     (storeIDKey), so it is lost with the log it names.
//   - A founder (a node --peers lists) whose store holds no Raft state does
//     not start Raft until it has asked every other founder, over the Raft
//     listener, what it holds (the status probe below). It bootstraps only
//     when each is empty too, or has bootstrapped having seen this very
//     store empty (a founder that was slower to start). When a founder
//     answers with state that was not born with this store, the store is
//     lost: Open returns ErrStoreLost, which names the fix, when that founder
//     counts this node's id as a member, and ErrNotMember when no founder
//     does (the old store was removed: the node may join as a new member).
//     A founder that does not answer is waited for, however long: deciding
//     without it could bootstrap a second cluster beside its data.
//   - Before bootstrapping, a founder records the store id of every founder
//     it saw empty (foundersKey), which is what it answers later probes
//     with.
//
// Nothing here is replicated or read by the FSM: the stores, the founders'
// record and the probe are each node's own, so determinism is untouched.
//
// The status probe, on a connection set up as any other (TLS and the
// cluster-secret hello when configured, so only a peer that passes them is
// answered), in place of a group frame (groupstream.go):
//
//	dialer   → acceptor: "QSTA"                          (4 B)
//	acceptor → dialer:   length u32 BE | JSON identity   (4 B + length ≤ 64 KiB)
//
// and the acceptor hangs up. Raft's own stream starts with an RPC type byte
// (0 to 4), never 'Q'. An acceptor that cannot answer yet (its node is still
// opening its stores) hangs up without a word, and the dialer asks again.
// Part of the wire format — never change; new fields go into the JSON.
const (
	statusMagic    = "QSTA"
	maxStatusBytes = 64 << 10
)

// Stable keys of this package's own in group 1's log store, beside raft's
// (CurrentTerm, LastVoteTerm, LastVoteCand). Part of the on-disk format —
// never change.
var (
	storeIDKey   = []byte("QueenStoreID")
	foundersKey  = []byte("QueenFounders")
	clusterIDKey = []byte("QueenClusterID") // a joiner's, as the cluster it joined named it
)

// The cluster id names a cluster for good: 32 hex digits of SHA-256 over
// its founders and their stores ("id=store\n", sorted by id), which every
// founder records in the founders' round, so each derives the same id; a
// lone founder's is over itself. A joiner records the id the cluster it
// joins answers with (/health "cluster"). A cluster bootstrapped before
// store ids has none ("").
func clusterIDOf(founders map[string]string) string {
	if len(founders) == 0 {
		return ""
	}
	ids := make([]string, 0, len(founders))
	for id := range founders {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	h := sha256.New()
	for _, id := range ids {
		fmt.Fprintf(h, "%s=%s\n", id, founders[id])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// openIdentity does what "A lost disk never votes" asks of a node as it
// opens, before Raft runs: it answers status probes on stream (nil: no
// network transport) and, when the node holds no state (state), checks a
// joiner (checkJoiner) or runs a founder's round (awaitFounders), recording
// the founders in first, group 1's log. It returns the founders recorded and
// the cluster id.
func openIdentity(opts Options, stream *streamLayer, first *logstore.Log, store string, state bool,
	log *slog.Logger) (map[string]string, string, error) {
	founders, err := recordedFounders(first)
	if err != nil {
		return nil, "", err
	}
	self := identity{Node: opts.ID, Store: store, State: state, Founders: founders}
	if stream != nil {
		stream.setIdentity(func() identity { return self })
	}
	if !state {
		joined, err := checkJoiner(opts, log)
		if err != nil {
			return nil, "", err
		}
		if joined != "" {
			if err := first.Set(clusterIDKey, []byte(joined)); err != nil {
				return nil, "", fmt.Errorf("raft: record the cluster id: %w", err)
			}
		}
		bootstraps := len(opts.Peers) > 0 || opts.Bootstrap
		switch {
		case stream != nil && opts.AwaitFounders && otherFounders(opts):
			if founders, err = awaitFounders(stream, self, opts.Peers, log, nil); err != nil {
				return nil, "", err
			}
		case bootstraps && !otherFounders(opts):
			founders = map[string]string{opts.ID: store}
		case bootstraps:
			// Founders that bootstrap without the round (AwaitFounders off:
			// tests) know nothing of each other's stores: no founders, so
			// no cluster id, rather than one id per founder that their
			// handshakes would then refuse.
			founders = nil
		}
		if bootstraps && founders != nil {
			if err := recordFounders(first, founders); err != nil {
				return nil, "", err
			}
		}
	}
	cluster := clusterIDOf(founders)
	if v, err := first.Get(clusterIDKey); err == nil && len(v) > 0 {
		cluster = string(v)
	}
	if stream != nil {
		stream.setCluster(cluster) // carried by every connection from now on (transport.go)
	}
	return founders, cluster, nil
}

// identity is what a node answers a status probe with.
type identity struct {
	Node  string `json:"node"`
	Store string `json:"store"`
	// State says the node holds Raft state: it bootstrapped, or a leader
	// sent it entries or a snapshot.
	State bool `json:"state"`
	// Members lists the ids of the latest configuration of every group the
	// node runs, voters and non-voters; Known says Raft is running and
	// Members is what it holds (before that, Members is empty).
	Members []string `json:"members,omitempty"`
	Known   bool     `json:"known"`
	// Founders maps each founder this node saw empty when it bootstrapped
	// to the store id that founder answered with.
	Founders map[string]string `json:"founders,omitempty"`
}

// storeID returns the store id kept in log (group 1's stable keys),
// minting one when there is none.
func storeID(log *logstore.Log) (string, error) {
	v, err := log.Get(storeIDKey)
	switch {
	case err == nil && len(v) > 0:
		return string(v), nil
	case err != nil && !errors.Is(err, logstore.ErrKeyNotFound):
		return "", fmt.Errorf("raft: read the store id: %w", err)
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("raft: mint a store id: %w", err)
	}
	id := hex.EncodeToString(b[:])
	if err := log.Set(storeIDKey, []byte(id)); err != nil {
		return "", fmt.Errorf("raft: record the store id: %w", err)
	}
	return id, nil
}

// recordedFounders returns what recordFounders wrote, nil when nothing.
func recordedFounders(log *logstore.Log) (map[string]string, error) {
	v, err := log.Get(foundersKey)
	if errors.Is(err, logstore.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("raft: read the founders: %w", err)
	}
	var m map[string]string
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, fmt.Errorf("raft: read the founders: %w: %w", logstore.ErrCorrupt, err)
	}
	return m, nil
}

func recordFounders(log *logstore.Log, m map[string]string) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := log.Set(foundersKey, b); err != nil {
		return fmt.Errorf("raft: record the founders: %w", err)
	}
	return nil
}

// hasState reports whether any of logs holds Raft state (a term or an
// entry): a node that bootstrapped, or was sent entries, writes its term.
func hasState(logs ...*logstore.Log) (bool, error) {
	for _, l := range logs {
		if term, err := l.GetUint64([]byte("CurrentTerm")); err == nil && term > 0 {
			return true, nil
		} else if err != nil && !errors.Is(err, logstore.ErrKeyNotFound) {
			return false, err
		}
		if last, err := l.LastIndex(); err != nil || last > 0 {
			return last > 0, err
		}
	}
	return false, nil
}

// setIdentity sets what the layer answers status probes with.
func (s *streamLayer) setIdentity(f func() identity) { s.identity.Store(&f) }

// answerStatus answers a status probe on conn, whose magic has been read.
func (s *streamLayer) answerStatus(conn net.Conn) error {
	f := s.identity.Load()
	if f == nil {
		return errors.New("status probe before the node's identity is known")
	}
	b, err := json.Marshal((*f)())
	if err != nil {
		return err
	}
	if _, err := conn.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b)))); err != nil {
		return err
	}
	_, err = conn.Write(b)
	return err
}

// askStatus probes the node listening at addr.
func (s *streamLayer) askStatus(addr string) (identity, error) {
	var id identity
	conn, err := s.Dial(hraft.ServerAddress(addr), handshakeTimeout)
	if err != nil {
		return id, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(handshakeTimeout)); err != nil {
		return id, err
	}
	if _, err := io.WriteString(conn, statusMagic); err != nil {
		return id, fmt.Errorf("send the status probe: %w", err)
	}
	var n [4]byte
	if _, err := io.ReadFull(conn, n[:]); err != nil {
		return id, fmt.Errorf("read the status (a node still opening, or one of a version without it): %w", err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxStatusBytes {
		return id, fmt.Errorf("status of %d bytes, more than %d", size, maxStatusBytes)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(conn, b); err != nil {
		return id, fmt.Errorf("read the status: %w", err)
	}
	if err := json.Unmarshal(b, &id); err != nil {
		return id, fmt.Errorf("read the status: %w", err)
	}
	return id, nil
}

// founderRound is how long a founder waits between asking the founders that
// have not answered, and how often it says whom it waits for.
var (
	founderRound      = 500 * time.Millisecond
	founderReport     = 10 * time.Second
	notMemberDecision = 30 * time.Second
	joinListed        = 8 * time.Second
)

// awaitFounders runs the first start of founder self (its store empty; see
// "A lost disk never votes" above): it asks every other founder in peers
// until each has answered, and returns the store ids of those it saw empty,
// itself included, for recordFounders. It returns ErrStoreLost or
// ErrNotMember as described there, and ErrShutdown when stop closes.
func awaitFounders(s *streamLayer, self identity, peers []Peer, log *slog.Logger, stop <-chan struct{}) (map[string]string, error) {
	seen := map[string]string{self.Node: self.Store}
	waiting := map[string]string{} // founder -> why it has not answered
	// Founders with state that do not count self a member, this round.
	// Each is asked again every round: one that answered in passing (a
	// moment of its start, or another node on its address) and counts
	// self a member the next time makes it ErrStoreLost, the safe verdict.
	var notMember []string
	var firstNotMember time.Time
	began, reported := time.Now(), time.Now()
	for {
		clear(waiting)
		notMember = notMember[:0]
		for _, p := range peers {
			if _, ok := seen[p.ID]; ok || p.ID == self.Node {
				continue
			}
			st, err := s.askStatus(p.Addr)
			switch {
			case err != nil:
				waiting[p.ID] = err.Error()
			case st.Node != p.ID:
				waiting[p.ID] = fmt.Sprintf("%s answers as node %q", p.Addr, st.Node)
			case !st.State, st.Founders[self.Node] == self.Store:
				// Empty too, or it bootstrapped having seen this store
				// empty: a founder's first start either way.
				seen[p.ID] = st.Store
			case !st.Known || slices.Contains(st.Members, self.Node):
				return nil, fmt.Errorf("%w: %s at %s holds the cluster's state and counts %s a member, with a store other than this empty one "+
					"(the disk of %s was lost or replaced: voting under its old id could elect a leader that lacks acknowledged writes). "+
					"Remove the old store first, through any other node: queen leave --url <its HTTP URL> --node-id %s --force; "+
					"then start this node again (with --join it rejoins as a new member)",
					ErrStoreLost, p.ID, p.Addr, self.Node, self.Node, self.Node)
			default:
				notMember = append(notMember, p.ID)
			}
		}
		switch {
		case len(notMember) == 0:
			firstNotMember = time.Time{}
		case firstNotMember.IsZero():
			firstNotMember = time.Now()
		}
		switch {
		case len(waiting) == 0 && len(notMember) == 0:
			return seen, nil
		case len(notMember) > 0 && (len(waiting) == 0 || time.Since(firstNotMember) >= notMemberDecision):
			return nil, fmt.Errorf("%w: %s hold the cluster's state and do not count %s a member; start it with --join to join as a new member",
				ErrNotMember, strings.Join(notMember, ", "), self.Node)
		}
		if time.Since(reported) >= founderReport {
			reported = time.Now()
			var why []string
			for _, p := range peers {
				if w, ok := waiting[p.ID]; ok {
					why = append(why, p.ID+": "+w)
				}
			}
			log.Info("raft: waiting for every founder to answer before bootstrapping (this node's store is empty)",
				"waited", time.Since(began).Round(time.Second), "waiting_for", strings.Join(why, "; "))
		}
		select {
		case <-stop:
			return nil, ErrShutdown
		case <-time.After(founderRound):
		}
	}
}

// checkJoiner runs, for a node that joins and holds no Raft state, the
// joiner's side of "A lost disk never votes": while the cluster's members
// (Options.JoinMembers) cannot be read it asks again, and it returns
// ErrStoreLost when they include this node's id for joinListed on end (a
// node an older binary runs publishes a list read every few seconds: an id
// removed a moment ago may still be on it). It returns the cluster's id.
func checkJoiner(opts Options, log *slog.Logger) (string, error) {
	if opts.JoinMembers == nil || len(opts.Peers) > 0 || opts.Bootstrap {
		return "", nil
	}
	var listed time.Time
	began, reported := time.Now(), time.Now()
	for {
		members, cluster, err := opts.JoinMembers()
		if err == nil && !slices.Contains(members, opts.ID) {
			return cluster, nil
		}
		if err == nil {
			if listed.IsZero() {
				listed = time.Now()
			}
			if time.Since(listed) >= joinListed {
				return "", fmt.Errorf("%w: the cluster it joins counts %s a member (%s), with a store other than this empty one "+
					"(the disk of %s was lost or replaced: voting under its old id could elect a leader that lacks acknowledged writes). "+
					"Remove the old store first, through any node: queen leave --url <its HTTP URL> --node-id %s --force; "+
					"then start this node again",
					ErrStoreLost, opts.ID, strings.Join(members, ", "), opts.ID, opts.ID)
			}
		} else {
			listed = time.Time{}
		}
		if time.Since(reported) >= founderReport {
			reported = time.Now()
			log.Info("raft: waiting for the cluster to say whom it counts before joining (this node's store is empty)",
				"waited", time.Since(began).Round(time.Second), "err", err)
		}
		time.Sleep(founderRound)
	}
}

// configMembers lists the ids of conf's servers.
func configMembers(conf hraft.Configuration) []string {
	ids := make([]string, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		ids = append(ids, string(s.ID))
	}
	return ids
}

// otherFounders reports whether opts.Peers names a founder besides this
// node.
func otherFounders(opts Options) bool {
	return slices.ContainsFunc(opts.Peers, func(p Peer) bool { return p.ID != opts.ID })
}

// members lists the ids of the node's latest configuration, nil when raft
// cannot say.
func (n *Node) members() []string {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	return configMembers(f.Configuration())
}

// undoHalfBootstrap clears a bootstrap that a stop cut in two. hashicorp/raft
// bootstraps in two writes, the term (1) and then the first entry (the
// configuration); a node stopped between them has state, so it never
// bootstraps again, and no configuration, so it never elects: it stays
// down for good. Term 1 with no entry, no snapshot and no vote is that
// state and nothing else (a node that learned term 1 from a leader got
// entries from it, or never bootstraps), so the term is set back to 0 and
// the bootstrap runs again, with the configuration it would have written.
func undoHalfBootstrap(log *logstore.Log, snaps hraft.SnapshotStore, l *slog.Logger) error {
	term, err := log.GetUint64([]byte("CurrentTerm"))
	if err != nil || term != 1 {
		return nil
	}
	if last, err := log.LastIndex(); err != nil || last != 0 {
		return err
	}
	if list, err := snaps.List(); err != nil || len(list) > 0 {
		return err
	}
	if vote, err := log.GetUint64([]byte("LastVoteTerm")); err == nil && vote != 0 {
		return nil
	}
	l.Warn("raft: a bootstrap was cut short by a stop; bootstrapping again")
	if err := log.SetUint64([]byte("CurrentTerm"), 0); err != nil {
		return fmt.Errorf("raft: undo a half bootstrap: %w", err)
	}
	return nil
}
