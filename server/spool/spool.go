package spool

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/queenmq/queen/engine"
)

// Spool keeps pushes received during push maintenance, one file per
// request, and replays them in file order once maintenance is off. Every
// item carries a transaction id (minted here when the client sent none), so
// a replay interrupted and repeated is deduplicated.
//
// A push is answered "buffered" only once its file is durable (STYLE rule
// 6): the file is written under a temporary name (tmpSuffix), fsynced,
// closed, renamed to its final name, and the directory is fsynced so the
// rename survives a crash. A failure at any step answers 500
// spool_write_failed and takes the file back, so nothing the client was told
// failed is replayed later (unless even that removal fails: then the push
// may still be replayed, at least once, as a retried push would be). Only
// complete files are ever replayed; a temporary file found at open was never
// renamed, so its push was never answered "buffered", and it is discarded.
//
// A file holds one JSON object per line: {"queue", "partition",
// "transactionId", "traceId"?, "producerSub"?, "payload", "sealed"?},
// payloads as they would have been pushed: sealed for encrypted queues, with
// "sealed":true, so no plaintext of theirs reaches the spool's disk. A line
// without "sealed" (every line an earlier binary wrote) replays as the
// client's bytes, envelope or not.
type Spool struct {
	dir     string
	fs      fileSystem
	mu      sync.Mutex // serializes writes and the drain
	seq     atomic.Uint64
	pending atomic.Int64 // messages waiting in complete files
	failed  atomic.Int64 // replays that failed (retried later)
}

// item is one line of a spool file.
type item struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition,omitempty"`
	TransactionID string          `json:"transactionId"`
	TraceID       string          `json:"traceId,omitempty"`
	ProducerSub   string          `json:"producerSub,omitempty"`
	Payload       json.RawMessage `json:"payload"`
	Sealed        bool            `json:"sealed,omitempty"`
}

// toItem is it as a spool line holds it.
func toItem(it *engine.PushItem) item {
	si := item{Queue: it.Queue, Partition: it.Partition, TransactionID: it.TransactionID,
		ProducerSub: it.ProducerSub, Payload: it.Payload, Sealed: it.Sealed}
	if it.HasTrace {
		si.TraceID = engine.FormatID(it.TraceID)
	}
	return si
}

// tmpSuffix marks a spool file still being written: it is renamed to its
// final name (ending in .jsonl) once synced.
const tmpSuffix = ".tmp"

// Open opens (or creates) the spool in dir, discards the temporary files a
// crash left behind and counts the messages waiting in complete files.
func Open(dir string) (*Spool, error) { return open(dir, osFS{}) }

// open is Open with the file operations that make the spool durable given.
func open(dir string, fs fileSystem) (*Spool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	// The directory itself may have just been made: its entry in the
	// parent must be as durable as the files renamed into it.
	if err := fs.SyncDir(filepath.Dir(dir)); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	sp := &Spool{dir: dir, fs: fs}
	if err := sp.discardTemp(); err != nil {
		return nil, err
	}
	names, err := sp.files()
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		items, err := sp.read(name)
		if err != nil {
			return nil, err
		}
		sp.pending.Add(int64(len(items)))
	}
	return sp, nil
}

// discardTemp removes the temporary files of writes a crash cut short.
// None was renamed, so none was answered "buffered".
func (sp *Spool) discardTemp() error {
	entries, err := os.ReadDir(sp.dir)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	removed := false
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), tmpSuffix) {
			if err := sp.fs.Remove(filepath.Join(sp.dir, e.Name())); err != nil {
				return fmt.Errorf("spool: discard %s: %w", e.Name(), err)
			}
			removed = true
		}
	}
	if removed {
		if err := sp.fs.SyncDir(sp.dir); err != nil {
			return fmt.Errorf("spool: %w", err)
		}
	}
	return nil
}

