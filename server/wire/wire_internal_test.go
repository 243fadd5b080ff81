package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var scannerSeed = flag.Uint64("scanner.seed", 0, "seed of TestScanner_AgreesWithEncodingJSON (0: time-based)")

// validJSON runs the scanner over one whole document.
func validJSON(b []byte) bool {
	s := &Scanner{b: b}
	if _, err := s.Raw(); err != nil {
		return false
	}
	s.WS()
	return s.i == len(b)
}

var scannerCorpus = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.5e-3`, `-12E+4`, `"a"`, `""`, ` {"a" : [1, 2, {"b": null}] } `,
	`"\u00e9\n\t\"\\\/"`, `"\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`, `{"a":{"b":{"c":[[[]]]}}}`,
	`{`, `}`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `01`, `1.`, `.5`, `-`, `1e`, `+1`, `tru`, `nul`, `"abc`,
	`"\x"`, `"\u12"`, "\"a\x01b\"", `"\udc00"`, `"\ud83d\ude00x\ud83d"`, "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"0123456789\xe2\x82\"", `[1 2]`, `{"a":1}{}`, `"é"`, "\"\xff\"", `[` + "\n" + `]`, `{"":""}`,
	// The range of a double: the largest, the first to round to Inf, an
	// underflow (0), zeros with huge exponents, 308 and 309 integer digits.
	`1.7976931348623157e308`, `-1.7976931348623158e308`, `1.7976931348623159e308`, `1e309`, `-1E+999999`,
	`[1e999999]`, `{"a":1e400}`, `1e-999999`, `0e999999`, `0.0000e400`, `0.001e310`, `1e000000000000000000000000308`,
	`1e000000000000000000000000309`, `1` + strings.Repeat("0", 307), `9` + strings.Repeat("9", 308),
	`-` + strings.Repeat("9", 309) + `.5`, `0.` + strings.Repeat("0", 400) + `1e700`,
	// The edges of the bounds that skip the parse (decode.go skipNumber).
	strings.Repeat("9", 209) + `e99`, strings.Repeat("9", 210) + `e99`, `-` + strings.Repeat("9", 209) + `E+99`,
	strings.Repeat("9", 308) + `.9`, strings.Repeat("9", 309), strings.Repeat("9", 308) + `e-99`,
	`1e-99`, `1E+99`, `1e100`, `1.5e+308`, `1.8e+308`, `-0.0e-0`, `[1e308, 1e309]`,
}

func TestScanner_AgreesWithEncodingJSON(t *testing.T) {
	seed := *scannerSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -scanner.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	// The oracle is what a Go SDK's decoder accepts, valid JSON whose
	// numbers all fit a float64, if its strings are Unicode (validUnicode).
	check := func(in []byte) {
		var v any
		if got, want := validJSON(in), json.Unmarshal(in, &v) == nil && validUnicode(in); got != want {
			t.Fatalf("%q: scanner valid=%v, encoding/json decodes and it is Unicode=%v", in, got, want)
		}
	}
	for _, in := range scannerCorpus {
		check([]byte(in))
	}
	const alphabet = `{}[]":,\ u0aeE+-.19tfnrld8c` + "\x01\xff\t\xc3\xa9"
	for range 20000 {
		in := []byte(scannerCorpus[rng.IntN(len(scannerCorpus))])
		for range 1 + rng.IntN(3) {
			switch op := rng.IntN(3); {
			case op == 0 && len(in) > 0:
				in[rng.IntN(len(in))] = alphabet[rng.IntN(len(alphabet))]
			case op == 1:
				i := rng.IntN(len(in) + 1)
				in = append(in[:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, in[i:]...)...)
			case len(in) > 0:
				i := rng.IntN(len(in))
				in = append(in[:i], in[i+1:]...)
			}
		}
		check(in)
	}
}

func TestScanner_StringsDecodeLikeEncodingJSON(t *testing.T) {
	for _, in := range []string{`"plain"`, `"\u00e9\n\t\"\\\/"`, `"\ud83d\ude00"`, `"\udbff\udfff"`, `"é\b\f\r"`, `"\ufffd"`, "\"\xef\xbf\xbd€😀\""} {
		var want string
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		s := &Scanner{b: []byte(in)}
		got, err := s.StringValue()
		if err != nil || got != want {
			t.Fatalf("%s: got %q (%v), want %q", in, got, err, want)
		}
	}
}

