package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/queenmq/queen/engine"
)

// The request decoder is a small validating JSON scanner driven by the
// handler: it walks the body once, the handler picks the members it knows
// and skips the rest, and raw values (payloads) come back as sub-slices of
// the body, never re-encoded. The body a handler decodes is a buffer of its
// request's own (server/intake's Take), never one fasthttp recycles, so
// slices of it may be kept and handed to the broker without a copy.

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

// Scanner reads one JSON document.
type Scanner struct {
	b     []byte
	i     int
	depth int
}

// DecodeObject decodes a body that must be one JSON object, calling member
// for each key with the scanner positioned at its value; member must consume
// the value. An empty body is an error unless optional (docs/decisions.md C9: it means {}).
func DecodeObject(body []byte, optional bool, member func(s *Scanner, key []byte) error) error {
	s := &Scanner{b: body}
	s.WS()
	if s.i == len(s.b) {
		if optional {
			return nil
		}
		return ErrEmptyBody
	}
	if s.b[s.i] != '{' {
		if err := s.Skip(); err != nil {
			return err
		}
		return BadRequest("request body must be a JSON object")
	}
	if err := s.Object(member); err != nil {
		return err
	}
	s.WS()
	if s.i != len(s.b) {
		return s.syntax("data after the top-level value")
	}
	return nil
}

func (s *Scanner) syntax(msg string) error {
	return invalidJSON(fmt.Sprintf("%s at offset %d", msg, s.i))
}

func (s *Scanner) WS() {
	// Most bodies are compact JSON: one comparison settles the usual case.
	if s.i < len(s.b) && s.b[s.i] > ' ' {
		return
	}
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// Peek returns the first byte of the next value (0 at the end).
func (s *Scanner) Peek() byte {
	if s.i < len(s.b) && s.b[s.i] > ' ' {
		return s.b[s.i] // no whitespace to skip: see WS
	}
	s.WS()
	if s.i == len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// Object reads an Object, calling member for each key.
func (s *Scanner) Object(member func(s *Scanner, key []byte) error) error {
	if s.Peek() != '{' {
		return s.syntax("expected an object")
	}
	if s.depth++; s.depth > maxDepth {
		return s.syntax("too deeply nested")
	}
	s.i++
	if s.Peek() == '}' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if s.Peek() != '"' {
			return s.syntax("expected a member name")
		}
		key, err := s.StringBytes()
		if err != nil {
			return err
		}
		if s.Peek() != ':' {
			return s.syntax("expected ':'")
		}
		s.i++
		if s.Peek() == 0 {
			return s.syntax("unexpected end of input")
		}
		if err := member(s, key); err != nil {
			return err
		}
		switch s.Peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			return nil
		default:
			return s.syntax("expected ',' or '}'")
		}
	}
}

// Array reads an Array, calling elem for each element.
func (s *Scanner) Array(elem func(s *Scanner, i int) error) error {
	if s.Peek() != '[' {
		return s.syntax("expected an array")
	}
	if s.depth++; s.depth > maxDepth {
		return s.syntax("too deeply nested")
	}
	s.i++
	if s.Peek() == ']' {
		s.i++
		s.depth--
		return nil
	}
	for n := 0; ; n++ {
		if s.Peek() == 0 {
			return s.syntax("unexpected end of input")
		}
		if err := elem(s, n); err != nil {
			return err
		}
		switch s.Peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			return nil
		default:
			return s.syntax("expected ',' or ']'")
		}
	}
}

// Skip validates and skips one value.
func (s *Scanner) Skip() error {
	switch c := s.Peek(); {
	case c == '"':
		return s.skipString()
	case c == '{':
		return s.skipObject()
	case c == '[':
		return s.skipArray()
	case c == '-' || ('0' <= c && c <= '9'):
		return s.skipNumber()
	case c == 't':
		return s.Literal("true")
	case c == 'f':
		return s.Literal("false")
	case c == 'n':
		return s.Literal("null")
	case c == 0:
		return s.syntax("unexpected end of input")
	default:
		return s.syntax(fmt.Sprintf("invalid character %q", c))
	}
}

// skipObject is Object(Skip each member) without the callbacks: the
// payloads a push carries are mostly objects of short members, and the
// member closure and the key's StringBytes were a large part of their scan.
// It accepts and refuses exactly what Object does, with the same errors.
func (s *Scanner) skipObject() error {
	if s.depth++; s.depth > maxDepth {
		return s.syntax("too deeply nested")
	}
	s.i++
	if s.Peek() == '}' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if s.Peek() != '"' {
			return s.syntax("expected a member name")
		}
		if _, err := s.scanString(); err != nil {
			return err
		}
		if s.Peek() != ':' {
			return s.syntax("expected ':'")
		}
		s.i++
		if err := s.Skip(); err != nil {
			return err
		}
		switch s.Peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			return nil
		default:
			return s.syntax("expected ',' or '}'")
		}
	}
}

