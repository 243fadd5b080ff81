package diskspace

import "errors"

// Sentinel errors.
var (
	// ErrBelowReserve is returned by Check and Admit when a filesystem
	// holding one of the guarded directories has less free space than the
	// reserve. It comes wrapped with the reason, which names the
	// directories, their free space and the reserve:
	// "diskspace: insufficient storage: free space below reserve on
	// /data/raft: 40 MiB < 256 MiB".
	ErrBelowReserve = errors.New("diskspace: insufficient storage")
	// ErrInvalidOptions is wrapped by Validate's and New's rejections.
	ErrInvalidOptions = errors.New("diskspace: invalid options")
)

// ShortageError is the error Check and Admit return below the reserve. It
// wraps ErrBelowReserve; Reason is the text a client or an operator reads.
type ShortageError struct {
	// Reason names the directories of the filesystem, its free space and
	// the reserve: "free space below reserve on /data/raft: 40 MiB <
	// 256 MiB".
	Reason string
}

func (e *ShortageError) Error() string { return ErrBelowReserve.Error() + ": " + e.Reason }
func (e *ShortageError) Unwrap() error { return ErrBelowReserve }
