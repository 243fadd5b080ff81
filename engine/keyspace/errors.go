package keyspace

import "github.com/queenmq/queen/internal/wire"

// ErrCorrupt is wrapped by every failure to parse a key or decode a record
// read from the store. It matches wire.ErrCorrupt (engine.ErrCorrupt).
var ErrCorrupt = wire.Corrupt("keyspace")
