package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// Maintainer is implemented by brokers with Queen's cluster-wide maintenance
// switches (docs/semantics.md §12): while push maintenance is on, pushes go to this
// node's spool and are answered "buffered"; while pop maintenance is on,
// every pop answers 204. raft.Node implements it; the switches are set by
// proposing command.Maintenance.
type Maintainer interface {
	Maintenance() (push, pop bool)
}

// spool keeps pushes received during push maintenance, one file per
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
type spool struct {
	dir     string
	fs      spoolFS
	mu      sync.Mutex // serializes writes and the drain
	seq     atomic.Uint64
	pending atomic.Int64 // messages waiting in complete files
	failed  atomic.Int64 // replays that failed (retried later)
}

type spooledItem struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition,omitempty"`
	TransactionID string          `json:"transactionId"`
	TraceID       string          `json:"traceId,omitempty"`
	ProducerSub   string          `json:"producerSub,omitempty"`
	Payload       json.RawMessage `json:"payload"`
	Sealed        bool            `json:"sealed,omitempty"`
}

func toSpooled(it *engine.PushItem) spooledItem {
	si := spooledItem{Queue: it.Queue, Partition: it.Partition, TransactionID: it.TransactionID,
		ProducerSub: it.ProducerSub, Payload: it.Payload, Sealed: it.Sealed}
	if it.HasTrace {
		si.TraceID = engine.FormatID(it.TraceID)
	}
	return si
}

// tmpSuffix marks a spool file still being written: it is renamed to its
// final name (ending in .jsonl) once synced.
const tmpSuffix = ".tmp"

// openSpool opens (or creates) the spool in dir, discards the temporary
// files a crash left behind and counts the messages waiting in complete
// files.
func openSpool(dir string, fs spoolFS) (*spool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("server: spool: %w", err)
	}
	// The directory itself may have just been made: its entry in the
	// parent must be as durable as the files renamed into it.
	if err := fs.SyncDir(filepath.Dir(dir)); err != nil {
		return nil, fmt.Errorf("server: spool: %w", err)
	}
	sp := &spool{dir: dir, fs: fs}
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
func (sp *spool) discardTemp() error {
	entries, err := os.ReadDir(sp.dir)
	if err != nil {
		return fmt.Errorf("server: spool: %w", err)
	}
	removed := false
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), tmpSuffix) {
			if err := sp.fs.Remove(filepath.Join(sp.dir, e.Name())); err != nil {
				return fmt.Errorf("server: spool: discard %s: %w", e.Name(), err)
			}
			removed = true
		}
	}
	if removed {
		if err := sp.fs.SyncDir(sp.dir); err != nil {
			return fmt.Errorf("server: spool: %w", err)
		}
	}
	return nil
}

// write stores one request's items durably (see spool): when it returns
// nil, the file and its name are on disk. Items without a transaction id
// get one. Failures to make the file durable wrap errSpoolWrite.
func (sp *spool) write(items []engine.PushItem) error {
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
		si := toSpooled(it)
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
		return fmt.Errorf("%w: write %s: %w", errSpoolWrite, filepath.Base(tmp), err)
	}
	if err := sp.fs.Rename(tmp, name); err != nil {
		sp.fs.Remove(tmp)
		return fmt.Errorf("%w: rename %s: %w", errSpoolWrite, filepath.Base(tmp), err)
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
		return fmt.Errorf("%w: sync directory: %w", errSpoolWrite, err)
	}
	sp.pending.Add(int64(len(items)))
	return nil
}

