package backup

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/zstd"
)

// Reader reads a backup file, checking every frame as it goes.
type Reader struct {
	r       *bufio.Reader
	m       Manifest
	dec     *zstd.Decoder
	next    int    // index in m.Groups of the next group
	frames  uint64 // frames read
	raw     uint64 // stream bytes of every group
	buf     []byte // the last frame's payload
	cur     *groupReader
	done    bool
	lastErr error // sticky: the file is bad from here on
}

// NewReader reads the header and the manifest.
func NewReader(r io.Reader) (*Reader, error) {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(ChunkSize))
	if err != nil {
		return nil, err
	}
	br := &Reader{r: bufio.NewReaderSize(r, 256<<10), dec: dec}
	var head [len(magic) + 1]byte
	if _, err := io.ReadFull(br.r, head[:]); err != nil {
		return nil, corrupt("header", err)
	}
	if string(head[:len(magic)]) != magic {
		return nil, fmt.Errorf("%w: not a backup file (no %q magic)", ErrCorrupt, magic)
	}
	if v := head[len(magic)]; v != Version {
		if v > Version {
			return nil, fmt.Errorf("%w: the file has format version %d, this binary reads up to %d: restore it with a newer queen",
				ErrNewer, v, Version)
		}
		return nil, fmt.Errorf("%w: format version %d", ErrCorrupt, v)
	}
	kind, payload, err := br.frame()
	if err != nil {
		return nil, err
	}
	if kind != kindManifest {
		return nil, br.fail(fmt.Errorf("%w: the first frame is %q, not the manifest", ErrCorrupt, kind))
	}
	if err := json.Unmarshal(payload, &br.m); err != nil {
		return nil, br.fail(corrupt("manifest", err))
	}
	// The manifest repeats the header's version for a reader of the JSON;
	// a newer one there is refused as a newer header is (a tool that
	// rewrote the manifest of a newer file), and a disagreement is
	// corruption: the file is not what either says.
	switch f := br.m.Format; {
	case f > Version:
		return nil, br.fail(fmt.Errorf("%w: the manifest says format version %d, this binary reads up to %d: restore it with a newer queen",
			ErrNewer, f, Version))
	case f != int(head[len(magic)]):
		return nil, br.fail(fmt.Errorf("%w: the manifest says format version %d, the header %d", ErrCorrupt, f, head[len(magic)]))
	}
	seen := map[uint32]bool{}
	for _, g := range br.m.Groups {
		if seen[g.ID] {
			return nil, br.fail(fmt.Errorf("%w: the manifest lists group %d twice", ErrCorrupt, g.ID))
		}
		seen[g.ID] = true
	}
	return br, nil
}

// Close releases the decoder.
func (r *Reader) Close() { r.dec.Close() }

// Err is the first fault found in the file, nil while it reads well: what
// a consumer of a group's stream reports when its own decoding failed on
// the bytes it was given (the fault is the file's, not the stream's).
func (r *Reader) Err() error { return r.lastErr }

// Manifest is the file's manifest.
func (r *Reader) Manifest() Manifest { return r.m }

func corrupt(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: truncated in the %s (the file ends before its trailer)", ErrCorrupt, what)
	}
	return fmt.Errorf("%w: %s: %v", ErrCorrupt, what, err)
}

func (r *Reader) fail(err error) error {
	if r.lastErr == nil {
		r.lastErr = err
	}
	return r.lastErr
}