// skipArray is Array(Skip each element) without the callbacks, as skipObject.
func (s *Scanner) skipArray() error {
	if s.depth++; s.depth > maxDepth {
		return s.syntax("too deeply nested")
	}
	s.i++
	if s.Peek() == ']' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if err := s.Skip(); err != nil {
			return err
		}
		switch s.Peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			return nil
		default:
			return s.syntax("expected ',' or ']'")
		}
	}
}

// Raw validates one value and returns its bytes.
func (s *Scanner) Raw() ([]byte, error) {
	s.WS()
	start := s.i
	if err := s.Skip(); err != nil {
		return nil, err
	}
	return s.b[start:s.i], nil
}

func (s *Scanner) Literal(lit string) error {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return s.syntax("invalid literal")
	}
	s.i += len(lit)
	return nil
}

// skipNumber validates and skips a number. A number beyond a double's
// range (it would round to ±Inf, as 1e999999 does) is refused: the bytes
// would be stored as sent and handed to every consumer, whose JSON decoder
// (encoding/json into a float64, JavaScript) fails on or distorts it, and
// Queen's PostgreSQL refuses it at push. Underflow (1e-999999) rounds to 0
// in every decoder and is kept.
func (s *Scanner) skipNumber() error {
	start := s.i
	if s.b[s.i] == '-' {
		s.i++
	}
	digits := func() int {
		n := 0
		for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case digits() == 0:
		s.i = start
		return s.syntax("invalid number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return s.syntax("invalid number")
		}
	}
	// A double reaches 1.8e308, so a number of at most 308 characters
	// before its exponent, with a negative exponent or none, is within
	// range without a parse, and so is one of at most 209 with a positive
	// exponent of at most two digits (below 10^(209+99)): only a long
	// number or a large exponent pays for inRange. The bound counts a sign
	// and a fraction too, which only sends more to inRange.
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		mantissa, most := s.i-start, 308
		s.i++
		neg := s.i < len(s.b) && s.b[s.i] == '-'
		if neg || s.i < len(s.b) && s.b[s.i] == '+' {
			s.i++
		}
		n := digits()
		switch {
		case n == 0:
			return s.syntax("invalid number")
		case neg:
		case n > 2:
			return s.inRange(start)
		default:
			most = 209
		}
		if mantissa > most {
			return s.inRange(start)
		}
		return nil
	}
	if s.i-start > 308 {
		return s.inRange(start)
	}
	return nil
}

// inRange refuses the number that starts at start and ends at s.i if it
// rounds to ±Inf as a float64.
func (s *Scanner) inRange(start int) error {
	if f, err := strconv.ParseFloat(string(s.b[start:s.i]), 64); err != nil && math.IsInf(f, 0) {
		return invalidJSON(fmt.Sprintf("number at offset %d is beyond the range of a double (±1.8e308)", start))
	}
	return nil
}

// skipString validates and skips a string.
func (s *Scanner) skipString() error {
	_, err := s.scanString()
	return err
}

// scanString moves past a string (the scanner is at its opening quote) and
// reports whether it holds escapes. A string that is not UTF-8 (RFC 8259
// §8.1: a stray or truncated sequence, an overlong or surrogate encoding)
// or that escapes half of a UTF-16 surrogate pair is refused with
// ErrInvalidUTF8: its bytes would be stored as sent and handed to every
// consumer in a reply that is not JSON (one bad payload fails the decoding
// of the whole batch it is popped in), or decoded to U+FFFD so that
// distinct ids collide. Queen's PostgreSQL refuses both.
func (s *Scanner) scanString() (escaped bool, err error) {
	b, i := s.b, s.i+1
	// high collects the top bit of every plain byte passed: zero while
	// the string is ASCII, which then needs no UTF-8 check.
	var high uint64
	for {
		var h uint64
		i, h = plainRun(b, i)
		high |= h
		for i < len(b) && b[i] >= 0x20 && b[i] != '"' && b[i] != '\\' {
			high |= uint64(b[i] & 0x80)
			i++
		}
		if i >= len(b) {
			s.i = i
			return escaped, s.syntax("unterminated string")
		}
		switch b[i] {
		case '"':
			if high != 0 && !utf8.Valid(b[s.i+1:i]) {
				return escaped, s.badUTF8(b[s.i+1 : i])
			}
			s.i = i + 1
			return escaped, nil
		case '\\':
			escaped = true
			if i+1 >= len(b) {
				s.i = i
				return escaped, s.syntax("unterminated string")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				r, ok := hexEscape(b, i)
				if !ok {
					s.i = i
					return escaped, s.syntax("invalid \\u escape")
				}
				i += 6
				if utf16.IsSurrogate(r) {
					// Only a high half followed by an escaped low half
					// is a character.
					r2, ok := hexEscape(b, i)
					if r >= 0xdc00 || !ok || r2 < 0xdc00 || r2 > 0xdfff {
						s.i = i - 6
						return escaped, &Error{Kind: ErrInvalidUTF8, Msg: fmt.Sprintf(
							"Invalid UTF-8: \\u%04x at offset %d is half of a UTF-16 surrogate pair", r, s.i)}
					}
					i += 6
				}
			default:
				s.i = i
				return escaped, s.syntax("invalid escape")
			}
		default:
			s.i = i
			return escaped, s.syntax("control character in string")
		}
	}
}

