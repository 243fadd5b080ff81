package raft

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/internal/rounds"
	"github.com/queenmq/queen/raft/command"
	"github.com/queenmq/queen/raft/logstore"
)

// Node is one broker replica: the engine as a Raft state machine, a
// proposer that groups concurrent commands into log entries, and the local
// read view. One node alone is a single-voter cluster on the same path.
type Node struct {
	opts      Options
	log       *slog.Logger
	raft      *hraft.Raft
	engine    *engine.Engine
	store     *logstore.Store // the node's log store (a Host's, shared by its groups)
	transport hraft.Transport
	disk      *disk
	held      *heldSnapshots // the transport, answering the snapshots it holds (snapshotrule.go)
	stream    *streamLayer   // nil when Options.Transport is set
	notify    *notifier
	fsm       *fsm
	live      *liveness
	// group is the Raft group this node runs (1 unless a Host opened it);
	// hosted says the log store and stream layer are the Host's, not closed
	// with the node.
	group  uint32
	hosted bool
	// storeID names the node's store (identity.go): its data directory's,
	// shared by a Host's groups.
	storeID   string
	clusterID string   // the cluster's id (identity.go), "" when it has none
	removal   *removal // closed once this node knows it was removed (removed.go)
	// membership serialises Join and Leave: a check and the change it
	// allows happen together.
	membership sync.Mutex

	proposals chan *proposal
	readTerm  readTerm // LeaderRead's barrier (read.go)
	readIndex *rounds.Rounds[uint64]
	written   atomic.Uint64 // NoteWritten (read.go)
	publish   publisher     // Publish (read.go)
	versions  versions      // the cluster's command versions (version.go)
	inflight  chan struct{}
	done      chan struct{}
	stopped   chan struct{} // closed once raft has shut down (Close)
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// proposal is one command waiting for its entry, and where its answer goes.
type proposal struct {
	cmd  command.Stamped
	done chan proposed
	at   time.Time // queued
}

// proposed is a proposal's outcome.
type proposed struct {
	res engine.Result
	err error
}

// Open starts a node: it opens the engine and the Raft log, bootstraps a new
// cluster when told to and there is no state yet, and starts proposing. It
// returns ErrInUse when another node holds opts.Dir.
func Open(opts Options) (*Node, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	// A Host's directory (--groups) opened as one group would serve group
	// 1 and leave the other groups' queues unserved.
	if groups, err := hostedGroups(opts.Dir); err != nil {
		return nil, err
	} else if len(groups) > 0 {
		return nil, fmt.Errorf("%w: %s holds a node of %d Raft groups; start it with the --groups it was created with",
			ErrLayout, opts.Dir, len(groups))
	}
	return open(opts, nil)
}

// hostPart is what a Host lends the node of one of its groups: the log
// store and the stream layer all its groups share.
type hostPart struct {
	group     uint32
	store     *logstore.Store
	stream    *streamLayer
	storeID   string
	clusterID string
}

// open starts a node on its own data directory, log store and listener, or,
// with h, as group h.group of a Host.
func open(opts Options, h *hostPart) (*Node, error) {
	n := &Node{opts: opts, log: opts.Logger.With("node", opts.ID), notify: newNotifier(),
		proposals: make(chan *proposal, 4096), inflight: make(chan struct{}, opts.MaxInFlight),
		done: make(chan struct{}), stopped: make(chan struct{}), live: newLiveness(), group: 1, removal: newRemoval()}
	n.readIndex = rounds.New(opts.ApplyTimeout, n.confirmRead)
	n.versions.cluster.Store(1)
	if h != nil {
		n.group, n.hosted, n.storeID, n.clusterID = h.group, true, h.storeID, h.clusterID
		n.log = n.log.With("group", h.group)
	}
	ok := false
	defer func() {
		if !ok {
			n.closeParts()
		}
	}()
	var err error
	if h == nil {
		n.disk, err = openDisk(opts, n.log)
	} else {
		n.disk, err = openGroupDisk(opts, h.store, h.group, n.log)
	}
	if err != nil {
		return nil, err
	}
	n.engine, n.store = n.disk.engine, n.disk.store
	if h == nil {
		if n.storeID, err = storeID(n.disk.log); err != nil {
			return nil, err
		}
	}
	t2 := time.Now()
	n.transport = opts.Transport
	switch {
	case n.transport != nil:
	case h != nil:
		n.stream = h.stream
		layer, err := h.stream.Group(h.group)
		if err != nil {
			return nil, err
		}
		if h.group == 1 {
			layer = newKeepOpen(h.stream) // the Host closes the listener
		}
		n.transport = newNetworkTransport(layer, n.disk.hlog)
	default:
		if n.stream, err = newStreamLayer(opts.RaftAddr, opts.TLS, opts.ClusterSecret, n.log); err != nil {
			return nil, err
		}
		n.transport = newNetworkTransport(n.stream, n.disk.hlog)
		n.warnIfOpen()
	}
	n.held = newHeldSnapshots(n.transport, opts.ID, n.disk.holds, n.disk.currentTerm, n.log)
	n.transport = n.held
	cfg := raftConfig(opts, n.disk)
	logs := newLogCache(n.disk.log, opts.LogCacheBytes)
	bootstraps := len(opts.Peers) > 0 || opts.Bootstrap
	if bootstraps {
		if err := undoHalfBootstrap(n.disk.log, n.disk.snaps, n.log); err != nil {
			return nil, err
		}
	}
	exists, err := hraft.HasExistingState(logs, n.disk.log, n.disk.snaps)
	if err != nil {
		return nil, fmt.Errorf("raft: read state: %w", err)
	}
	var founders map[string]string
	if h == nil {
		if founders, n.clusterID, err = openIdentity(n.opts, n.stream, n.disk.log, n.storeID, exists, n.log); err != nil {
			return nil, err
		}
	}
	n.fsm = newFSM(n.engine, n.disk.log, n.notify, n.log)
	if n.raft, err = hraft.NewRaft(cfg, n.fsm, logs, n.disk.log, n.disk.snaps, n.transport); err != nil {
		return nil, fmt.Errorf("raft: start: %w", err)
	}
	// The filter is the observer: it records heartbeat failures as raft
	// reports them, and nothing is sent to a channel (none is dropped).
	n.raft.RegisterObserver(hraft.NewObserver(nil, false, n.live.observe))
	// Where a start's time went: each part should stay flat as the history
	// grows (see ARCHITECTURE.md, durability and restart).
	n.log.Info("node opened", "engine", n.disk.engineTime.Round(time.Millisecond), "log", n.disk.logTime.Round(time.Millisecond),
		"raft", time.Since(t2).Round(time.Millisecond), "applied", n.engine.Applied(), "snapshot", latestSnapshotIndex(n.disk.snaps))
	if !exists && bootstraps {
		servers := configuration(opts.Peers).Servers
		if len(servers) == 0 {
			servers = []hraft.Server{{ID: cfg.LocalID, Address: n.transport.LocalAddr()}}
		}
		err := n.raft.BootstrapCluster(hraft.Configuration{Servers: servers}).Error()
		if err != nil && !errors.Is(err, hraft.ErrCantBootstrap) {
			return nil, fmt.Errorf("raft: bootstrap: %w", err)
		}
	}
	if h == nil && n.stream != nil {
		n.stream.setIdentity(func() identity {
			return identity{Node: n.opts.ID, Store: n.storeID, State: exists || n.raft.LastIndex() > 0,
				Members: n.members(), Known: true, Founders: founders}
		})
	}
	if h == nil && n.stream != nil {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.removal.watch(n.stream, n.opts.ID, n.leaderless, n.configuration, n.log, n.done)
		}()
	}
	n.loadVersions()
	n.wg.Add(5)
	go n.proposeLoop()
	go n.leaderLoop()
	go n.sweepLoop()
	go n.healLoop()
	go n.versionLoop()
	ok = true
	return n, nil
}