// frame reads the next frame and checks its CRC. The payload is valid until
// the next call.
func (r *Reader) frame() (byte, []byte, error) {
	if r.lastErr != nil {
		return 0, nil, r.lastErr
	}
	at := r.frames
	var head [frameHeader]byte
	if _, err := io.ReadFull(r.r, head[:]); err != nil {
		return 0, nil, r.fail(corrupt(fmt.Sprintf("header of frame %d", at), err))
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > MaxFrame {
		return 0, nil, r.fail(fmt.Errorf("%w: frame %d claims %d bytes (at most %d)", ErrCorrupt, at, n, MaxFrame))
	}
	if cap(r.buf) < int(n)+4 {
		r.buf = make([]byte, int(n)+4)
	}
	buf := r.buf[:n+4]
	if _, err := io.ReadFull(r.r, buf); err != nil {
		return 0, nil, r.fail(corrupt(fmt.Sprintf("frame %d", at), err))
	}
	payload := buf[:n]
	want := crc32.Update(crc32.Checksum(head[:], crcTable), crcTable, payload)
	if got := binary.BigEndian.Uint32(buf[n:]); got != want {
		return 0, nil, r.fail(fmt.Errorf("%w: checksum mismatch in frame %d (%q, %d bytes)", ErrCorrupt, at, head[0], n))
	}
	r.frames++
	return head[0], payload, nil
}

// Next returns the next group and a reader of its engine stream, which
// reports ErrCorrupt if the file is bad inside the group. It returns
// io.EOF once the trailer has checked and the file has ended after it; the
// file is then complete and intact. A group not read to its end is skipped
// (and checked).
func (r *Reader) Next() (Group, io.Reader, error) {
	if r.done {
		return Group{}, nil, io.EOF
	}
	if r.cur != nil && !r.cur.ended {
		if _, err := io.Copy(io.Discard, r.cur); err != nil {
			return Group{}, nil, err
		}
	}
	r.cur = nil
	kind, payload, err := r.frame()
	if err != nil {
		return Group{}, nil, err
	}
	switch {
	case kind == kindGroup && len(payload) == 12:
		if r.next >= len(r.m.Groups) {
			return Group{}, nil, r.fail(fmt.Errorf("%w: more groups than the manifest lists", ErrCorrupt))
		}
		g := r.m.Groups[r.next]
		id, index := binary.BigEndian.Uint32(payload), binary.BigEndian.Uint64(payload[4:])
		if id != g.ID || index != g.Index {
			return Group{}, nil, r.fail(fmt.Errorf("%w: group %d at index %d where the manifest has group %d at %d",
				ErrCorrupt, id, index, g.ID, g.Index))
		}
		r.next++
		r.cur = &groupReader{r: r, id: id, framesBefore: r.frames}
		return g, r.cur, nil
	case kind == kindTrailer && len(payload) == 20:
		groups, frames, raw := binary.BigEndian.Uint32(payload), binary.BigEndian.Uint64(payload[4:]), binary.BigEndian.Uint64(payload[12:])
		if r.next != len(r.m.Groups) || int(groups) != len(r.m.Groups) || frames != r.frames-1 || raw != r.raw {
			return Group{}, nil, r.fail(fmt.Errorf("%w: the trailer counts %d groups, %d frames, %d bytes; the file has %d, %d, %d",
				ErrCorrupt, groups, frames, raw, r.next, r.frames-1, r.raw))
		}
		if _, err := r.r.Peek(1); !errors.Is(err, io.EOF) {
			return Group{}, nil, r.fail(fmt.Errorf("%w: bytes after the trailer", ErrCorrupt))
		}
		r.done = true
		return Group{}, nil, io.EOF
	}
	return Group{}, nil, r.fail(fmt.Errorf("%w: frame %d is %q (%d bytes) where a group or the trailer should start",
		ErrCorrupt, r.frames-1, kind, len(payload)))
}

// groupReader is one group's engine stream: the 'D' frames up to its 'E'.
type groupReader struct {
	r            *Reader
	id           uint32
	framesBefore uint64
	raw          uint64
	out          []byte // decompressed, not yet read
	dbuf         []byte
	ended        bool
}

func (g *groupReader) Read(p []byte) (int, error) {
	for len(g.out) == 0 {
		if g.ended {
			return 0, io.EOF
		}
		if err := g.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, g.out)
	g.out = g.out[n:]
	return n, nil
}

// fill reads the group's next frame.
func (g *groupReader) fill() error {
	r := g.r
	kind, payload, err := r.frame()
	if err != nil {
		return err
	}
	switch {
	case kind == kindData:
		out, err := r.dec.DecodeAll(payload, g.dbuf[:0])
		if err != nil {
			return r.fail(corrupt(fmt.Sprintf("group %d chunk %d", g.id, r.frames-1), err))
		}
		if len(out) > ChunkSize {
			return r.fail(fmt.Errorf("%w: group %d chunk of %d bytes (at most %d)", ErrCorrupt, g.id, len(out), ChunkSize))
		}
		g.dbuf, g.out = out, out
		g.raw += uint64(len(out))
		return nil
	case kind == kindEnd && len(payload) == 16:
		raw, chunks := binary.BigEndian.Uint64(payload), binary.BigEndian.Uint64(payload[8:])
		if raw != g.raw || chunks != r.frames-1-g.framesBefore {
			return r.fail(fmt.Errorf("%w: group %d ends counting %d bytes in %d chunks; it has %d in %d",
				ErrCorrupt, g.id, raw, chunks, g.raw, r.frames-1-g.framesBefore))
		}
		r.raw += g.raw
		g.ended = true
		return nil
	}
	return r.fail(fmt.Errorf("%w: frame %d is %q (%d bytes) inside group %d", ErrCorrupt, r.frames-1, kind, len(payload), g.id))
}

// Verify reads a whole backup file and checks it, without keeping anything.
func Verify(r io.Reader) (Manifest, error) {
	br, err := NewReader(r)
	if err != nil {
		return Manifest{}, err
	}
	defer br.Close()
	for {
		_, g, err := br.Next()
		if errors.Is(err, io.EOF) {
			return br.m, nil
		}
		if err != nil {
			return br.m, err
		}
		if _, err := io.Copy(io.Discard, g); err != nil {
			return br.m, err
		}
	}
}
