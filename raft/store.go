package raft

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/queenmq/queen/raft/logstore"
)

// A Store is one node's data directory as the Raft groups of a Host
// (package cluster) share it: the directory's lock, the log store every
// group's log is in (logstore's family 0x03), the listener every group's
// transport is served on (groupstream.go), and the store's identity
// (identity.go). Each group opened on it (OpenGroup) is a Node of its own,
// with its engine and snapshots under groups/<g>/ (group 1 in the data
// directory itself, as a plain Node's). A group is opened only when the
// node holds a replica of it (package cluster): until then its directory
// does not exist and the listener refuses its connections.
type Store struct {
	opts      Options
	log       *slog.Logger
	lock      io.Closer
	logs      *logstore.Store
	stream    *streamLayer
	id        string            // the data directory's store id (identity.go)
	clusterID string            // the cluster's id (identity.go), "" when it has none
	founders  map[string]string // the founders recorded (identity.go)
	removal   *removal          // closed once this node knows it was removed (removed.go)
	groups    []uint32          // the groups the store may hold, as OpenStore was given them
	mu        sync.Mutex
	nodes     []*Node       // the groups opened on it, in the order they were
	done      chan struct{} // closed when Close begins
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Directory is the id of the directory group, which says how many data
// groups there are and which queue lives in which (package cluster); its
// engine and snapshots are under groups/0/.
const Directory uint32 = 0

// OpenStore locks opts.Dir, opens the log store and the listener that
// groups share, then mints or reads the store id, answers status probes
// and, for a founder whose store holds no state in any of groups, runs the
// founders' round (identity.go) before any group opens, as Open does for
// one. It opens none of groups: OpenGroup does, for those the node holds. It refuses a data directory a node of one group made (ErrLayout):
// as group 1 here its queues would be in no directory.
func OpenStore(opts Options, groups []uint32) (_ *Store, err error) {
	if opts.Transport != nil {
		return nil, fmt.Errorf("raft: host: the groups share a TCP listener; Transport cannot be set")
	}
	s := &Store{opts: opts, log: opts.Logger.With("node", opts.ID), removal: newRemoval(), done: make(chan struct{}),
		groups: slices.Clone(groups)}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("raft: create data dir: %w", err)
	}
	if s.lock, err = lockDir(opts.Dir, true); err != nil {
		return nil, err
	}
	if err := oneGroupStore(opts.Dir); err != nil {
		return nil, err
	}
	// The directory's are made at once, every node holds it: a data
	// directory with a Raft log and no directory group is a plain Node's
	// (oneGroupStore), even when this start stops short of opening it.
	if err := makeDirs(opts.Dir, Directory); err != nil {
		return nil, err
	}
	// The engines a crash on a full disk left are readied with the log
	// store: OpenGroup opens them later, on a disk the log store may
	// have filled meanwhile.
	stores := []string{filepath.Join(opts.Dir, "raft")}
	for _, g := range groups {
		if dir := filepath.Join(groupDir(opts.Dir, g), "engine"); exists(dir) {
			stores = append(stores, dir)
		}
	}
	if err := prepareOpen(s.log, stores, diskSpace(), time.Second, nil); err != nil {
		return nil, err
	}
	if s.logs, err = openLogStore(opts, s.log); err != nil {
		return nil, err
	}
	if s.stream, err = newStreamLayer(opts.RaftAddr, opts.TLS, opts.ClusterSecret, s.log); err != nil {
		return nil, err
	}
	s.stream.holdGroupOne()
	if exposed(s.stream.Addr(), opts) {
		s.log.Warn("raft: the Raft transport has neither TLS nor a cluster secret: "+
			"anyone who can reach this port can join the replication stream", "addr", s.stream.Addr().String())
	}
	if s.founders, err = s.awaitFounders(groups); err != nil {
		return nil, err
	}
	return s, nil
}