// disk is a node's state on disk, opened on its data directory under its
// lock: the engine (the state machine), the Raft log and stable store, and
// the snapshot store. Open runs Raft on it; Recover rewrites its
// configuration.
type disk struct {
	lock       io.Closer // nil for a Host's group: the Host holds it
	engine     *engine.Engine
	store      *logstore.Store
	log        *logstore.Log // the group's log and stable state in store
	ownStore   bool          // close store with the disk (not a Host's)
	snaps      *refStore
	hlog       hclog.Logger
	engineTime time.Duration // how long the engine took to open
	logTime    time.Duration // how long the Raft log took to open
}

// openDisk locks opts.Dir (ErrInUse when a node holds it) and opens the
// stores in it, creating them when missing.
func openDisk(opts Options, log *slog.Logger) (_ *disk, err error) {
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("raft: create data dir: %w", err)
	}
	d := &disk{ownStore: true}
	if d.lock, err = lockDir(opts.Dir, true); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if err := makeDirs(opts.Dir, 1); err != nil {
		return nil, err
	}
	// A crash on a full disk must not keep the stores from opening
	// (space.go).
	stores := []string{filepath.Join(opts.Dir, "engine"), filepath.Join(opts.Dir, "raft")}
	if err := prepareOpen(log, stores, diskSpace(), time.Second, nil); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if d.engine, err = openEngine(opts, 1, log); err != nil {
		return nil, err
	}
	t1 := time.Now()
	if d.store, err = openLogStore(opts, log); err != nil {
		return nil, err
	}
	d.engineTime, d.logTime = t1.Sub(t0), time.Since(t1)
	if d.log, err = d.store.Group(1); err != nil {
		return nil, err
	}
	return d, d.openSnapshots(opts, 1, log)
}

