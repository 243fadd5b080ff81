package command

import (
	"errors"

	"github.com/queenmq/queen/internal/wire"
)

var (
	// ErrCorrupt is wrapped by every failure to decode an entry. It
	// matches wire.ErrCorrupt (engine.ErrCorrupt).
	ErrCorrupt = wire.Corrupt("command")
	// ErrVersion is returned for an entry of a version this binary does not
	// know: the node must stop rather than skip it.
	ErrVersion = errors.New("command: unknown version")
)
