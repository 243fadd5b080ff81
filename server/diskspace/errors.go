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
