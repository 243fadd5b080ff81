package fault

import "errors"

var (
	// ErrFaulted is wrapped, with the I/O error that caused it, by every
	// write a store refuses after a failed commit, and by the store's Fault
	// while it is faulted: the store must be reopened before it writes
	// again. The engine, the Raft log and the node alias it.
	ErrFaulted = errors.New("fault: store faulted by an I/O error")

	// ErrStalled is wrapped by Monitor.Stalled, and so by a store's Fault,
	// while a write to a WAL or blob file is being retried: the store waits
	// for the disk rather than fail a write Pebble cannot survive failing.
	ErrStalled = errors.New("fault: writes waiting for the disk")

	// ErrRestartRequired is wrapped by a commit error after which the Pebble
	// instance can be neither used nor closed (it panicked holding its
	// commit mutex): only a new process can reopen the directory. The store
	// hands such an error to its OnFatal.
	ErrRestartRequired = errors.New("fault: the store cannot be reopened in this process")
)
