package backup

import "errors"

var (
	// ErrCorrupt marks a file that is not a complete, intact backup: a bad
	// checksum, a frame out of place, counts that do not add up, or a
	// truncation (every read failure of the file wraps it).
	ErrCorrupt = errors.New("backup: corrupt or incomplete file")
	// ErrNewer is returned for a file whose format version is newer than
	// this binary reads.
	ErrNewer = errors.New("backup: format newer than this binary reads")
)
