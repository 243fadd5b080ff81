package engine

import (
	"errors"
	"fmt"

	"github.com/queenmq/queen/engine/fault"
	"github.com/queenmq/queen/internal/wire"
)

// Sentinel errors. The HTTP edge maps each to a status and a stable code
// (server/errors.go); messages are prefixed with the package name.
var (
	// ErrCorrupt is matched (errors.Is) by every failure to decode data
	// read from the store, whichever format found it: records and keys
	// (keyspace.ErrCorrupt), segments (segment.ErrCorrupt), snapshot
	// streams, and the replicated commands and Raft log of package raft.
	// It is wire.ErrCorrupt, the mark each of those sentinels carries.
	ErrCorrupt = wire.ErrCorrupt
	// ErrUnlistedCommand is the answer, while a queue is frozen for a
	// move, to a command whose type the footprints (footprint.go
	// Touches) do not name: it might write the frozen queue, so it is
	// refused. It wraps ErrQueueMoving (a retry after the move may
	// succeed); it means a command was added without its line there.
	ErrUnlistedCommand = fmt.Errorf("%w: the command has no footprint", ErrQueueMoving)
	// ErrClosed is returned by operations on a closed engine.
	ErrClosed = errors.New("engine: closed")
	// ErrInvalid is wrapped by every rejection of a malformed command
	// argument (an empty queue name, a bad option value).
	ErrInvalid = errors.New("engine: invalid argument")
	// ErrQueueNotFound is returned when a named queue does not exist.
	ErrQueueNotFound = errors.New("engine: queue not found")
	// ErrPartitionNotFound is returned when a partition does not exist.
	ErrPartitionNotFound = errors.New("engine: partition not found")
	// ErrNoDeadLetter is returned by replay and delete when an address has
	// no dead-letter row (a live message, or nothing at all).
	ErrNoDeadLetter = errors.New("engine: no dead-letter row for this address")
	// ErrMessageNotFound is returned when a (partition, transaction id)
	// address names no stored message.
	ErrMessageNotFound = errors.New("engine: message not found")
	// ErrAlreadyConsumed is returned when a message is already behind the
	// group's cursor (docs/decisions.md B3 move to DLQ).
	ErrAlreadyConsumed = errors.New("engine: message already consumed by this group")
	// ErrFaulted is wrapped by every write refused after an I/O error (and
	// every read while the model may be ahead of the disk): the store is
	// faulted until Recover reopens it. The cause is wrapped too.
	ErrFaulted = fault.ErrFaulted
	// ErrNoStore is returned by Open with Options.ReadOnly when the
	// directory holds no store (or does not exist).
	ErrNoStore = errors.New("engine: no store in the directory")
	// ErrReadOnly is returned by Begin on an engine opened with
	// Options.ReadOnly.
	ErrReadOnly = errors.New("engine: opened read-only")
	// ErrRestoreCut is returned by Open with Options.ReadOnly for a store
	// that a snapshot restore was cut off in: a node opening it wipes it
	// and restores its snapshot again.
	ErrRestoreCut = errors.New("engine: the store was cut off in a snapshot restore")
	// ErrNewerFormat is returned by Open when the store was written by a
	// newer version of the engine.
	ErrNewerFormat = errors.New("engine: store format is newer than this binary")
)