// openGroupDisk opens group g's engine and snapshots in the data directory
// of a Host, which holds the lock and the log store and has prepared the
// directories (makeDirs, prepareOpen).
func openGroupDisk(opts Options, store *logstore.Store, g uint32, log *slog.Logger) (_ *disk, err error) {
	d := &disk{store: store}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	t0 := time.Now()
	if d.engine, err = openEngine(opts, g, log); err != nil {
		return nil, err
	}
	d.engineTime = time.Since(t0)
	if d.log, err = store.Group(g); err != nil {
		return nil, err
	}
	return d, d.openSnapshots(opts, g, log)
}

// groupDir is where group g's engine/ and snapshots/ live: the data
// directory itself for group 1 (today's layout, so a store made before
// there were groups opens unchanged), groups/<g>/ for any other.
func groupDir(dir string, g uint32) string {
	if g == 1 {
		return dir
	}
	return filepath.Join(dir, "groups", strconv.FormatUint(uint64(g), 10))
}

// makeDirs creates the data directory's raft/ and group g's engine/ and
// snapshots/.
func makeDirs(dir string, g uint32) error {
	for _, sub := range []string{filepath.Join(dir, "raft"), filepath.Join(groupDir(dir, g), "engine"), filepath.Join(groupDir(dir, g), "snapshots")} {
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return fmt.Errorf("raft: create data dir: %w", err)
		}
	}
	return nil
}

// openEngine opens group g's engine, without fsync: the Raft log is the
// write-ahead log.
func openEngine(opts Options, g uint32, log *slog.Logger) (*engine.Engine, error) {
	eopts := opts.Engine
	eopts.Sync = false
	eopts.Logger = log
	return engine.Open(filepath.Join(groupDir(opts.Dir, g), "engine"), eopts)
}

// openLogStore opens the node's Raft log store, where every group's log is.
func openLogStore(opts Options, log *slog.Logger) (*logstore.Store, error) {
	lopts := opts.LogStore
	lopts.NoSync = !opts.RaftLogSync
	lopts.Logger = func(format string, args ...any) { log.Error("logstore: " + fmt.Sprintf(format, args...)) }
	return logstore.Open(filepath.Join(opts.Dir, "raft"), lopts)
}

// openSnapshots opens group g's snapshot store over d's engine.
func (d *disk) openSnapshots(opts Options, g uint32, log *slog.Logger) error {
	// Raft's lines are the node's (hclog.go): its info lines (elections,
	// snapshots sent and installed) come out at debug level, which is what
	// a post-mortem of a leader change needs.
	d.hlog = newRaftLogger(log)
	files, err := hraft.NewFileSnapshotStoreWithLogger(filepath.Join(groupDir(opts.Dir, g), "snapshots"), 2, d.hlog)
	if err != nil {
		return fmt.Errorf("raft: snapshot store: %w", err)
	}
	d.snaps = &refStore{SnapshotStore: files, e: d.engine, log: d.log}
	return nil
}

// close closes the stores and then releases the lock.
func (d *disk) close() error {
	var errs []error
	if d.store != nil && d.ownStore {
		errs = append(errs, d.store.Close())
	}
	if d.engine != nil {
		errs = append(errs, d.engine.Close())
	}
	if d.lock != nil {
		errs = append(errs, d.lock.Close())
	}
	return errors.Join(errs...)
}

