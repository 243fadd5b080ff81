package logstore

import (
	"errors"

	"github.com/queenmq/queen/engine/fault"
	"github.com/queenmq/queen/internal/wire"
)

var (
	// ErrCorrupt marks every failure to decode bytes read back from disk: a
	// log value with a bad checksum, length, version or index, a malformed
	// key, or a uint64 stable value that is not 8 bytes. Test with errors.Is;
	// it matches wire.ErrCorrupt (engine.ErrCorrupt) too.
	ErrCorrupt = wire.Corrupt("logstore")

	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("logstore: closed")

	// ErrKeyNotFound is returned, unwrapped, by Get and GetUint64 when the
	// stable key was never set. Its message is exactly "not found" and breaks
	// the package-prefix rule on purpose: hashicorp/raft recognises a missing
	// CurrentTerm, LastVoteTerm or LastVoteCand by comparing err.Error() with
	// "not found" (api.go HasExistingState, NewRaft; raft.go requestVote),
	// the string raft-boltdb's ErrKeyNotFound and raft's InmemStore.Get use.
	ErrKeyNotFound = errors.New("not found")

	// ErrInvalidIndex is returned by StoreLog and StoreLogs for an entry with
	// Index 0. Raft numbers entries from 1, and 0 means "empty log" in
	// FirstIndex and LastIndex, so an entry at 0 could not be told apart.
	ErrInvalidIndex = errors.New("logstore: log index 0 is reserved")

	// ErrTooLarge is returned by StoreLog and StoreLogs for an entry whose
	// Data or Extensions do not fit the format's 32-bit length fields.
	ErrTooLarge = errors.New("logstore: entry too large")

	// ErrFaulted is wrapped, with its cause, by every write refused after an
	// I/O error: appends and deletions fail at once until the store has
	// reopened itself (Set and SetUint64 wait instead, see heal.go). It is
	// fault.ErrFaulted, shared with the engine.
	ErrFaulted = fault.ErrFaulted

	// ErrInvalidOptions is returned by Options.Validate and Open for an
	// option outside its documented range.
	ErrInvalidOptions = errors.New("logstore: invalid options")
)