// writeFile creates name, writes data and fsyncs it.
func (sp *spool) writeFile(name string, data []byte) error {
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
func (sp *spool) files() ([]string, error) {
	entries, err := os.ReadDir(sp.dir)
	if err != nil {
		return nil, fmt.Errorf("server: spool: %w", err)
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

func (sp *spool) read(name string) ([]engine.PushItem, error) {
	f, err := os.Open(filepath.Join(sp.dir, name))
	if err != nil {
		return nil, fmt.Errorf("server: spool: %w", err)
	}
	defer f.Close()
	var items []engine.PushItem
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	for sc.Scan() {
		var si spooledItem
		if err := json.Unmarshal(sc.Bytes(), &si); err != nil {
			return nil, fmt.Errorf("server: spool file %s: %w", name, err)
		}
		it := engine.PushItem{Queue: si.Queue, Partition: si.Partition, TransactionID: si.TransactionID,
			ProducerSub: si.ProducerSub, Payload: si.Payload, Sealed: si.Sealed}
		if si.TraceID != "" {
			if it.TraceID, err = engine.ParseID(si.TraceID); err != nil {
				return nil, fmt.Errorf("server: spool file %s: %w", name, err)
			}
			it.HasTrace = true
		}
		items = append(items, it)
	}
	return items, sc.Err()
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
		if push, _ := m.Maintenance(); push || s.spool.pending.Load() == 0 {
			continue
		}
		// Replaying adds the spooled data to the store: not while a disk
		// of the cluster is below its reserve (a follower's replay is a
		// push the leader's edge checks; this covers the leader's own).
		if _, err := s.roomFor(0); err != nil {
			continue
		}
		if err := s.drain(); err != nil {
			s.spool.failed.Add(1)
			s.log.Warn("spool replay", "err", err)
		}
	}
}

// drain replays every complete spool file in order and removes each once
// the cluster accepted it. On the leader it pushes the items as stored,
// sealed bits included; on a follower it relays them to the leader as an
// ordinary push of their plaintext (relayBody).
func (s *Server) drain() error {
	sp := s.spool
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
		if err := s.replaySpooled(items); err != nil {
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

// spoolReplayHeader marks a push that replays another node's spool. It
// counts only on a request that carries the cluster secret.
const spoolReplayHeader = "X-Queen-Spool-Replay"

func (s *Server) replaySpooled(items []engine.PushItem) error {
	st := s.broker.Status()
	if st.Role == "leader" || !s.groups.leaderKnownUnread() {
		// A grouped broker sends each item to its queue's group.
		ctx, cancel := context.WithTimeout(s.ctx, forwardTimeout)
		defer cancel()
		res, err := raft.Propose[[]engine.PushResult](ctx, s.prop, engine.PushCmd{Items: items})
		if err == nil {
			s.countPushed(res) // the leader's push route counts a relayed replay
		}
		return err
	}
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
	req.SetRequestURI(s.relayScheme() + "://" + st.LeaderHTTP + "/api/v1/push")
	req.Header.SetMethod("POST")
	req.Header.SetContentType("application/json")
	req.Header.Set(forwardedHeader, st.ID)
	if s.opts.ClusterSecret != "" {
		// As a node of the cluster: the leader keeps the producerSub each
		// item was spooled with. Without the secret the replay is an
		// anonymous push (refused when JWT is on: configure the secret).
		req.Header.Set(clusterSecretHeader, s.opts.ClusterSecret)
		req.Header.Set(spoolReplayHeader, "1")
	}
	req.Header.Set(deadlineHeader, strconv.FormatInt(time.Now().Add(forwardTimeout).UnixMicro(), 10))
	req.SetBodyRaw(body) // not copied into, nor left in, fasthttp's pool
	if err := s.client.DoTimeout(req, resp, forwardTimeout); err != nil {
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
			plain, ok := s.crypt.open(it.Payload)
			if !ok {
				return nil, errSpoolUnopened
			}
			it.Payload, it.Sealed = plain, false
		}
		if i > 0 {
			body = append(body, ',')
		}
		si := toSpooled(&it)
		b, err := json.Marshal(&si)
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
	if err := s.spool.write(items); err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startBody(ctx)
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
	send(ctx, fasthttp.StatusCreated, w)
}
