package raft

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/backup"
	"github.com/queenmq/queen/raft/command"
)

// Restore writes a new data directory, opts.Dir, from a backup file, offline:
// started on it, a node is the single voter of a new cluster that holds the
// backup's state (other nodes then join it as usual). It uses opts.Dir,
// opts.ID, opts.RaftAddr (the address the node will advertise; empty: a node
// without --raft, whose address is its id), opts.Engine and opts.Logger.
//
// Each group's engine is restored from its stream (engine.Restore checks the
// stream's own CRC) and made durable; its Raft state is seeded as
// RecoverCluster leaves a store: a snapshot, at the group's index, that
// refers to the engine (snapstore.go) and holds the new configuration, and
// no log. Raft then resumes at the next index.
//
// Everything is written in a directory beside opts.Dir that is renamed to
// it only once the whole file has checked: on any error (a corrupt or
// truncated file, ErrNewer) nothing is left. opts.Dir must be absent or
// empty (ErrNotEmpty).
func Restore(opts Options, r *backup.Reader) (err error) {
	if opts.Dir == "" || opts.ID == "" || opts.Logger == nil {
		return fmt.Errorf("raft: restore: Dir, ID and Logger are required")
	}
	if err := emptyDir(opts.Dir); err != nil {
		return err
	}
	groups, hosted, err := layoutOf(r.Manifest())
	if err != nil {
		return err
	}
	final := filepath.Clean(opts.Dir)
	tmp, err := os.MkdirTemp(filepath.Dir(final), filepath.Base(final)+".partial-")
	if err != nil {
		return fmt.Errorf("raft: restore: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, os.RemoveAll(tmp))
		}
	}()
	opts.Dir = tmp
	// The directory is new and renamed into place only once complete: a
	// crash leaves a partial directory to delete, so the engines load
	// without their write-ahead logs (seedGroup's Sync flushes them).
	opts.Engine.BulkLoad = true
	addr := opts.RaftAddr
	if addr == "" {
		addr = opts.ID // NewLocalTransport's address
	}
	conf := configuration([]Peer{{ID: opts.ID, Addr: addr}})
	if err := restoreGroups(opts, r, groups, hosted, conf); err != nil {
		return err
	}
	// The trailer: the file was whole.
	if _, _, err := r.Next(); !errors.Is(err, io.EOF) {
		if err == nil {
			err = fmt.Errorf("%w: a group the manifest does not list", backup.ErrCorrupt)
		}
		return err
	}
	if err := os.Remove(final); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("raft: restore: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("raft: restore: %w", err)
	}
	return syncDir(filepath.Dir(final))
}

// emptyDir refuses a directory that exists and holds anything.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("raft: restore: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("%w: %s holds %s and %d more", ErrNotEmpty, dir, entries[0].Name(), len(entries)-1)
	}
	return nil
}

// layoutOf returns the groups of a backup in file order and whether they
// are a Host's (the directory 0, then 1..G) rather than one Node's (1).
func layoutOf(m backup.Manifest) ([]uint32, bool, error) {
	var ids []uint32
	for _, g := range m.Groups {
		ids = append(ids, g.ID)
	}
	if len(ids) == 1 && ids[0] == 1 {
		return ids, false, nil
	}
	for i, id := range ids {
		if id != uint32(i) || len(ids) < 2 {
			return nil, false, fmt.Errorf("%w: groups %v are neither one group (1) nor a directory and data groups (0, 1, …)",
				backup.ErrCorrupt, ids)
		}
	}
	return ids, true, nil
}

// restoreGroups opens the stores of opts.Dir as Open or OpenStore lays them
// out and seeds each group from the next group of r.
func restoreGroups(opts Options, r *backup.Reader, groups []uint32, hosted bool, conf hraft.Configuration) (err error) {
	if !hosted {
		d, err := openDisk(opts, opts.Logger)
		if err != nil {
			return err
		}
		return errors.Join(seedGroup(d, r, 1, conf, 0), d.close())
	}
	lock, err := lockDir(opts.Dir, true)
	if err != nil {
		return err
	}
	defer lock.Close()
	store, err := openLogStore(opts, opts.Logger)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	// recorded is the term of each data group's layout record in the
	// restored directory (the directory comes first): the old cluster's
	// voters and leader, which nodes route by (cluster/hostlayout.go). The group
	// restarts past that term, so that the new leader's report (a later
	// term) replaces the record and the restored node routes to itself,
	// not to a leader of the old cluster.
	recorded := map[uint32]uint64{}
	for _, g := range groups {
		if err := makeDirs(opts.Dir, g); err != nil {
			return err
		}
		d, err := openGroupDisk(opts, store, g, opts.Logger.With("group", g))
		if err != nil {
			return fmt.Errorf("raft: restore group %d: %w", g, err)
		}
		err = seedGroup(d, r, g, conf, recorded[g])
		if err == nil && g == Directory {
			for _, dg := range groups[1:] {
				recorded[dg] = command.LayoutOf(d.engine.ClusterValue, dg).Term
			}
		}
		if err := errors.Join(err, d.close()); err != nil {
			return err
		}
	}
	return nil
}

// seedGroup restores group g's engine from r's next group and records a
// snapshot at its index with configuration conf, in term past+1.
func seedGroup(d *disk, r *backup.Reader, g uint32, conf hraft.Configuration, past uint64) error {
	meta, stream, err := r.Next()
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: the file ends before group %d", backup.ErrCorrupt, g)
	}
	if err != nil {
		return err
	}
	if meta.ID != g {
		return fmt.Errorf("%w: group %d where group %d should come", backup.ErrCorrupt, meta.ID, g)
	}
	if meta.Index == 0 {
		return fmt.Errorf("%w: group %d at index 0", backup.ErrCorrupt, g)
	}
	if err := d.engine.Restore(stream); err != nil {
		if ferr := r.Err(); ferr != nil {
			err = ferr
		}
		return fmt.Errorf("raft: restore group %d: %w", g, err)
	}
	if got := d.engine.Applied(); got != meta.Index {
		return fmt.Errorf("%w: group %d's state is at index %d, the manifest says %d", engine.ErrCorrupt, g, got, meta.Index)
	}
	if err := d.engine.Sync(); err != nil {
		return fmt.Errorf("raft: restore group %d: %w", g, err)
	}
	// The term restarts at 1, the new cluster having no history to agree
	// with, unless the state records one (past).
	term := past + 1
	if err := d.log.SetUint64([]byte("CurrentTerm"), term); err != nil {
		return fmt.Errorf("raft: restore group %d: %w", g, err)
	}
	_, trans := hraft.NewInmemTransport("")
	sink, err := d.snaps.SnapshotStore.Create(hraft.SnapshotVersionMax, meta.Index, term, conf, meta.Index, trans)
	if err != nil {
		return fmt.Errorf("raft: restore group %d: snapshot: %w", g, err)
	}
	if _, err := sink.Write(encodeRef(meta.Index)); err != nil {
		sink.Cancel()
		return fmt.Errorf("raft: restore group %d: snapshot: %w", g, err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("raft: restore group %d: snapshot: %w", g, err)
	}
	return nil
}

// syncDir fsyncs a directory, so a rename in it survives a crash.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("raft: sync %s: %w", dir, err)
	}
	return nil
}