// raftConfig is hashicorp/raft's configuration of a node on d.
func raftConfig(opts Options, d *disk) *hraft.Config {
	cfg := hraft.DefaultConfig()
	cfg.LocalID = hraft.ServerID(opts.ID)
	cfg.Logger = d.hlog
	cfg.HeartbeatTimeout = opts.HeartbeatTimeout
	cfg.ElectionTimeout = opts.ElectionTimeout
	cfg.LeaderLeaseTimeout = opts.LeaderLeaseTimeout
	cfg.CommitTimeout = cmp.Or(opts.CommitTimeout, cfg.CommitTimeout)
	cfg.SnapshotThreshold = opts.SnapshotThreshold
	cfg.TrailingLogs = opts.TrailingLogs
	cfg.SnapshotInterval = opts.SnapshotInterval
	cfg.BatchApplyCh = true
	cfg.MaxAppendEntries = 256
	// The engine keeps its own applied index: skip restoring the snapshot at
	// start when the engine is already at or past it (the usual restart),
	// so restart time does not grow with the history.
	cfg.NoSnapshotRestoreOnStart = d.engine.Applied() >= latestSnapshotIndex(d.snaps)
	return cfg
}

// configuration is the Raft configuration of peers.
func configuration(peers []Peer) hraft.Configuration {
	var c hraft.Configuration
	for _, p := range peers {
		suffrage := hraft.Voter
		if p.NonVoter {
			suffrage = hraft.Nonvoter
		}
		c.Servers = append(c.Servers, hraft.Server{Suffrage: suffrage, ID: hraft.ServerID(p.ID), Address: hraft.ServerAddress(p.Addr)})
	}
	return c
}

// warnIfOpen warns when the Raft port is reachable beyond this host and
// nothing keeps strangers out of it.
func (n *Node) warnIfOpen() {
	if exposed(n.stream.Addr(), n.opts) {
		n.log.Warn("raft: the Raft transport has neither TLS nor a cluster secret: "+
			"anyone who can reach this port can join the replication stream", "addr", n.stream.Addr().String())
	}
}

// exposed reports whether a transport bound to addr takes connections from
// other hosts with neither TLS nor a cluster secret.
func exposed(addr net.Addr, opts Options) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && !tcp.IP.IsLoopback() && opts.TLS == nil && opts.ClusterSecret == ""
}

func latestSnapshotIndex(snaps hraft.SnapshotStore) uint64 {
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		return 0
	}
	return list[0].Index
}

// Close stops the node: raft first, then the stores. A raft goroutine held
// by a faulted Raft log (a term it cannot save waits for the store) does
// not stop; Close then gives up after ShutdownWait with ErrShutdownStuck
// and leaves the stores open under it: closing them would make raft panic.
func (n *Node) Close() error {
	var err error
	n.closeOnce.Do(func() {
		close(n.done)
		if n.raft != nil {
			if err = n.shutdownRaft(); errors.Is(err, ErrShutdownStuck) {
				n.log.Error("raft: shutdown held by a storage fault; leaving the stores open", "fault", n.store.Fault())
				return
			}
		}
		close(n.stopped)
		n.wg.Wait()
		err = errors.Join(err, n.closeParts())
	})
	return err
}

// ShutdownWait is how long Close waits for raft to stop while the Raft log
// is faulted.
const ShutdownWait = 10 * time.Second

func (n *Node) shutdownRaft() error {
	done := make(chan error, 1)
	go func() { done <- n.raft.Shutdown().Error() }()
	t := time.NewTicker(ShutdownWait)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-t.C:
			if n.store.Fault() != nil {
				return ErrShutdownStuck
			}
		}
	}
}

func (n *Node) closeParts() error {
	var errs []error
	if n.held != nil && n.opts.Transport != nil {
		n.held.halt() // the transport is its owner's to close
	}
	if c, ok := n.transport.(interface{ Close() error }); ok && n.opts.Transport == nil {
		errs = append(errs, c.Close())
	} else if n.stream != nil && !n.hosted {
		errs = append(errs, n.stream.Close()) // the transport was never built
	}
	if n.disk != nil {
		errs = append(errs, n.disk.close())
	}
	return errors.Join(errs...)
}

// leading returns nil on the leader, else the error a caller may forward on.
func (n *Node) leading() error {
	if n.raft.State() != hraft.Leader {
		return n.notLeader()
	}
	return nil
}

func (n *Node) notLeader() error {
	if _, id := n.raft.LeaderWithID(); id != "" {
		return ErrNotLeader
	}
	return ErrNoLeader
}

// reuseEntryBuffer: proposeLoop encodes entries into one buffer it keeps
// while the entries fit this many bytes, and copies each out of it.
const reuseEntryBuffer = 1 << 20

