package segment

import (
	"errors"

	"github.com/queenmq/queen/internal/wire"
)

// ErrCorrupt is wrapped by every error of ReadHeader and Decode: the bytes are
// not a valid segment (short, bad magic, unknown version or codec, CRC
// mismatch, out-of-range field, malformed frame, trailing bytes). It
// matches wire.ErrCorrupt (engine.ErrCorrupt).
var ErrCorrupt = wire.Corrupt("segment")

// ErrInvalid is wrapped by every error of Encode and EncodeCodec: the frames
// cannot be written as a segment (none, a negative or overflowing base, more
// than MaxRawLen raw bytes, an unknown codec). It signals a bug in the caller,
// never bad data.
var ErrInvalid = errors.New("segment: invalid")
