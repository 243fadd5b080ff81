package command

import "errors"

var (
	// ErrCorrupt is wrapped by every failure to decode an entry.
	ErrCorrupt = errors.New("command: corrupt")
	// ErrVersion is returned for an entry of a version this binary does not
	// know: the node must stop rather than skip it.
	ErrVersion = errors.New("command: unknown version")
)