// proposeLoop groups queued commands into log entries. It waits for the
// first command, takes everything queued behind it, and proposes; while up
// to MaxInFlight entries are in flight new commands queue up and form the
// next, larger entry. It never waits on a timer.
func (n *Node) proposeLoop() {
	defer n.wg.Done()
	var (
		buf  []byte
		cmds []command.Stamped
	)
	for {
		var first *proposal
		select {
		case first = <-n.proposals:
		case <-n.done:
			return
		}
		select {
		case n.inflight <- struct{}{}:
		case <-n.done:
			first.done <- proposed{err: ErrShutdown}
			return
		}
		batch := []*proposal{first}
	drain:
		for len(batch) < n.opts.MaxBatchCommands {
			select {
			case p := <-n.proposals:
				batch = append(batch, p)
			default:
				break drain
			}
		}
		cmds = cmds[:0]
		for _, p := range batch {
			cmds = append(cmds, p.cmd)
		}
		buf = command.AppendEntry(buf[:0], cmds)
		// The commands are encoded; the loop keeps no reference to them
		// (a large push's frames would otherwise live until as many
		// commands came again).
		clear(cmds)
		data := buf
		if cap(buf) > reuseEntryBuffer {
			// A large entry's buffer goes to Raft as it is, not copied,
			// and is not kept: one large push neither costs a second copy
			// of itself nor stays resident for good (ARCHITECTURE.md
			// "Memory").
			buf = nil
		} else {
			data = bytes.Clone(buf)
		}
		proposedAt := time.Now()
		f := n.raft.ApplyLog(hraft.Log{Data: data}, n.opts.ApplyTimeout)
		n.wg.Add(1)
		go n.await(f, batch, proposedAt)
	}
}

// await hands an entry's results to its proposers.
func (n *Node) await(f hraft.ApplyFuture, batch []*proposal, proposedAt time.Time) {
	defer n.wg.Done()
	err := n.futureError(f)
	if err == nil && n.opts.OnEntry != nil {
		n.opts.OnEntry(EntryTimes{Group: n.group, Commands: len(batch), Queued: proposedAt.Sub(batch[0].at), Committed: time.Since(proposedAt)})
	}
	// The entry is applied (or failed): the next one may be proposed while
	// this goroutine reads pops' messages and hands out results.
	<-n.inflight
	if err != nil {
		err = n.mapError(err)
		for _, p := range batch {
			p.done <- proposed{err: err}
		}
		return
	}
	if fault, ok := f.Response().(entryFault); ok {
		for _, p := range batch {
			p.done <- proposed{err: fault.err}
		}
		return
	}
	results, _ := f.Response().([]engine.Result)
	for i, p := range batch {
		if i >= len(results) {
			p.done <- proposed{err: fmt.Errorf("raft: entry applied without a result")}
			continue
		}
		// What a command deferred past the commit (a pop's messages) is
		// read here, in parallel with the next entries' apply.
		r := results[i]
		if err := n.engine.Finish(&r); err != nil {
			p.done <- proposed{err: err}
			continue
		}
		p.done <- proposed{res: r}
	}
}

// futureError waits for f's outcome. With BatchApplyCh, raft buffers
// ApplyLog's futures and, when it shuts down, never answers those still in
// the buffer: waiting on one alone hung Close (and so a SIGTERM) for ever.
// Once raft has stopped, such a future is ErrShutdown; the goroutine left
// waiting on it ends with the process.
func (n *Node) futureError(f hraft.ApplyFuture) error {
	errc := make(chan error, 1)
	go func() { errc <- f.Error() }()
	select {
	case err := <-errc:
		return err
	case <-n.stopped:
		select {
		case err := <-errc:
			return err
		default:
			return ErrShutdown
		}
	}
}

func (n *Node) mapError(err error) error {
	switch {
	case errors.Is(err, hraft.ErrNotLeader):
		return n.notLeader()
	case errors.Is(err, hraft.ErrLeadershipLost):
		return ErrLeadershipLost
	case errors.Is(err, hraft.ErrRaftShutdown):
		return ErrShutdown
	case errors.Is(err, hraft.ErrEnqueueTimeout):
		return ErrTimeout
	case err != nil && strings.HasPrefix(err.Error(), "unable to store logs within log store"):
		// The log cache's text for a failed append (logcache.go), kept
		// from hashicorp/raft's LogCache, which lost the chain.
		return fmt.Errorf("%w: raft log: %s", ErrFaulted, err)
	}
	return err
}

