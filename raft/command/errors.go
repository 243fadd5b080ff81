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

// ErrNotRelayed is returned for a result asked of a command whose row has
// no result codec (it is never relayed between nodes), or of another type
// than its row's.
var ErrNotRelayed = errors.New("command: result not relayed between nodes")
