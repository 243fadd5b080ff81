package raft

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	hraft "github.com/hashicorp/raft"
)

// Recover rewrites the Raft configuration of a stopped node to peers: the
// way back for a cluster that lost its quorum for good (voters gone, or an
// unreachable voter added by a forced join). It uses opts.Dir, opts.Engine
// and opts.Logger; the other fields are ignored.
//
// Recover applies every log entry the engine has not applied yet, makes the
// engine durable, records a snapshot at the last index whose configuration
// is peers, and drops the log (hashicorp/raft's RecoverCluster). The node then
// starts with peers as its whole membership. Run it on every surviving node
// with the same peers, before any of them starts again. It returns the
// index of that snapshot.
//
// It returns ErrInUse while a node holds the directory and ErrNoState when
// the directory holds no Raft state.
func Recover(opts Options, peers []Peer) (uint64, error) {
	if opts.Dir == "" || opts.Logger == nil {
		return 0, fmt.Errorf("raft: recover: Dir and Logger are required")
	}
	voters := 0
	for _, p := range peers {
		if p.ID == "" || p.Addr == "" {
			return 0, fmt.Errorf("raft: recover: peer %+v needs an id and an address", p)
		}
		if !p.NonVoter {
			voters++
		}
	}
	if voters == 0 {
		return 0, fmt.Errorf("raft: recover: the new configuration needs at least one voter")
	}
	for _, sub := range []string{"engine", "raft"} {
		if _, err := os.Stat(filepath.Join(opts.Dir, sub)); errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("%w: %s has no %s/", ErrNoState, opts.Dir, sub)
		} else if err != nil {
			return 0, fmt.Errorf("raft: recover: %w", err)
		}
	}
	if opts.ID == "" {
		opts.ID = "recover" // raft's configuration wants a local id; none is written
	}
	groups, err := hostedGroups(opts.Dir)
	if err != nil {
		return 0, err
	}
	if len(groups) > 0 {
		return recoverHost(opts, peers, groups)
	}
	d, err := openDisk(opts, opts.Logger)
	if err != nil {
		return 0, err
	}
	defer d.close()
	return recoverDisk(opts, d, peers)
}

// hostedGroups lists the groups other than 1 a Host keeps under groups/
// (the directory, 0, and the data groups 2..G), none for a plain node.
func hostedGroups(dir string) ([]uint32, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "groups"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("raft: recover: %w", err)
	}
	var ids []uint32
	for _, e := range entries {
		if id, err := strconv.ParseUint(e.Name(), 10, 32); err == nil && e.IsDir() {
			ids = append(ids, uint32(id))
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// recoverHost recovers every group of a Host's data directory to peers
// (each group has the same voters): group 1, then the others. It returns
// group 1's index.
func recoverHost(opts Options, peers []Peer, groups []uint32) (_ uint64, err error) {
	lock, err := lockDir(opts.Dir, true)
	if err != nil {
		return 0, err
	}
	defer lock.Close()
	store, err := openLogStore(opts, opts.Logger)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	var first uint64
	for _, g := range append([]uint32{1}, groups...) {
		d, err := openGroupDisk(opts, store, g, opts.Logger.With("group", g))
		if err != nil {
			return 0, fmt.Errorf("raft: recover group %d: %w", g, err)
		}
		last, err := recoverDisk(opts, d, peers)
		if err = errors.Join(err, d.close()); err != nil {
			return 0, fmt.Errorf("raft: recover group %d: %w", g, err)
		}
		if g == 1 {
			first = last
		}
	}
	return first, nil
}

// recoverDisk recovers one group's stores on d to peers.
func recoverDisk(opts Options, d *disk, peers []Peer) (uint64, error) {
	if ok, err := hraft.HasExistingState(d.log, d.log, d.snaps); err != nil {
		return 0, fmt.Errorf("raft: recover: read state: %w", err)
	} else if !ok {
		return 0, fmt.Errorf("%w: %s", ErrNoState, opts.Dir)
	}
	lastLog, err := d.log.LastIndex()
	if err != nil {
		return 0, fmt.Errorf("raft: recover: %w", err)
	}
	last := max(lastLog, latestSnapshotIndex(d.snaps))

	cfg := raftConfig(opts, d)
	rf := &recoveryFSM{fsm: newFSM(d.engine, d.log, newNotifier(), opts.Logger), last: last}
	var snaps hraft.SnapshotStore = d.snaps
	if cfg.NoSnapshotRestoreOnStart {
		// The engine holds its latest snapshot's state already, as at a
		// start (raftConfig): RecoverCluster's restore is skipped, and it
		// reads the snapshots as stored, so a reference is not expanded
		// into a stream of the whole engine only to be dropped.
		rf.keep = true
		snaps = d.snaps.SnapshotStore
	}
	// RecoverCluster's transport only encodes peer addresses into the
	// snapshot's legacy field, the same for every transport: no port is
	// bound.
	_, trans := hraft.NewInmemTransport("")
	if err := hraft.RecoverCluster(cfg, rf, d.log, d.log, snaps, trans, configuration(peers)); err != nil {
		return 0, fmt.Errorf("raft: recover: %w", err)
	}
	return last, nil
}

// recoveryFSM is the node's FSM as RecoverCluster drives it: it applies the
// log entries the engine has not applied, skips the snapshot restore when
// the engine already holds the snapshot's state, and has the engine record
// the last index before the snapshot is taken.
type recoveryFSM struct {
	*fsm
	keep bool   // the engine is at or past the latest snapshot
	last uint64 // the last index of the log or the latest snapshot
}

func (r *recoveryFSM) Restore(rc io.ReadCloser) error {
	if r.keep {
		return rc.Close()
	}
	return r.fsm.Restore(rc)
}

// Snapshot records r.last as the engine's applied index first:
// RecoverCluster applies only command entries, and the configuration
// entries after the last of them are applied too as far as the engine is
// concerned (ApplyBatch records them the same way). The snapshot's
// reference then names the index RecoverCluster files it under, and the
// next start skips restoring it.
func (r *recoveryFSM) Snapshot() (hraft.FSMSnapshot, error) {
	if r.e.Applied() < r.last {
		b, err := r.e.Begin()
		if err != nil {
			return nil, err
		}
		if err := b.Commit(r.last); err != nil {
			return nil, err
		}
	}
	return r.fsm.Snapshot()
}

// ReadPeersJSON reads a configuration in hashicorp/raft's peers.json
// format (version 3): a JSON array of {"id", "address", "non_voter"}.
func ReadPeersJSON(path string) ([]Peer, error) {
	conf, err := hraft.ReadConfigJSON(path)
	if err != nil {
		return nil, fmt.Errorf("raft: read %s: %w", path, err)
	}
	peers := make([]Peer, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		peers = append(peers, Peer{ID: string(s.ID), Addr: string(s.Address), NonVoter: s.Suffrage != hraft.Voter})
	}
	return peers, nil
}
