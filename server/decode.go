package server

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
)

// The request decoder is a small validating JSON scanner driven by the
// handler: it walks the body once, the handler picks the members it knows
// and skips the rest, and raw values (payloads) come back as sub-slices of
// the body, never re-encoded. The body a handler decodes is a buffer of its
// request's own (takeBody, inflight.go), never one fasthttp recycles, so
// slices of it may be kept and handed to the broker without a copy.

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

// scanner reads one JSON document.
type scanner struct {
	b     []byte
	i     int
	depth int
}

// decodeObject decodes a body that must be one JSON object, calling member
// for each key with the scanner positioned at its value; member must consume
// the value. An empty body is an error unless optional (docs/decisions.md C9: it means {}).
func decodeObject(body []byte, optional bool, member func(s *scanner, key []byte) error) error {
	s := &scanner{b: body}
	s.ws()
	if s.i == len(s.b) {
		if optional {
			return nil
		}
		return errEmptyBody
	}
	if s.b[s.i] != '{' {
		if err := s.skip(); err != nil {
			return err
		}
		return badRequest("request body must be a JSON object")
	}
	if err := s.object(member); err != nil {
		return err
	}
	s.ws()
	if s.i != len(s.b) {
		return s.syntax("data after the top-level value")
	}
	return nil
}

