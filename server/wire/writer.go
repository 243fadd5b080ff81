package wire

import (
	"strconv"
	"unicode/utf8"

	"github.com/queenmq/queen/engine"
)

// Writer appends one JSON document to a byte slice without reflection.
// It tracks only whether the current level already holds a value, which is
// all it needs to place commas: every method takes the member's key ("" for
// an array element or the top-level value).
type Writer struct {
	b     []byte
	comma bool
}

// Field writes the separator and, in an object, the key.
func (w *Writer) Field(k string) {
	if w.comma {
		w.b = append(w.b, ',')
	}
	if k != "" {
		w.b = AppendString(w.b, k)
		w.b = append(w.b, ':')
	}
	w.comma = true
}

func (w *Writer) Object(k string) {
	w.Field(k)
	w.b = append(w.b, '{')
	w.comma = false
}

func (w *Writer) EndObject() {
	w.b = append(w.b, '}')
	w.comma = true
}

func (w *Writer) Array(k string) {
	w.Field(k)
	w.b = append(w.b, '[')
	w.comma = false
}

func (w *Writer) EndArray() {
	w.b = append(w.b, ']')
	w.comma = true
}

func (w *Writer) Str(k, v string) {
	w.Field(k)
	w.b = AppendString(w.b, v)
}

// StrOrNull writes null for "".
func (w *Writer) StrOrNull(k, v string) {
	if v == "" {
		w.Null(k)
		return
	}
	w.Str(k, v)
}

func (w *Writer) Int(k string, v int64) {
	w.Field(k)
	w.b = strconv.AppendInt(w.b, v, 10)
}

func (w *Writer) Float(k string, v float64) {
	w.Field(k)
	w.b = strconv.AppendFloat(w.b, v, 'f', -1, 64)
}

func (w *Writer) Bool(k string, v bool) {
	w.Field(k)
	w.b = strconv.AppendBool(w.b, v)
}

func (w *Writer) Null(k string) {
	w.Field(k)
	w.b = append(w.b, "null"...)
}

// Raw writes an already valid JSON value (a stored payload) as is.
func (w *Writer) Raw(k string, v []byte) {
	w.Field(k)
	if len(v) == 0 {
		v = []byte("null")
	}
	w.b = append(w.b, v...)
}

func (w *Writer) ID(k string, v engine.ID) {
	w.Field(k)
	w.b = append(w.b, '"')
	w.b = engine.AppendID(w.b, v)
	w.b = append(w.b, '"')
}

// Time layouts on the wire (docs/api.md §1.3): popped messages carry
// microseconds, everything else milliseconds.
const (
	layoutMicros = "2006-01-02T15:04:05.000000Z"
	layoutMillis = "2006-01-02T15:04:05.000Z"
)

// TimeMicros writes unix microseconds as ISO-8601 UTC with microseconds, or
// null for 0.
func (w *Writer) TimeMicros(k string, us int64) {
	w.TimeLayout(k, us, layoutMicros)
}

// TimeMillis writes unix microseconds as ISO-8601 UTC with milliseconds, or
// null for 0.
func (w *Writer) TimeMillis(k string, us int64) {
	w.TimeLayout(k, us, layoutMillis)
}

func (w *Writer) TimeLayout(k string, us int64, layout string) {
	if us == 0 {
		w.Null(k)
		return
	}
	w.Field(k)
	w.b = append(w.b, '"')
	w.b = engine.Time(us).AppendFormat(w.b, layout)
	w.b = append(w.b, '"')
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD so
// the output is always valid JSON.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			// Valid JSON, but not valid JavaScript in older engines.
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Bytes returns the document written so far.
func (w *Writer) Bytes() []byte { return w.b }

// NewWriter returns a writer that appends to buf[:0], reusing its room.
func NewWriter(buf []byte) Writer { return Writer{b: buf[:0]} }