// hexEscape reads the \uXXXX escape at b[i:], if there is one.
func hexEscape(b []byte, i int) (rune, bool) {
	if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
		return 0, false
	}
	for _, h := range b[i+2 : i+6] {
		if _, ok := Unhex(h); !ok {
			return 0, false
		}
	}
	return hex4(b[i+2 : i+6]), true
}

// badUTF8 is the ErrInvalidUTF8 of the string body in, which is not
// UTF-8, naming the offset of its first bad byte.
func (s *Scanner) badUTF8(in []byte) error {
	at := 0
	for at < len(in) {
		r, n := utf8.DecodeRune(in[at:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		at += n
	}
	off := s.i + 1 + at
	s.i = off
	return &Error{Kind: ErrInvalidUTF8, Msg: fmt.Sprintf("Invalid UTF-8: byte 0x%02x at offset %d is not part of a UTF-8 character", s.b[off], off)}
}

// plainRun moves i past the string bytes that need no look (not '"', '\\'
// or a control character) eight at a time, and stops at or before the
// first one that does. Payloads are mostly long strings, and the byte loop
// was the largest part of a leader's push decoding. For a word w,
// (x - 0x01..) &^ x & 0x80.. flags the bytes of x that are zero, and
// (w - 0x20..) &^ w & 0x80.. those below 0x20; a borrow can flag a byte
// above a true match but never one below it, so the lowest flag is exact.
// high has the top bit of each byte passed (nonzero if one is not ASCII).
func plainRun(b []byte, i int) (next int, high uint64) {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for i+8 <= len(b) {
		w := binary.LittleEndian.Uint64(b[i:])
		q, bs := w^(ones*'"'), w^(ones*'\\')
		if m := ((q-ones)&^q | (bs-ones)&^bs | (w-ones*0x20)&^w) & highs; m != 0 {
			n := bits.TrailingZeros64(m) / 8
			return i + n, (high | w&(uint64(1)<<(8*n)-1)) & highs
		}
		high |= w
		i += 8
	}
	return i, high & highs
}

// StringBytes reads a string value (the scanner is at its quote): a slice
// of the input when it holds no escapes, else a decoded copy. The caller
// copies what it keeps.
func (s *Scanner) StringBytes() ([]byte, error) {
	s.WS()
	start := s.i
	escaped, err := s.scanString()
	if err != nil {
		return nil, err
	}
	inner := s.b[start+1 : s.i-1]
	if escaped {
		return []byte(unescape(inner)), nil
	}
	return inner, nil
}

// StringValue reads a string value (the scanner is at its quote).
func (s *Scanner) StringValue() (string, error) {
	b, err := s.StringBytes()
	return string(b), err
}

// unescape decodes the escapes of a validated string body.
func unescape(in []byte) string {
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); {
		c := in[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch in[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(in[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if i+6 <= len(in) && in[i] == '\\' && in[i+1] == 'u' {
					r2 = hex4(in[i+2 : i+6])
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // '"', '\\', '/'
			out = append(out, in[i+1])
		}
		i += 2
	}
	return string(out)
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		v, _ := Unhex(c)
		r = r<<4 | rune(v)
	}
	return r
}

func Unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// OptString reads a string member: null is absent. Any other type is a 400
// naming the member.
func (s *Scanner) OptString(name string) (v string, present bool, err error) {
	return s.OptStringLike(name, "")
}

// OptStringLike is optString returning prev, without allocating, when the
// value spells it: the items of a batch repeat their queue, partition,
// group, lease and status.
func (s *Scanner) OptStringLike(name, prev string) (v string, present bool, err error) {
	switch s.Peek() {
	case '"':
		b, err := s.StringBytes()
		if string(b) == prev {
			return prev, true, err
		}
		return string(b), true, err
	case 'n':
		return "", false, s.Literal("null")
	}
	if err := s.Skip(); err != nil {
		return "", false, err
	}
	return "", false, BadRequest(name + " must be a string")
}

// OptInt reads an integer member (null is absent). Integral floats and
// numeric strings are accepted; anything else is a 400 naming the member.
func (s *Scanner) OptInt(name string) (v int64, present bool, err error) {
	var text string
	switch c := s.Peek(); {
	case c == 'n':
		return 0, false, s.Literal("null")
	case c == '"':
		if text, err = s.StringValue(); err != nil {
			return 0, false, err
		}
	case c == '-' || ('0' <= c && c <= '9'):
		start := s.i
		if err := s.skipNumber(); err != nil {
			return 0, false, err
		}
		text = string(s.b[start:s.i])
	default:
		if err := s.Skip(); err != nil {
			return 0, false, err
		}
		return 0, false, BadRequest(name + " must be an integer")
	}
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return n, true, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || f != float64(int64(f)) {
		return 0, false, BadRequest(name + " must be an integer")
	}
	return int64(f), true, nil
}

// OptBool reads a boolean member (null is absent); 1/0 and "true"/"false"
// are accepted too.
func (s *Scanner) OptBool(name string) (v, present bool, err error) {
	switch s.Peek() {
	case 't':
		return true, true, s.Literal("true")
	case 'f':
		return false, true, s.Literal("false")
	case 'n':
		return false, false, s.Literal("null")
	}
	raw, err := s.Raw()
	if err != nil {
		return false, false, err
	}
	switch string(raw) {
	case "1", `"true"`, `"1"`:
		return true, true, nil
	case "0", `"false"`, `"0"`:
		return false, true, nil
	}
	return false, false, BadRequest(name + " must be a boolean")
}

// OptID reads a UUID string member.
func (s *Scanner) OptID(name string) (id engine.ID, present bool, err error) {
	v, present, err := s.OptString(name)
	if err != nil || !present || v == "" {
		return id, false, err
	}
	id, err = engine.ParseID(v)
	if err != nil {
		return id, false, BadRequest(name + " must be a UUID")
	}
	return id, true, nil
}

// OptTime reads an ISO-8601 timestamp member as unix microseconds.
func (s *Scanner) OptTime(name string) (us int64, present bool, err error) {
	v, present, err := s.OptString(name)
	if err != nil || !present {
		return 0, false, err
	}
	t, ok := ParseTime(v)
	if !ok {
		return 0, false, BadRequest(name + " must be an ISO-8601 timestamp")
	}
	return engine.Micros(t), true, nil
}

// ParseTime accepts the ISO-8601 forms the SDKs send: RFC 3339 with any
// fraction and offset (JS toISOString, Go RFC3339), a space instead of T,
// no offset (UTC, Python isoformat), or a bare date.
func ParseTime(v string) (time.Time, bool) {
	for _, layout := range [...]string{
		time.RFC3339Nano,
		"2006-01-02T15:04:05.999999999",
		"2006-01-02T15:04:05.999999999Z0700",
		"2006-01-02 15:04:05.999999999Z07:00",
		"2006-01-02 15:04:05.999999999",
		"2006-01-02",
	} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// NewScanner returns a scanner at the start of b.
func NewScanner(b []byte) *Scanner { return &Scanner{b: b} }

// Done skips trailing whitespace and reports whether the scanner is at the
// end of its input.
func (s *Scanner) Done() bool {
	s.WS()
	return s.i == len(s.b)
}

// StringFast reads a string value (the scanner is at its quote) that needs
// no unescaping, such as base64, without validating its characters: the
// closing quote is found with IndexByte. A string holding a backslash takes
// StringBytes' checked path.
func (s *Scanner) StringFast() ([]byte, error) {
	rest := s.b[s.i+1:]
	if n := bytes.IndexByte(rest, '"'); n >= 0 && bytes.IndexByte(rest[:n], '\\') < 0 {
		s.i += n + 2
		return rest[:n], nil
	}
	return s.StringBytes()
}

// OneValue reports whether b is exactly one JSON value, whitespace around it
// allowed.
func OneValue(b []byte) bool {
	s := Scanner{b: b}
	return s.Skip() == nil && s.Done()
}
