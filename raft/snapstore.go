package raft

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft/logstore"
)

// Snapshots are references, not copies.
//
// Raft needs a snapshot for two things: to drop old log entries, and to
// bring a follower that fell behind the log back up. The engine already
// keeps the whole state on disk with its applied index, and its batches are
// made durable (one WAL fsync) when the snapshot is taken, so a snapshot on
// disk only records "the engine holds index N": a reference of fixed size.
// Taking one costs a fsync whatever the store holds, so snapshots can be
// taken often, and a restart only reads the log since the last one.
//
// A reference on disk is:
//
//	+---------+---------+-------------+
//	| "QREF"  | version | index u64BE |
//	|  4 B    | u8 = 1  |     8 B     |
//	+---------+---------+-------------+
//
// Part of the on-disk format: never change; a new layout takes a new version.
//
// When Raft opens a reference (to send it to a follower) the store streams
// the engine's current state instead: a full engine snapshot stream at some
// index N' >= N. That is a valid snapshot for index N because applying is
// idempotent per index: the follower's engine records N' and skips the
// entries N+1..N' Raft sends after the snapshot. Raft must know the size up
// front, so the stream is produced twice from one Pebble snapshot: once to
// count, once to send.
//
// Snapshots received from a leader are full streams and are kept as they
// come; opening one returns it unchanged.
const (
	refMagic   = "QREF"
	refVersion = 1
	refLen     = len(refMagic) + 1 + 8
)

func encodeRef(index uint64) []byte {
	b := append([]byte(refMagic), refVersion)
	return binary.BigEndian.AppendUint64(b, index)
}

// decodeRef reports whether head is a reference and the index it holds.
func decodeRef(head []byte) (uint64, bool) {
	if len(head) != refLen || string(head[:len(refMagic)]) != refMagic || head[len(refMagic)] != refVersion {
		return 0, false
	}
	return binary.BigEndian.Uint64(head[len(refMagic)+1:]), true
}

// refStore wraps Raft's file snapshot store: it keeps the metadata and the
// bytes, and turns references into streams of the engine when opened.
type refStore struct {
	hraft.SnapshotStore
	e   *engine.Engine
	log *logstore.Log // the group's log, told of a stream being restored
}

// Open returns the snapshot's stream: a stored full stream as it is, or,
// for a reference, the engine's current state.
func (s *refStore) Open(id string) (*hraft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.SnapshotStore.Open(id)
	if err != nil {
		return nil, nil, err
	}
	br := bufio.NewReader(rc)
	head, _ := br.Peek(refLen)
	index, isRef := decodeRef(head)
	if !isRef || meta.Size != int64(refLen) {
		// A stream a leader sent: raft opens it to restore it, then
		// deletes the log (logstore's DeleteRange keeps what lies above).
		if s.log != nil {
			s.log.SnapshotInstalled(meta.Index)
		}
		return meta, struct {
			io.Reader
			io.Closer
		}{br, rc}, nil
	}
	rc.Close()
	if applied := s.e.Applied(); applied < index {
		// Only a disk that lost synced writes gets here; the state the
		// reference names is gone, and an older one would lose entries.
		return nil, nil, fmt.Errorf("raft: snapshot %s refers to engine index %d but the engine is at %d: "+
			"the engine lost data; wipe this node's data directory and join it to the cluster again", id, index, applied)
	}
	snap, err := s.e.Snapshot()
	if err != nil {
		return nil, nil, err
	}
	size, err := snap.WriteTo(io.Discard)
	if err != nil {
		snap.Close()
		return nil, nil, err
	}
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer snap.Close()
		n, err := snap.WriteTo(pw)
		if err == nil && n != size {
			err = fmt.Errorf("raft: snapshot stream changed size: %d then %d bytes", size, n)
		}
		pw.CloseWithError(err)
	}()
	m := *meta
	m.Size = size
	return &m, &streamReader{pr, done}, nil
}

// streamReader is an engine stream being produced; Close stops and waits
// for the producer so the engine snapshot is released.
type streamReader struct {
	*io.PipeReader
	done chan struct{}
}

func (r *streamReader) Close() error {
	r.PipeReader.Close()
	<-r.done
	return nil
}