// leaderLoop publishes this node's HTTP address whenever it becomes leader,
// so followers know where to forward.
func (n *Node) leaderLoop() {
	defer n.wg.Done()
	for {
		select {
		case isLeader := <-n.raft.LeaderCh():
			if isLeader {
				n.log.Info("became leader", "term", n.raft.CurrentTerm())
			} else {
				n.log.Info("lost leadership", "term", n.raft.CurrentTerm())
			}
			if !isLeader || n.opts.HTTPAddr == "" {
				continue
			}
			if n.engine.ClusterValue(command.HTTPKey(n.opts.ID)) == n.opts.HTTPAddr {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), n.opts.ApplyTimeout)
			_, err := Propose[struct{}](ctx, n, command.Announce{NodeID: n.opts.ID, HTTP: n.opts.HTTPAddr})
			cancel()
			if err != nil {
				n.log.Warn("raft: announce leader address", "err", err)
			}
		case <-n.done:
			return
		}
	}
}

// sweepLoop proposes a retention sweep every RetentionInterval while this
// node leads. The sweep is a command like any other: every replica deletes
// the same segments as of the same stamped time.
func (n *Node) sweepLoop() {
	defer n.wg.Done()
	if n.opts.RetentionInterval <= 0 {
		return
	}
	t := time.NewTicker(n.opts.RetentionInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if n.raft.State() != hraft.Leader {
				continue
			}
			res, err := n.Sweep(context.Background())
			switch {
			case err == nil && n.opts.OnSweep != nil:
				n.opts.OnSweep(res)
			case err != nil && !errors.Is(err, ErrShutdown):
				n.log.Warn("raft: retention sweep", "err", err)
			}
		case <-n.done:
			return
		}
	}
}

// Sweep proposes a retention sweep now.
func (n *Node) Sweep(ctx context.Context) (engine.SweepResult, error) {
	ctx, cancel := context.WithTimeout(ctx, n.opts.ApplyTimeout)
	defer cancel()
	return Propose[engine.SweepResult](ctx, n, engine.SweepCmd{})
}

// Status reports the node's role, leader and applied index, and its
// storage faults.
func (n *Node) Status() Status {
	s := Status{ID: n.opts.ID, Store: n.storeID, Cluster: n.clusterID, Applied: n.engine.Applied(), Fault: n.fault(),
		StorageErrors:  n.engine.StorageErrors() + n.store.StorageErrors(),
		CommandVersion: n.advertised(), ClusterVersion: n.ClusterVersion()}
	if n.stream != nil {
		s.ForeignPeers = n.stream.ForeignPeers()
	}
	switch n.raft.State() {
	case hraft.Leader:
		s.Role = "leader"
	case hraft.Candidate:
		s.Role = "candidate"
	case hraft.Follower:
		s.Role = "follower"
	default:
		s.Role = "shutdown"
	}
	if _, id := n.raft.LeaderWithID(); id != "" {
		s.Leader = string(id)
		s.LeaderHTTP = n.engine.ClusterValue(command.HTTPKey(s.Leader))
	}
	s.Term = n.raft.CurrentTerm()
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		var live int
		s.Voters, live = n.count(f.Configuration(), "")
		s.Members = voterIDs(f.Configuration())
		if s.Role == "leader" {
			s.LiveVoters = live
		}
	}
	return s
}

// WaitForLeader blocks until the cluster has a leader or ctx ends.
func (n *Node) WaitForLeader(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if _, id := n.raft.LeaderWithID(); id != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Barrier returns once this node, as leader, has applied every command
// committed before the call. A follower answers ErrNotLeader: the caller
// forwards the read to the leader.
func (n *Node) Barrier(ctx context.Context) error {
	if n.raft.State() != hraft.Leader {
		return n.notLeader()
	}
	timeout := n.opts.ApplyTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return n.mapError(err)
	}
	return n.mapError(n.raft.Barrier(timeout).Error())
}

// TransferLeadership hands this node's leadership to another voter, the
// most up to date (tests and operators); ErrNotLeader when it does not lead.
func (n *Node) TransferLeadership() error {
	return n.mapError(n.raft.LeadershipTransfer().Error())
}

// Snapshot takes a Raft snapshot now (tests and operators).
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// Engine returns the node's engine: this replica's state, which tests,
// read-only tooling and a Host's routing (package cluster) read.
func (n *Node) Engine() *engine.Engine { return n.engine }

// Watch reports applies that may have made messages of queue deliverable.
func (n *Node) Watch(queue string) (<-chan struct{}, func()) { return n.notify.watch(queue) }
