package fault

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// commitFatalPrefix starts the one Fatalf Pebble calls from inside a commit,
// on the committing goroutine (db.go applyInternal), after the commit
// pipeline has let go of its locks.
const commitFatalPrefix = "pebble: fatal commit error"

// ExitCode is the status Exit ends the process with: EX_IOERR of
// sysexits(3).
const ExitCode = 74

// Logger is a pebble.Logger. Info lines are dropped and errors go to Log. Fatalf never returns, as Pebble requires: a fatal commit error
// panics with a value that Commit, around the commit, turns back into an
// error; any other fatal error is handed to OnFatal and the calling
// goroutine then blocks for good (it holds Pebble's locks, so returning
// would let Pebble go on from a state it considers broken).
type Logger struct {
	// Log receives Pebble's error lines; nil drops them.
	Log func(format string, args ...any)
	// OnFatal receives a fatal error Pebble raised outside a commit. It
	// should end the process (Exit does); if it returns, the Pebble
	// goroutine that raised the error blocks for good.
	OnFatal func(error)
}

// fatalCommit is the panic value of a fatal commit error.
type fatalCommit struct{ err error }

func (l Logger) Infof(string, ...any) {}

func (l Logger) Errorf(format string, args ...any) {
	if l.Log != nil {
		l.Log(format, args...)
	}
}

func (l Logger) Fatalf(format string, args ...any) {
	err := fatalError(format, args)
	if strings.HasPrefix(format, commitFatalPrefix) {
		panic(fatalCommit{err})
	}
	l.Errorf("fatal: %v", err)
	if l.OnFatal != nil {
		l.OnFatal(err)
	}
	select {}
}

// fatalError builds the error of a Fatalf call, keeping its cause (Pebble
// passes the error as the last argument) so that errors.Is still finds
// ENOSPC or EIO in it.
func fatalError(format string, args []any) error {
	msg := fmt.Sprintf(format, args...)
	if n := len(args); n > 0 {
		if cause, ok := args[n-1].(error); ok {
			return &wrapped{msg: msg, cause: cause}
		}
	}
	return errors.New(msg)
}

type wrapped struct {
	msg   string
	cause error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.cause }

// Commit runs one Pebble commit (Batch.Commit, DB.Set, DB.LogData, ...) and
// returns its error, including a fatal commit error, which Pebble reports by
// calling Logger.Fatalf. After any error the instance must not commit
// again. An error that Pebble panicked with instead (a write to a WAL whose
// background write had failed, which a store prevents by checking
// Monitor.WALFailure first) is returned wrapping ErrRestartRequired: Pebble
// still holds its commit mutex, so the instance cannot even be closed.
// Other panics are Pebble's assertions and are not caught.
func Commit(commit func() error) (err error) {
	defer func() {
		switch r := recover().(type) {
		case nil:
		case fatalCommit:
			err = r.err
		case error:
			err = fmt.Errorf("%w: pebble panicked in a commit: %w", ErrRestartRequired, r)
		default:
			panic(r)
		}
	}()
	return commit()
}

// Exit is the default OnFatal: it names the error on stderr and ends the
// process with ExitCode, so that a supervisor restarts it and Pebble's and
// Raft's recovery runs from what is on disk.
func Exit(err error) {
	fmt.Fprintf(os.Stderr, "queen: storage: unrecoverable error: %v\n"+
		"queen: exiting (status %d); a restart recovers from what is on disk\n", err, ExitCode)
	os.Exit(ExitCode)
}