// Write stores one request's items durably (see Spool): when it returns
// nil, the file and its name are on disk. Items without a transaction id
// get one. Failures to make the file durable wrap ErrWrite.
func (sp *Spool) Write(items []engine.PushItem) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := range items {
		it := &items[i]
		if it.TransactionID == "" {
			id, err := uuid.NewV7()
			if err != nil {
				return err
			}
			it.TransactionID = id.String()
		}
		si := toItem(it)
		if err := enc.Encode(&si); err != nil {
			return err
		}
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	name := filepath.Join(sp.dir, fmt.Sprintf("%020d-%06d.jsonl", time.Now().UnixNano(), sp.seq.Add(1)%1000000))
	tmp := name + tmpSuffix
	if err := sp.writeFile(tmp, buf.Bytes()); err != nil {
		sp.fs.Remove(tmp) // best effort: open discards it anyway
		return fmt.Errorf("%w: write %s: %w", ErrWrite, filepath.Base(tmp), err)
	}
	if err := sp.fs.Rename(tmp, name); err != nil {
		sp.fs.Remove(tmp)
		return fmt.Errorf("%w: rename %s: %w", ErrWrite, filepath.Base(tmp), err)
	}
	if err := sp.fs.SyncDir(sp.dir); err != nil {
		// The rename may or may not survive a crash, and the client is
		// about to hear that the push failed: take the file back, and try
		// once more to make that durable (if the directory cannot be
		// synced now either, a crash may bring the file back; its items
		// keep their transaction ids, so a client retry that reused them
		// is deduplicated when both are pushed).
		if sp.fs.Remove(name) == nil {
			sp.fs.SyncDir(sp.dir)
		}
		return fmt.Errorf("%w: sync directory: %w", ErrWrite, err)
	}
	sp.pending.Add(int64(len(items)))
	return nil
}

// writeFile creates name, writes data and fsyncs it.
func (sp *Spool) writeFile(name string, data []byte) error {
	f, err := sp.fs.Create(name)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// files lists complete spool files in replay order.
func (sp *Spool) files() ([]string, error) {
	entries, err := os.ReadDir(sp.dir)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".jsonl") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// read returns the items of the complete file name, in order.
func (sp *Spool) read(name string) ([]engine.PushItem, error) {
	f, err := os.Open(filepath.Join(sp.dir, name))
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	var items []engine.PushItem
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	for sc.Scan() {
		var si item
		if err := json.Unmarshal(sc.Bytes(), &si); err != nil {
			return nil, fmt.Errorf("spool: file %s: %w", name, err)
		}
		it := engine.PushItem{Queue: si.Queue, Partition: si.Partition, TransactionID: si.TransactionID,
			ProducerSub: si.ProducerSub, Payload: si.Payload, Sealed: si.Sealed}
		if si.TraceID != "" {
			if it.TraceID, err = engine.ParseID(si.TraceID); err != nil {
				return nil, fmt.Errorf("spool: file %s: %w", name, err)
			}
			it.HasTrace = true
		}
		items = append(items, it)
	}
	return items, sc.Err()
}

// MarshalItem is the JSON object a spool line holds for it, which is also
// the item of a push request: a follower relays its spool to the leader as
// an ordinary push of such items.
func MarshalItem(it *engine.PushItem) ([]byte, error) {
	si := toItem(it)
	return json.Marshal(&si)
}

// Pending is the number of messages waiting in complete files.
func (sp *Spool) Pending() int64 { return sp.pending.Load() }

// Failed is the number of drains that failed (each is retried later).
func (sp *Spool) Failed() int64 { return sp.failed.Load() }

// Drain replays every complete spool file in order, giving its items to
// replay, and removes each file once replay accepted it. It stops at the
// first error, which it counts in Failed; the files not yet removed stay
// for the next drain. The caller decides where the items go (package
// server: the leader proposes them, a follower relays them).
func (sp *Spool) Drain(replay func(items []engine.PushItem) error) error {
	if err := sp.drain(replay); err != nil {
		sp.failed.Add(1)
		return err
	}
	return nil
}

func (sp *Spool) drain(replay func(items []engine.PushItem) error) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	names, err := sp.files()
	if err != nil {
		return err
	}
	for _, name := range names {
		items, err := sp.read(name)
		if err != nil {
			return err
		}
		if err := replay(items); err != nil {
			return err
		}
		// Not fsynced: a removal lost in a crash replays the file again,
		// which transaction-id dedup (the queue's dedupWindowSeconds)
		// makes harmless, as it does an interrupted replay.
		if err := sp.fs.Remove(filepath.Join(sp.dir, name)); err != nil {
			return err
		}
		sp.pending.Add(-int64(len(items)))
	}
	return nil
}