// TestScanner_RefusesInvalidUTF8: a string that is not UTF-8, raw or as an
// escaped half of a surrogate pair, is ErrInvalidUTF8 wherever it is (a
// value, a member name, deep in a payload), with the offset of the fault;
// encoding/json would take each (replacing the fault with U+FFFD).
func TestScanner_RefusesInvalidUTF8(t *testing.T) {
	for _, tc := range []struct {
		in  string
		off int
	}{
		{"\"a\xff\xfeb\"", 2}, {"\"\xc0\xaf\"", 1}, {"\"\xed\xa0\x80\"", 1}, {"\"\xf4\x90\x80\x80\"", 1},
		{"\"0123456789abcdef\xe2\x82\"", 17}, {"\"0123456\x80\"", 8}, {"\"01234567\x80\"", 9},
		{"{\"k\xff\":1}", 3}, {"[1,{\"a\":[\"\xc3\"]}]", 10}, {"\"\\n\xff\"", 3},
		{`"\ud800"`, 1}, {`"\ud800\u0041"`, 1}, {`"\udc00x"`, 1}, {`"ab\udfff\ud800"`, 3}, {`"\ud83d\ud83d"`, 1}, {`"\ud83d\n"`, 1},
	} {
		var v any
		if err := json.Unmarshal([]byte(tc.in), &v); err != nil {
			t.Fatalf("%q: encoding/json refuses it too: %v", tc.in, err)
		}
		s := &Scanner{b: []byte(tc.in)}
		_, err := s.Raw()
		var we *Error
		if !errors.As(err, &we) || !errors.Is(err, ErrInvalidUTF8) {
			t.Fatalf("%q: %v, want ErrInvalidUTF8", tc.in, err)
		}
		if want := fmt.Sprintf("offset %d", tc.off); !strings.Contains(we.Msg, want) {
			t.Fatalf("%q: %q does not name %s", tc.in, we.Msg, want)
		}
	}
}

// validUnicode reports whether the valid JSON document in is UTF-8 and
// escapes only whole surrogate pairs: what the scanner adds to
// encoding/json's checks. A backslash in valid JSON is always in a string.
func validUnicode(in []byte) bool {
	if !utf8.Valid(in) {
		return false
	}
	hex := func(i int) (rune, bool) {
		if i+6 > len(in) || in[i] != '\\' || in[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(in[i+2:i+6]), 16, 16)
		return rune(n), err == nil
	}
	for i := 0; i < len(in); i++ {
		if in[i] != '\\' {
			continue
		}
		r, ok := hex(i)
		if !ok {
			i++ // a two-byte escape
			continue
		}
		if r >= 0xdc00 && r <= 0xdfff {
			return false
		}
		if r >= 0xd800 && r <= 0xdbff {
			r2, ok := hex(i + 6)
			if !ok || r2 < 0xdc00 || r2 > 0xdfff {
				return false
			}
			i += 6
		}
		i += 5
	}
	return true
}

func TestAppendString_RoundTrips(t *testing.T) {
	for _, in := range []string{"", "plain", "quote\" back\\ nl\n tab\t ctl\x01\x1f", "é😀", "bad\xffutf8", "\u2028\u2029"} {
		out := AppendString(nil, in)
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%q encoded as %s: %v", in, out, err)
		}
		want := in
		if !utf8.ValidString(in) {
			want = string([]rune(in)) // invalid bytes become U+FFFD
		}
		if back != want {
			t.Fatalf("%q -> %s -> %q", in, out, back)
		}
	}
}

// FuzzScanner checks the scanner against encoding/json: the same documents
// decode (valid, every number within a float64, every string Unicode), and
// valid strings decode to the same text.
func FuzzScanner(f *testing.F) {
	for _, in := range scannerCorpus {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		valid := validJSON(in)
		var v any
		if want := json.Unmarshal(in, &v) == nil && validUnicode(in); valid != want {
			t.Fatalf("%q: scanner valid=%v, encoding/json decodes and it is Unicode=%v", in, valid, want)
		}
		if !valid || len(in) == 0 || in[0] != '"' {
			return
		}
		var want string
		if err := json.Unmarshal(in, &want); err != nil {
			t.Fatal(err)
		}
		if got, err := (&Scanner{b: in}).StringValue(); err != nil || got != want {
			t.Fatalf("%q: got %q (%v), want %q", in, got, err, want)
		}
	})
}

