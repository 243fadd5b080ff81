package raft

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Before the stores open, openDisk makes sure they can: issue 11's node,
// restarted on a full disk, never served HTTP and spun at 111% CPU. The
// cause is in pebble.Open: it replays the WALs a crash left and waits for
// their memtables to be flushed; the flush fails on ENOSPC, Pebble retries
// it at once and for ever (leaving an empty blob file each time), and Open
// never returns. What filled that disk was mostly not data: Pebble
// preallocates each WAL file to 110% of a memtable (35 MiB for the
// engine's, 9 MiB for the log's) and, after each start, grows its memtables
// from 256 KiB, one WAL each, before the first flush. On the 64 MiB tmpfs,
// 4 MiB of WAL records held 65 MiB.
//
// So openDisk first gives back the space preallocated past the end of every
// WAL file (truncating a file to its own length changes none of its bytes),
// and then, if the disk still cannot take the replayed memtables, waits for
// room and says so, instead of letting Pebble spin. Once the stores are
// open the free-space guard at the edge (server/diskspace) keeps the disk
// above its reserve; this is only for a disk that filled anyway.
//
// The room asked for is every WAL file's bytes plus openHeadroom per store,
// which over-asks after a clean stop: the stores flushed their memtables
// on Close, so their WALs hold nothing left to replay, and Pebble deletes
// or recycles them once open. Telling them apart would mean reading each
// store's manifest for the oldest unflushed log number before Pebble does;
// counting them all is the side that cannot let Pebble spin, and costs
// only a wait an operator is told how to end (the log line names the
// filesystem and the bytes short). ARCHITECTURE.md, "Disk space".

// openHeadroom is the room asked for beyond the WALs' own bytes: manifest
// edits and the first records of the new WALs.
const openHeadroom = 4 << 20

// spaceOps are the file system calls prepareOpen makes (tests fake them).
type spaceOps struct {
	// free returns the bytes available on the filesystem holding dir.
	free func(dir string) (uint64, error)
	// release gives back the space allocated past the end of path and
	// returns how much.
	release func(path string) (int64, error)
}

// prepareOpen readies the Pebble directories dirs for opening: it releases
// the WAL files' preallocated space, then waits (polling every poll) until
// the fullest of dirs' filesystems has room for the WALs to be replayed
// and flushed, or done is closed.
func prepareOpen(log *slog.Logger, dirs []string, ops spaceOps, poll time.Duration, done <-chan struct{}) error {
	var released, need int64
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("raft: read %s: %w", dir, err)
		}
		for _, e := range entries {
			// Pebble names its WAL files NNNNNN.log.
			if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".log") {
				continue
			}
			path := filepath.Join(dir, e.Name())
			n, err := ops.release(path)
			if err != nil {
				return fmt.Errorf("raft: release preallocated space of %s: %w", path, err)
			}
			released += n
			if fi, err := e.Info(); err == nil {
				need += fi.Size()
			}
		}
	}
	if released > 0 {
		log.Info("released space preallocated past the end of the WAL files", "bytes", released)
	}
	wal := need
	need += openHeadroom * int64(len(dirs))
	for waited := time.Duration(0); ; waited += poll {
		dir, free, err := fullest(dirs, ops.free)
		if err != nil || int64(free) >= need {
			return nil // an unreadable filesystem is Pebble's to report
		}
		if waited%(10*time.Second) < poll {
			log.Error("waiting for free space to open the stores: free the bytes short on this filesystem (delete other files or grow it; never the store's own), then the node goes on by itself",
				"dir", dir, "free", free, "need", need, "short", need-int64(free),
				"walBytes", wal, "headroom", need-wal)
		}
		select {
		case <-done:
			return ErrShutdown
		case <-time.After(poll):
		}
	}
}

// fullest returns the dir of dirs with the least free space.
func fullest(dirs []string, free func(string) (uint64, error)) (string, uint64, error) {
	var (
		least uint64
		at    string
	)
	for i, dir := range dirs {
		f, err := free(dir)
		if err != nil {
			return dir, 0, err
		}
		if i == 0 || f < least {
			least, at = f, dir
		}
	}
	return at, least, nil
}
