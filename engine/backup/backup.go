package backup

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"runtime"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Part of the on-disk format — never change (doc.go).
const (
	magic = "QBAK"
	// Version is the format this binary writes, and the newest it reads.
	Version = 1

	kindManifest = 'M'
	kindGroup    = 'G'
	kindData     = 'D'
	kindEnd      = 'E'
	kindTrailer  = 'T'
)

const (
	// ChunkSize is the most engine-stream bytes one 'D' frame holds.
	ChunkSize = 1 << 20
	// MaxFrame bounds a frame's payload: a larger length is corruption.
	MaxFrame = 4 << 20

	frameHeader = 1 + 4
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Manifest describes a backup; it is the file's first frame.
type Manifest struct {
	// Format is the file's format version (the header's, repeated for a
	// reader of the JSON).
	Format int `json:"format"`
	// Created is when the backup started.
	Created time.Time `json:"created"`
	// Node is the id of the node that wrote the backup, Members the
	// voters of its cluster then (the store has no cluster id; its members
	// name it).
	Node    string   `json:"node"`
	Members []string `json:"members,omitempty"`
	// Groups are the Raft groups in the file, in the order they come.
	Groups []Group `json:"groups"`
}

// Group is one Raft group in a backup.
type Group struct {
	// ID is the group (0 the directory of a node run with --groups, 1 the
	// only group of a node run without).
	ID uint32 `json:"id"`
	// Index is the Raft index the group's state was read at.
	Index uint64 `json:"index"`
	// Queues counts the messages each queue of the group retains (acked
	// or not), read with the snapshot: for an operator to check a backup
	// against what they expect.
	Queues map[string]int64 `json:"queues,omitempty"`
}

// Writer writes a backup file.
//
// Chunks are compressed while the caller goes on producing the stream:
// flushChunk hands a full chunk to a goroutine and the frames are written,
// in order, by the caller's goroutine as they finish, with at most depth
// chunks in flight. Reading the store and compressing then share the cores
// instead of taking turns (one core's zstd was the backup's ceiling).
type Writer struct {
	w       *bufio.Writer
	m       Manifest
	enc     *zstd.Encoder
	next    int    // index in m.Groups of the next group
	frames  uint64 // frames written
	raw     uint64 // stream bytes of every group
	chunk   []byte // raw bytes waiting to be compressed
	pending []*job // chunks being compressed, in stream order
	free    []*job // finished jobs whose buffers are reused
	depth   int    // most chunks in flight
	err     error  // sticky: the first write error
}

// job is one chunk in flight: raw in, its zstd frame out once done closes.
type job struct {
	raw, out []byte
	done     chan struct{}
}

// NewWriter writes the header and m (Format set to Version) to w; the
// groups of m are then written in its order with WriteGroup, and Close
// finishes the file.
func NewWriter(w io.Writer, m Manifest) (*Writer, error) {
	m.Format = Version
	js, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("backup: encode manifest: %w", err)
	}
	if len(js) > MaxFrame {
		return nil, fmt.Errorf("backup: manifest of %d bytes exceeds %d", len(js), MaxFrame)
	}
	// Up to one compressing goroutine per core (EncodeAll is safe to call
	// concurrently up to the encoder's concurrency), plus one chunk being
	// filled: a bounded ~(depth+1) MiB of memory.
	depth := min(max(runtime.GOMAXPROCS(0), 1), 4)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false),
		zstd.WithEncoderConcurrency(depth))
	if err != nil {
		return nil, err
	}
	bw := &Writer{w: bufio.NewWriterSize(w, 256<<10), m: m, enc: enc, depth: depth,
		chunk: make([]byte, 0, ChunkSize)}
	bw.w.WriteString(magic)
	bw.w.WriteByte(Version)
	bw.frame(kindManifest, js)
	return bw, bw.err
}

