package envelope

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server/wire"
)

// The envelope's sizes are part of the stored format, shared with Queen's
// C++ and Rust brokers — never change them.
const (
	keyHexLen = 64 // QUEEN_ENCRYPTION_KEY: a 32-byte AES-256 key in hex
	ivLen     = 16 // random bytes stored in "iv"
	nonceLen  = 12 // of those, the GCM nonce: iv[:12]
	tagLen    = 16 // the GCM tag, stored apart in "authTag"
)

// base64Std is the envelope's base64: standard alphabet, with padding.
// Strict refuses non-zero trailing bits, so one envelope has one spelling.
var base64Std = base64.StdEncoding.Strict()

// minLen is the shortest envelope: an empty ciphertext, a 16-byte iv
// and a 16-byte tag (24 base64 characters each), without whitespace.
const minLen = len(`{"encrypted":"","iv":"","authTag":""}`) + 2*24

// errNotEnvelope stops the envelope parser at the first member that rules
// the payload out. It never leaves this file.
var errNotEnvelope = errors.New("envelope: not an encryption envelope")

// ParseKey decodes QUEEN_ENCRYPTION_KEY: exactly 64 hex characters
// (surrounding whitespace, such as the newline of a key file, is ignored).
// Its errors name the variable and the expected format, and never quote the
// key: they end up in logs and on the operator's terminal.
func ParseKey(text string) ([]byte, error) {
	text = strings.TrimSpace(text)
	if len(text) != keyHexLen {
		return nil, fmt.Errorf("%w: QUEEN_ENCRYPTION_KEY must be %d hex characters (a 32-byte AES-256 key), got %d characters",
			engine.ErrInvalid, keyHexLen, len(text))
	}
	key, err := hex.DecodeString(text)
	if err != nil {
		return nil, fmt.Errorf("%w: QUEEN_ENCRYPTION_KEY must be %d hex characters (a 32-byte AES-256 key), got other characters",
			engine.ErrInvalid, keyHexLen)
	}
	return key, nil
}

// Cipher seals payloads into the envelope and opens them. A nil
// *Cipher is "no key": Open reports false for everything, and Seal is
// never called (the push path checks first).
type Cipher struct {
	aead cipher.AEAD // AES-256-GCM, 12-byte nonce, 16-byte tag
	// undecryptable counts sealed payloads that did not open (wrong or
	// rotated key, tampering); they are returned as stored.
	undecryptable *metrics.Counter
}

// NewCipher builds the cipher for a 32-byte key. Sealed payloads that do
// not open are counted in set as queen_payload_decrypt_failures_total.
func NewCipher(key []byte, set *metrics.Set) (*Cipher, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("%w: encryption key must be 32 bytes, got %d", engine.ErrInvalid, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("envelope: encryption key: %w", err)
	}
	aead, err := cipher.NewGCM(block) // the standard 12-byte nonce and 16-byte tag
	if err != nil {
		return nil, fmt.Errorf("envelope: encryption key: %w", err)
	}
	return &Cipher{aead: aead,
		undecryptable: set.GetOrCreateCounter(`queen_payload_decrypt_failures_total`)}, nil
}

// Seal returns the envelope of plain under 16 fresh random IV bytes.
func (c *Cipher) Seal(plain []byte) []byte {
	var iv [ivLen]byte
	rand.Read(iv[:]) // never fails (Go 1.24+): it crashes the process instead
	return c.sealIV(plain, iv)
}

// sealIV writes the envelope of plain under iv:
//
//	{"encrypted":"<b64 ciphertext>","iv":"<b64 iv, 16 bytes>","authTag":"<b64 tag, 16 bytes>"}
//
// The ciphertext and tag are AES-256-GCM of plain with nonce iv[:12] and no
// additional data; the last 4 IV bytes are stored but unused.
func (c *Cipher) sealIV(plain []byte, iv [ivLen]byte) []byte {
	sealed := c.aead.Seal(nil, iv[:nonceLen], plain, nil) // ciphertext || tag
	ct, tag := sealed[:len(sealed)-tagLen], sealed[len(sealed)-tagLen:]
	out := make([]byte, 0, minLen+base64Std.EncodedLen(len(ct)))
	out = append(out, `{"encrypted":"`...)
	out = base64Std.AppendEncode(out, ct)
	out = append(out, `","iv":"`...)
	out = base64Std.AppendEncode(out, iv[:])
	out = append(out, `","authTag":"`...)
	out = base64Std.AppendEncode(out, tag)
	out = append(out, `"}`...)
	return out
}