// plainRun never moves past a byte the byte-at-a-time loop stops at, and
// it stops exactly there when that byte lies in a whole word (the loop
// finishes a shorter tail), for every special byte at every offset and for
// bytes on either side of each boundary (0x1f/0x20, 0x21/0x22/0x23,
// 0x5b/0x5c/0x5d, 0x7f/0x80, 0xff).
func TestPlainRun_StopsAtTheFirstSpecialByte(t *testing.T) {
	naive := func(b []byte, i int) int {
		for i < len(b) && b[i] >= 0x20 && b[i] != '"' && b[i] != '\\' {
			i++
		}
		return i
	}
	check := func(b []byte, start int) {
		t.Helper()
		got, high := plainRun(b, start)
		want := naive(b, start)
		var wantHigh bool
		for _, c := range b[start:got] {
			wantHigh = wantHigh || c >= 0x80
		}
		if (high != 0) != wantHigh {
			t.Fatalf("%x from %d to %d: high %x, want a byte above 0x7f: %v", b, start, got, high, wantHigh)
		}
		if got < start || got > want || naive(b, got) != want {
			t.Fatalf("%x from %d: plainRun %d, byte loop %d", b, start, got, want)
		}
		word := start + (want-start)/8*8 // the word holding the stop
		if word+8 <= len(b) && got != want {
			t.Fatalf("%x from %d: plainRun stopped at %d, want %d (a whole word)", b, start, got, want)
		}
	}
	fill := []byte{'a', 0x20, 0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0xc3, 0xff}
	special := []byte{'"', '\\', 0x00, 0x01, 0x1f, '\n'}
	for n := 0; n <= 24; n++ {
		for _, f := range fill {
			b := bytes.Repeat([]byte{f}, n)
			for start := 0; start <= n; start++ {
				check(b, start)
			}
			for at := 0; at < n; at++ {
				for _, sp := range special {
					c := bytes.Clone(b)
					c[at] = sp
					// Every special byte above it too: a borrow from the first
					// must not hide it.
					for j := at + 1; j < n; j += 3 {
						c[j] = special[j%len(special)]
					}
					for start := 0; start <= at; start++ {
						check(c, start)
					}
				}
			}
		}
	}
}

// skipByCallbacks is Skip as it was before skipObject and skipArray: the
// containers through Object and Array.
func (s *Scanner) skipByCallbacks() error {
	switch s.Peek() {
	case '{':
		return s.Object(func(s *Scanner, _ []byte) error { return s.skipByCallbacks() })
	case '[':
		return s.Array(func(s *Scanner, _ int) error { return s.skipByCallbacks() })
	}
	return s.Skip()
}

func TestScanner_SkipAgreesWithObjectAndArray(t *testing.T) {
	corpus := append([]string{
		`{"a":`, `{"a"`, `{"a":1 `, `[1,`, `[`, `{"a\u00e9":1}`, `{"\x":1}`, `{1:2}`, `{"a":[1,{"b":]}`,
		`[{"a":1},{"b":[true,false,null]}]x`, `{"a":1}}`, `[[1],[2]]]`, strings.Repeat("[", maxDepth+1),
		strings.Repeat(`{"a":`, 50) + `1` + strings.Repeat("}", 50),
	}, scannerCorpus...)
	for _, in := range corpus {
		a, b := &Scanner{b: []byte(in)}, &Scanner{b: []byte(in)}
		got, want := a.Skip(), b.skipByCallbacks()
		if fmt.Sprint(got) != fmt.Sprint(want) || a.i != b.i || a.depth != b.depth {
			t.Errorf("%.60q: Skip = %v at %d (depth %d), by callbacks %v at %d (depth %d)", in, got, a.i, a.depth, want, b.i, b.depth)
		}
	}
}

// BenchmarkScanner_Numbers scans a payload made of numbers, the values whose
// range the scanner checks: integers, decimals and, one in four, exponents.
func BenchmarkScanner_Numbers(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i := range 1000 {
		if i > 0 {
			buf.WriteByte(',')
		}
		switch i % 4 {
		case 0:
			fmt.Fprintf(&buf, "%d", i*7919)
		case 1:
			fmt.Fprintf(&buf, "-%d.%03d", i, i%1000)
		case 2:
			fmt.Fprintf(&buf, "%d.5e-%d", i%10, i%300)
		default:
			fmt.Fprintf(&buf, "%d", int64(i)<<40)
		}
	}
	buf.WriteByte(']')
	in := buf.Bytes()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if !validJSON(in) {
			b.Fatal("invalid")
		}
	}
}