// frame writes one frame; a failure sticks in w.err.
func (w *Writer) frame(kind byte, payload []byte) {
	if w.err != nil {
		return
	}
	var head [frameHeader]byte
	head[0] = kind
	binary.BigEndian.PutUint32(head[1:], uint32(len(payload)))
	crc := crc32.Update(crc32.Checksum(head[:], crcTable), crcTable, payload)
	w.w.Write(head[:])
	w.w.Write(payload)
	_, w.err = w.w.Write(binary.BigEndian.AppendUint32(nil, crc))
	if w.err != nil {
		w.err = fmt.Errorf("backup: write: %w", w.err)
	}
	w.frames++
}

// WriteGroup writes the next group of the manifest: src writes the group's
// engine stream (engine.Snapshot).
func (w *Writer) WriteGroup(src io.WriterTo) error {
	if w.err != nil {
		return w.err
	}
	if w.next >= len(w.m.Groups) {
		return fmt.Errorf("backup: more groups written than the manifest lists")
	}
	g := w.m.Groups[w.next]
	w.next++
	w.frame(kindGroup, binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(nil, g.ID), g.Index))
	framesBefore := w.frames
	n, err := src.WriteTo(chunker{w})
	if err == nil {
		w.flushChunk()
	}
	w.drain(0)
	if err == nil {
		err = w.err
	}
	if err != nil {
		w.err = errors.Join(w.err, err)
		return fmt.Errorf("backup: group %d: %w", g.ID, err)
	}
	w.raw += uint64(n)
	w.frame(kindEnd, binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(n)), w.frames-framesBefore))
	return w.err
}

// chunker cuts a group's stream into ChunkSize pieces.
type chunker struct{ w *Writer }

func (c chunker) Write(p []byte) (int, error) {
	w := c.w
	n := len(p)
	for len(p) > 0 && w.err == nil {
		k := min(len(p), ChunkSize-len(w.chunk))
		w.chunk = append(w.chunk, p[:k]...)
		p = p[k:]
		if len(w.chunk) == ChunkSize {
			w.flushChunk()
		}
	}
	if w.err != nil {
		return 0, w.err
	}
	return n, nil
}

// flushChunk starts compressing the chunk filled so far, first writing
// the oldest chunks' frames while depth of them are in flight.
func (w *Writer) flushChunk() {
	if len(w.chunk) == 0 {
		return
	}
	w.drain(w.depth - 1)
	var j *job
	if n := len(w.free); n > 0 {
		j, w.free = w.free[n-1], w.free[:n-1]
	} else {
		j = &job{raw: make([]byte, 0, ChunkSize)}
	}
	j.raw, w.chunk = w.chunk, j.raw[:0]
	j.done = make(chan struct{})
	w.pending = append(w.pending, j)
	go func() {
		j.out = w.enc.EncodeAll(j.raw, j.out[:0])
		close(j.done)
	}()
}

// drain writes the frames of the oldest pending chunks, waiting for each,
// until at most keep are in flight. It waits even after a write error, so
// that no goroutine outlives the Writer's use of its buffers.
func (w *Writer) drain(keep int) {
	for len(w.pending) > keep {
		j := w.pending[0]
		<-j.done
		w.frame(kindData, j.out)
		w.pending = w.pending[1:]
		w.free = append(w.free, j)
	}
}

// Close writes the trailer, once every group of the manifest is written,
// and flushes. Only then is the file complete.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.next != len(w.m.Groups) {
		return fmt.Errorf("backup: %d of the manifest's %d groups written", w.next, len(w.m.Groups))
	}
	t := binary.BigEndian.AppendUint32(nil, uint32(len(w.m.Groups)))
	t = binary.BigEndian.AppendUint64(t, w.frames)
	w.frame(kindTrailer, binary.BigEndian.AppendUint64(t, w.raw))
	if w.err != nil {
		return w.err
	}
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("backup: write: %w", err)
	}
	return nil
}
