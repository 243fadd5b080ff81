package keyspace

import "errors"

// ErrCorrupt is wrapped by every failure to parse a key or decode a record
// read from the store.
var ErrCorrupt = errors.New("keyspace: corrupt")
