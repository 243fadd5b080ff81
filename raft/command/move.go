package command

import (
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/internal/wire"
)

// The commands that move a queue between groups (engine/move.go): the
// chunks of its import into the target group, the drop of the copy left
// in the source, and the freeze that holds it still meanwhile
// (engine/freeze.go); the directory's record of the move is dirmove.go's.
// Layouts in doc.go.

func appendImportQueue(w *wire.Writer, c engine.ImportQueueCmd) {
	w.Uvarint(uint64(c.Group))
	w.Str(c.Queue)
	w.ID(c.ID)
	w.Uvarint(c.Epoch)
	w.Uvarint(uint64(c.Seq))
	w.Bool(c.Last)
	w.Uvarint(uint64(len(c.KVs)))
	for _, kv := range c.KVs {
		w.Bytes(kv.Key)
		w.Bytes(kv.Value)
	}
}

func readImportQueue(r *wire.Reader) engine.ImportQueueCmd {
	c := engine.ImportQueueCmd{Group: uint32(r.Uvarint()), Queue: r.Str(), ID: r.ID(), Epoch: r.Uvarint(),
		Seq: uint32(r.Uvarint()), Last: r.Bool()}
	if n := r.Count(2); n > 0 {
		c.KVs = make([]engine.KV, n)
		for i := range c.KVs {
			c.KVs[i] = engine.KV{Key: r.Bytes(), Value: r.Bytes()}
		}
	}
	return c
}

func appendDropQueue(w *wire.Writer, c engine.DropQueueCmd) {
	w.Uvarint(uint64(c.Group))
	w.Str(c.Queue)
	w.ID(c.ID)
}

func readDropQueue(r *wire.Reader) engine.DropQueueCmd {
	return engine.DropQueueCmd{Group: uint32(r.Uvarint()), Queue: r.Str(), ID: r.ID()}
}

func appendFreezeQueue(w *wire.Writer, c engine.FreezeQueueCmd) {
	w.Uvarint(uint64(c.Group))
	w.Str(c.Queue)
	w.Uvarint(c.Epoch)
	w.Bool(c.Thaw)
}

func readFreezeQueue(r *wire.Reader) engine.FreezeQueueCmd {
	return engine.FreezeQueueCmd{Group: uint32(r.Uvarint()), Queue: r.Str(), Epoch: r.Uvarint(), Thaw: r.Bool()}
}

// answersEpoch carries a placement epoch (BeginMove, EndMove): uvarint.
var answersEpoch = answers(func(w *wire.Writer, v uint64) { w.Uvarint(v) }, func(r *wire.Reader) uint64 { return r.Uvarint() })

// answersImport carries an import's ImportResult: next uvarint | done u8.
var answersImport = answers(func(w *wire.Writer, v engine.ImportResult) { w.Uvarint(uint64(v.Next)); w.Bool(v.Done) },
	func(r *wire.Reader) engine.ImportResult {
		return engine.ImportResult{Next: uint32(r.Uvarint()), Done: r.Bool()}
	})