// awaitFounders mints or reads the store id, answers status probes and, for
// a founder whose store holds no state in any group, runs the founders'
// round (identity.go) before any group opens, as Open does for one group.
// It returns the founders recorded.
func (s *Store) awaitFounders(groups []uint32) (map[string]string, error) {
	first, err := s.logs.Group(1)
	if err != nil {
		return nil, err
	}
	if s.id, err = storeID(first); err != nil {
		return nil, err
	}
	var logs []*logstore.Log
	for _, g := range groups {
		l, err := s.logs.Group(g)
		if err != nil {
			return nil, err
		}
		logs = append(logs, l)
	}
	state, err := hasState(logs...)
	if err != nil {
		return nil, fmt.Errorf("raft: read state: %w", err)
	}
	founders, cluster, err := openIdentity(s.opts, s.stream, first, s.id, state, s.log)
	if err != nil {
		return nil, err
	}
	s.clusterID = cluster
	return founders, nil
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// oneGroupStore refuses a data directory a node of one group made (a
// Raft log and no directory group): as group 1 of a Host its queues would
// be in no directory, and a push would place a second queue of the same
// name in another group. Raising --groups on a running cluster needs
// queues that move (step 2).
func oneGroupStore(dir string) error {
	_, errLog := os.Stat(filepath.Join(dir, "raft"))
	_, errDir := os.Stat(groupDir(dir, Directory))
	if errLog == nil && errors.Is(errDir, os.ErrNotExist) {
		return fmt.Errorf("%w: %s holds a node of one Raft group; it cannot be opened with several groups "+
			"(start it without --groups, or start a new cluster with them)", ErrLayout, dir)
	}
	return nil
}

// OpenGroup opens group g on the store, with opts (the store's but for
// its Peers: the group's founders, or none for a group this node is not
// founded in), bootstrapping it when told to and it has no state, as Open
// does for a node of its own. It creates the group's directories first.
// A group is opened once.
func (s *Store) OpenGroup(opts Options, g uint32) (*Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		return nil, ErrShutdown
	default:
	}
	if slices.ContainsFunc(s.nodes, func(n *Node) bool { return n.group == g }) {
		return nil, fmt.Errorf("raft: group %d is open already", g)
	}
	if err := makeDirs(opts.Dir, g); err != nil {
		return nil, err
	}
	l, err := s.logs.Group(g)
	if err != nil {
		return nil, err
	}
	// Only a retired group's mark is cleared: a synced write, which every
	// other open would pay for nothing.
	if retired, err := l.GetUint64(retiredKey); err == nil && retired != 0 {
		if err := l.SetUint64(retiredKey, 0); err != nil {
			return nil, fmt.Errorf("raft: group %d: %w", g, err)
		}
	} else if err != nil && !errors.Is(err, logstore.ErrKeyNotFound) {
		return nil, fmt.Errorf("raft: group %d: %w", g, err)
	}
	n, err := open(opts, &hostPart{group: g, store: s.logs, stream: s.stream, storeID: s.id, clusterID: s.clusterID})
	if err != nil {
		return nil, err
	}
	s.nodes = append(s.nodes, n)
	return n, nil
}

// HasState reports whether the store holds Raft state of group g (a term
// or a log entry), opened or not, and not retired (RetireGroup): a node
// that held a replica of g before a restart opens it again.
func (s *Store) HasState(g uint32) (bool, error) {
	l, err := s.logs.Group(g)
	if err != nil {
		return false, err
	}
	if retired, err := l.GetUint64(retiredKey); err == nil && retired != 0 {
		return false, nil
	} else if err != nil && !errors.Is(err, logstore.ErrKeyNotFound) {
		return false, err
	}
	return hasState(l)
}

// replicasKey, a stable key of the directory's log, is the R a founder
// started the cluster with (package cluster): kept until the directory's
// record has it, so that a founder restarted before then still knows it.
var replicasKey = []byte("QueenReplicas")

// KeepReplicas records r under replicasKey.
func (s *Store) KeepReplicas(r uint32) error {
	l, err := s.logs.Group(Directory)
	if err != nil {
		return err
	}
	if err := l.SetUint64(replicasKey, uint64(r)); err != nil {
		return fmt.Errorf("raft: keep the replica count: %w", err)
	}
	return nil
}

// KeptReplicas returns what KeepReplicas recorded, 0 when nothing.
func (s *Store) KeptReplicas() (uint32, error) {
	l, err := s.logs.Group(Directory)
	if err != nil {
		return 0, err
	}
	r, err := l.GetUint64(replicasKey)
	if errors.Is(err, logstore.ErrKeyNotFound) {
		return 0, nil
	}
	return uint32(r), err
}

// retiredKey, a stable key of a group's log (set to 1), marks a replica
// RetireGroup closed and emptied: its term and vote stay (a voter that
// forgot its vote could grant a second one in a term), its entries and
// engine are gone, and HasState answers false, so a restart does not open
// it again. OpenGroup clears it.
var retiredKey = []byte("QueenRetired")

