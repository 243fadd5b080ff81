package bodies

import (
	"fmt"
	"unicode"

	"github.com/queenmq/queen/engine"
)

// Name checks a queue, partition or consumer group name a request brings:
// engine.ValidateName, and no invisible format character (Unicode category
// Cf: zero-width spaces and joiners, bidirectional overrides, the
// byte-order mark), which makes two names that print the same differ, or a
// name print backwards. This narrows docs/decisions.md C9 for names only.
// It is checked here, at the edge, and not in the engine: a name already
// stored, or a command already in the log, stays valid.
func Name(kind, name string) error {
	if err := engine.ValidateName(kind, name); err != nil {
		return err
	}
	for _, r := range name {
		if unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("%w: %s name has an invisible format character (%U)", engine.ErrInvalid, kind, r)
		}
	}
	return nil
}