func (s *scanner) syntax(msg string) error {
	return invalidJSON(fmt.Sprintf("%s at offset %d", msg, s.i))
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the first byte of the next value (0 at the end).
func (s *scanner) peek() byte {
	s.ws()
	if s.i == len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// object reads an object, calling member for each key.
func (s *scanner) object(member func(s *scanner, key []byte) error) error {
	if s.peek() != '{' {
		return s.syntax("expected an object")
	}
	if s.depth++; s.depth > maxDepth {
		return s.syntax("too deeply nested")
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.syntax("expected a member name")
		}
		key, err := s.stringBytes()
		if err != nil {
			return err
		}
		if s.peek() != ':' {
			return s.syntax("expected ':'")
		}
		s.i++
		if s.peek() == 0 {
			return s.syntax("unexpected end of input")
		}
		if err := member(s, key); err != nil {
			return err
		}
		switch s.peek() {
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

// array reads an array, calling elem for each element.
func (s *scanner) array(elem func(s *scanner, i int) error) error {
	if s.peek() != '[' {
		return s.syntax("expected an array")
	}
	if s.depth++; s.depth > maxDepth {
		return s.syntax("too deeply nested")
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		s.depth--
		return nil
	}
	for n := 0; ; n++ {
		if s.peek() == 0 {
			return s.syntax("unexpected end of input")
		}
		if err := elem(s, n); err != nil {
			return err
		}
		switch s.peek() {
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

// skip validates and skips one value.
func (s *scanner) skip() error {
	switch c := s.peek(); {
	case c == '{':
		return s.object(func(s *scanner, _ []byte) error { return s.skip() })
	case c == '[':
		return s.array(func(s *scanner, _ int) error { return s.skip() })
	case c == '"':
		return s.skipString()
	case c == '-' || ('0' <= c && c <= '9'):
		return s.skipNumber()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == 0:
		return s.syntax("unexpected end of input")
	default:
		return s.syntax(fmt.Sprintf("invalid character %q", c))
	}
}

// raw validates one value and returns its bytes.
func (s *scanner) raw() ([]byte, error) {
	s.ws()
	start := s.i
	if err := s.skip(); err != nil {
		return nil, err
	}
	return s.b[start:s.i], nil
}

func (s *scanner) literal(lit string) error {
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
func (s *scanner) skipNumber() error {
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
func (s *scanner) inRange(start int) error {
	if f, err := strconv.ParseFloat(string(s.b[start:s.i]), 64); err != nil && math.IsInf(f, 0) {
		return invalidJSON(fmt.Sprintf("number at offset %d is beyond the range of a double (±1.8e308)", start))
	}
	return nil
}

// skipString validates and skips a string.
func (s *scanner) skipString() error {
	_, err := s.scanString()
	return err
}

// scanString moves past a string (the scanner is at its opening quote) and
// reports whether it holds escapes.
func (s *scanner) scanString() (escaped bool, err error) {
	b, i := s.b, s.i+1
	for {
		i = plainRun(b, i)
		for i < len(b) && b[i] >= 0x20 && b[i] != '"' && b[i] != '\\' {
			i++
		}
		if i >= len(b) {
			s.i = i
			return escaped, s.syntax("unterminated string")
		}
		switch b[i] {
		case '"':
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
				if i+6 > len(b) {
					s.i = i
					return escaped, s.syntax("invalid \\u escape")
				}
				for _, h := range b[i+2 : i+6] {
					if _, ok := unhex(h); !ok {
						s.i = i
						return escaped, s.syntax("invalid \\u escape")
					}
				}
				i += 6
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

// plainRun moves i past the string bytes that need no look (not '"', '\\'
// or a control character) eight at a time, and stops at or before the
// first one that does. Payloads are mostly long strings, and the byte loop
// was the largest part of a leader's push decoding. For a word w,
// (x - 0x01..) &^ x & 0x80.. flags the bytes of x that are zero, and
// (w - 0x20..) &^ w & 0x80.. those below 0x20; a borrow can flag a byte
// above a true match but never one below it, so the lowest flag is exact.
func plainRun(b []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for i+8 <= len(b) {
		w := binary.LittleEndian.Uint64(b[i:])
		q, bs := w^(ones*'"'), w^(ones*'\\')
		if m := ((q-ones)&^q | (bs-ones)&^bs | (w-ones*0x20)&^w) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	return i
}

// stringBytes reads a string value (the scanner is at its quote): a slice
// of the input when it holds no escapes, else a decoded copy. The caller
// copies what it keeps.
func (s *scanner) stringBytes() ([]byte, error) {
	s.ws()
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

// stringValue reads a string value (the scanner is at its quote).
func (s *scanner) stringValue() (string, error) {
	b, err := s.stringBytes()
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
		v, _ := unhex(c)
		r = r<<4 | rune(v)
	}
	return r
}

func unhex(c byte) (byte, bool) {
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

// optString reads a string member: null is absent. Any other type is a 400
// naming the member.
func (s *scanner) optString(name string) (v string, present bool, err error) {
	return s.optStringLike(name, "")
}

// optStringLike is optString returning prev, without allocating, when the
// value spells it: the items of a batch repeat their queue, partition,
// group, lease and status.
func (s *scanner) optStringLike(name, prev string) (v string, present bool, err error) {
	switch s.peek() {
	case '"':
		b, err := s.stringBytes()
		if string(b) == prev {
			return prev, true, err
		}
		return string(b), true, err
	case 'n':
		return "", false, s.literal("null")
	}
	if err := s.skip(); err != nil {
		return "", false, err
	}
	return "", false, badRequest(name + " must be a string")
}

// optInt reads an integer member (null is absent). Integral floats and
// numeric strings are accepted; anything else is a 400 naming the member.
func (s *scanner) optInt(name string) (v int64, present bool, err error) {
	var text string
	switch c := s.peek(); {
	case c == 'n':
		return 0, false, s.literal("null")
	case c == '"':
		if text, err = s.stringValue(); err != nil {
			return 0, false, err
		}
	case c == '-' || ('0' <= c && c <= '9'):
		start := s.i
		if err := s.skipNumber(); err != nil {
			return 0, false, err
		}
		text = string(s.b[start:s.i])
	default:
		if err := s.skip(); err != nil {
			return 0, false, err
		}
		return 0, false, badRequest(name + " must be an integer")
	}
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return n, true, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || f != float64(int64(f)) {
		return 0, false, badRequest(name + " must be an integer")
	}
	return int64(f), true, nil
}

// optBool reads a boolean member (null is absent); 1/0 and "true"/"false"
// are accepted too.
func (s *scanner) optBool(name string) (v, present bool, err error) {
	switch s.peek() {
	case 't':
		return true, true, s.literal("true")
	case 'f':
		return false, true, s.literal("false")
	case 'n':
		return false, false, s.literal("null")
	}
	raw, err := s.raw()
	if err != nil {
		return false, false, err
	}
	switch string(raw) {
	case "1", `"true"`, `"1"`:
		return true, true, nil
	case "0", `"false"`, `"0"`:
		return false, true, nil
	}
	return false, false, badRequest(name + " must be a boolean")
}

// optID reads a UUID string member.
func (s *scanner) optID(name string) (id engine.ID, present bool, err error) {
	v, present, err := s.optString(name)
	if err != nil || !present || v == "" {
		return id, false, err
	}
	id, err = engine.ParseID(v)
	if err != nil {
		return id, false, badRequest(name + " must be a UUID")
	}
	return id, true, nil
}

// optTime reads an ISO-8601 timestamp member as unix microseconds.
func (s *scanner) optTime(name string) (us int64, present bool, err error) {
	v, present, err := s.optString(name)
	if err != nil || !present {
		return 0, false, err
	}
	t, ok := parseTime(v)
	if !ok {
		return 0, false, badRequest(name + " must be an ISO-8601 timestamp")
	}
	return engine.Micros(t), true, nil
}

// parseTime accepts the ISO-8601 forms the SDKs send: RFC 3339 with any
// fraction and offset (JS toISOString, Go RFC3339), a space instead of T,
// no offset (UTC, Python isoformat), or a bare date.
func parseTime(v string) (time.Time, bool) {
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

// Query-string helpers (docs/api.md §1.2): booleans are true only for "true" or
// "1" (what the SDKs send); an integer parameter that is present must be a
// base-10 integer at or above its minimum, else the request is a 400 naming
// it (a mistyped batch=1.5 or batch=-5 is refused, not read as the default).

func queryString(args *fasthttp.Args, key string) string {
	return string(args.Peek(key))
}

func queryBool(args *fasthttp.Args, key string, def bool) bool {
	v := args.Peek(key)
	if v == nil {
		return def
	}
	return string(v) == "true" || string(v) == "1"
}

// queryInt reads an optional integer parameter: def when absent or empty,
// a 400 when it is not an integer of at least low. Callers cap the high end
// where a route has one (a larger value is not a mistake, only more than
// the route serves at once).
func queryInt(args *fasthttp.Args, key string, def, low int64) (int64, error) {
	v := args.Peek(key)
	if len(v) == 0 {
		return def, nil
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < low {
		return def, badRequest(fmt.Sprintf("%s must be an integer of at least %d", key, low))
	}
	return n, nil
}

// pageArgs reads limit (default def, at least 1, capped at most) and offset
// (default 0, at least 0).
func pageArgs(args *fasthttp.Args, def, most int64) (limit, offset int, err error) {
	l, err := queryInt(args, "limit", def, 1)
	if err != nil {
		return 0, 0, err
	}
	o, err := queryInt(args, "offset", 0, 0)
	return int(min(l, most)), int(min(o, 1<<30)), err
}

// queryTime reads an optional ISO-8601 timestamp; an unparsable one is a 400.
func queryTime(args *fasthttp.Args, key string) (int64, error) {
	v := args.Peek(key)
	if len(v) == 0 {
		return 0, nil
	}
	t, ok := parseTime(string(v))
	if !ok {
		return 0, badRequest(key + " must be an ISO-8601 timestamp")
	}
	return engine.Micros(t), nil
}