// RetireGroup closes this node's replica of group g, which its group has
// removed, and frees its disk: the log's entries, the engine and the
// snapshots go, the term and vote stay (retiredKey). The caller makes sure
// nothing uses the replica any more and that the removal is committed (a
// replica retired while still a voter would vote with an empty log). It
// returns the bytes the group's directories held.
func (s *Store) RetireGroup(g uint32) (int64, error) {
	s.mu.Lock()
	i := slices.IndexFunc(s.nodes, func(n *Node) bool { return n.group == g })
	if i < 0 {
		s.mu.Unlock()
		return 0, fmt.Errorf("raft: group %d is not open", g)
	}
	n := s.nodes[i]
	s.nodes = slices.Delete(s.nodes, i, i+1)
	s.mu.Unlock()
	if err := n.Close(); err != nil {
		return 0, fmt.Errorf("raft: retire group %d: %w", g, err)
	}
	if g == 1 {
		s.stream.holdGroupOne() // its connections have no group frame
	}
	l, err := s.logs.Group(g)
	if err != nil {
		return 0, err
	}
	if err := l.SetUint64(retiredKey, 1); err != nil {
		return 0, fmt.Errorf("raft: retire group %d: %w", g, err)
	}
	if err := l.Clear(); err != nil {
		return 0, fmt.Errorf("raft: retire group %d: clear its log: %w", g, err)
	}
	var freed int64
	for _, sub := range []string{"engine", "snapshots"} {
		dir := filepath.Join(groupDir(s.opts.Dir, g), sub)
		freed += dirBytes(dir)
		if err := os.RemoveAll(dir); err != nil {
			return freed, fmt.Errorf("raft: retire group %d: %w", g, err)
		}
	}
	// Group 1's are the data directory's own engine/ and snapshots/,
	// which the node's free-space guard watches: they stay, empty.
	return freed, makeDirs(s.opts.Dir, g)
}

// dirBytes is the size of the files under dir (0 when it cannot be read).
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// opened returns the groups opened so far.
func (s *Store) opened() []*Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.nodes)
}

// Serve answers status probes from the groups opened on the store (those
// opened later too), and watches for this node's removal through
// directory, a group every node of the cluster is a member of
// (removed.go), until Close. Call it once directory is open.
func (s *Store) Serve(directory *Node) {
	s.stream.setIdentity(func() identity {
		id := identity{Node: s.opts.ID, Store: s.id, Known: true, Founders: s.founders}
		for _, n := range s.opened() {
			id.State = id.State || n.raft.LastIndex() > 0
			for _, m := range n.members() {
				if !slices.Contains(id.Members, m) {
					id.Members = append(id.Members, m)
				}
			}
		}
		return id
	})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.removal.watch(s.stream, s.opts.ID, directory.leaderless, directory.configuration, s.log, s.done)
	}()
}

// Removed is closed once this node knows it was removed from the cluster
// (removed.go): the directory Serve watches knows no leader, and the other
// nodes run it without this one.
func (s *Store) Removed() <-chan struct{} { return s.removal.Removed() }

// Close stops every group opened on the store, then closes the listener
// and the log store and releases the data directory. A group whose raft
// would not stop (ErrShutdownStuck) still uses the log store, which then
// stays open.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.mu.Lock()
		close(s.done) // under mu: no group opens after it
		s.mu.Unlock()
		s.wg.Wait()
		err = s.closeParts()
	})
	return err
}

func (s *Store) closeParts() error {
	// The groups stop at once: one by one, the groups still running
	// would see the first ones' leaders go, and could elect and apply
	// without this node while it is stopping.
	nodes := s.opened()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.Close() })
	}
	wg.Wait()
	stuck := false
	for _, err := range errs {
		stuck = stuck || errors.Is(err, ErrShutdownStuck)
	}
	if s.stream != nil {
		errs = append(errs, s.stream.Close())
	}
	if stuck {
		// A group's raft still uses the log store (Node.Close).
		return errors.Join(errs...)
	}
	if s.logs != nil {
		errs = append(errs, s.logs.Close())
	}
	if s.lock != nil {
		errs = append(errs, s.lock.Close())
	}
	return errors.Join(errs...)
}

// keepOpen is the store's stream layer as group 1's transport sees it:
// closing the transport ends its Accept but leaves the listener, which the
// other groups share, to the Store (a retired group 1 opened again accepts
// on a keepOpen of its own).
type keepOpen struct {
	*streamLayer
	closed chan struct{}
	once   sync.Once
}

func newKeepOpen(s *streamLayer) *keepOpen {
	return &keepOpen{streamLayer: s, closed: make(chan struct{})}
}

func (k *keepOpen) Accept() (net.Conn, error) {
	select {
	case <-k.closed:
		return nil, net.ErrClosed
	default:
	}
	select {
	case c := <-k.conns:
		if k.isClosed() {
			c.Close()
			return nil, net.ErrClosed
		}
		return c, nil
	case <-k.streamLayer.closed:
		return nil, net.ErrClosed
	case <-k.closed:
		return nil, net.ErrClosed
	}
}

func (k *keepOpen) Close() error {
	k.once.Do(func() { close(k.closed) })
	return nil
}