// Open returns the JSON text sealed in stored when stored is an envelope
// that this key opens and whose plaintext is one JSON value. Otherwise it
// reports false: not an envelope, an envelope sealed under another key, or
// a tampered one. Only payloads the broker sealed are given to it (Reveal):
// opening whatever has the envelope's shape would decrypt a client's
// captured envelope for it. A payload whose first member is not an
// envelope key is ruled out after reading that one key.
func (c *Cipher) Open(stored []byte) ([]byte, bool) {
	if c == nil || len(stored) < minLen {
		return nil, false
	}
	ct, iv, tag, ok := parse(stored)
	if !ok {
		return nil, false
	}
	plain, err := c.aead.Open(ct[:0], iv[:nonceLen], append(ct, tag...), nil)
	if err != nil || !oneJSONValue(plain) {
		return nil, false
	}
	return plain, true
}

// Reveal is what a read path writes for a stored payload and its sealed
// bit: the plaintext (decrypted true) when the broker sealed it and it
// opens, else the stored bytes. A payload the broker did not seal is never
// opened, whatever its shape. A sealed one that does not open (another key,
// no key, tampering) is counted and returned as stored.
func (c *Cipher) Reveal(stored []byte, sealed bool) (data []byte, decrypted bool) {
	if !sealed || c == nil {
		return stored, false
	}
	if plain, ok := c.Open(stored); ok {
		return plain, true
	}
	c.undecryptable.Inc()
	return stored, false
}

// parse recognises the envelope's shape: one JSON object with
// exactly the members "encrypted", "iv" and "authTag", in any order and with
// any whitespace (Postgres JSONB, where Queen's C++ broker kept it, reorders
// keys and adds spaces), each a string of standard padded base64; iv and
// authTag decode to 16 bytes. It returns the decoded bytes.
func parse(b []byte) (ct, iv, tag []byte, ok bool) {
	sc := wire.NewScanner(b)
	if sc.Peek() != '{' {
		return nil, nil, nil, false
	}
	var seen uint8
	err := sc.Object(func(sc *wire.Scanner, key []byte) error {
		var (
			bit  uint8
			dst  *[]byte
			size int // decoded length; -1 any
		)
		switch string(key) {
		case "encrypted":
			bit, dst, size = 1, &ct, -1
		case "iv":
			bit, dst, size = 2, &iv, ivLen
		case "authTag":
			bit, dst, size = 4, &tag, tagLen
		default:
			return errNotEnvelope
		}
		if seen&bit != 0 || sc.Peek() != '"' {
			return errNotEnvelope
		}
		seen |= bit
		text, err := stringValue(sc)
		if err != nil {
			return err
		}
		// Room for the tag behind the ciphertext: Open appends it there.
		buf := make([]byte, 0, base64Std.DecodedLen(len(text))+tagLen)
		if *dst, err = base64Std.AppendDecode(buf, text); err != nil || (size >= 0 && len(*dst) != size) {
			return errNotEnvelope
		}
		return nil
	})
	if err != nil || seen != 7 {
		return nil, nil, nil, false
	}
	if !sc.Done() {
		return nil, nil, nil, false
	}
	return ct, iv, tag, true
}

// stringValue reads a string value (the scanner is at its quote).
// Base64 needs no escapes, so the closing quote is found with IndexByte; a
// string with a backslash takes the scanner's path. A CR or LF in the value
// (raw, which JSON forbids, or escaped) rules the payload out: the base64
// decoder would skip it. Other control characters fail the decoding.
func stringValue(sc *wire.Scanner) ([]byte, error) {
	text, err := sc.StringFast()
	if err != nil {
		return nil, err
	}
	if bytes.IndexByte(text, '\n') >= 0 || bytes.IndexByte(text, '\r') >= 0 {
		return nil, errNotEnvelope
	}
	return text, nil
}

// oneJSONValue reports whether b is exactly one JSON value (whitespace
// around it allowed): a decrypted payload is written into replies raw.
func oneJSONValue(b []byte) bool { return wire.OneValue(b) }
