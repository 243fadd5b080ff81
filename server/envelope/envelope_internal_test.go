package envelope

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
)

// The test vector. Key 00 01 .. 1f, IV a0 a1 .. af, plaintext the JSON text
// below; the envelope was computed with Go's crypto/cipher (AES-256-GCM,
// nonce = iv[:12], no additional data) and checked independently with
// OpenSSL through Python's cryptography (AESGCM(key).decrypt(iv[:12],
// ct+tag, None)); using all 16 IV bytes as the nonce fails its tag.
const (
	vectorKeyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	vectorIVHex  = "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
	vectorPlain  = `{"orderId":8812,"note":"h\u00e9llo"}`
	vectorSealed = `{"encrypted":"nToTXyGucPYGR73rP0vy8lLCNmT3lXhO9FJTtk/OTG2+GWWC","iv":"oKGio6SlpqeoqaqrrK2urw==","authTag":"dOCuKXxGKbI+HLmUmIFikQ=="}`
)

func testCipher(t testing.TB, keyHex string) *Cipher {
	t.Helper()
	key, err := ParseKey(keyHex)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCipher(key, metrics.NewSet())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func vectorIV(t testing.TB) (iv [ivLen]byte) {
	b, err := hex.DecodeString(vectorIVHex)
	if err != nil || copy(iv[:], b) != ivLen {
		t.Fatalf("bad vector iv: %v", err)
	}
	return iv
}

// The construction, spelled out with the standard library alone: this is
// what Queen's C++ broker (OpenSSL, IV length never set, so 12 of the 16
// IV bytes are the nonce) and its Rust port write.
func TestCipher_TestVector(t *testing.T) {
	key, _ := hex.DecodeString(vectorKeyHex)
	iv := vectorIV(t)
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	sealed := gcm.Seal(nil, iv[:12], []byte(vectorPlain), nil)
	ct, tag := sealed[:len(sealed)-16], sealed[len(sealed)-16:]
	want := `{"encrypted":"` + base64.StdEncoding.EncodeToString(ct) + `","iv":"` +
		base64.StdEncoding.EncodeToString(iv[:]) + `","authTag":"` + base64.StdEncoding.EncodeToString(tag) + `"}`
	if want != vectorSealed {
		t.Fatalf("the standard-library construction gives\n%s\nwant the pinned vector\n%s", want, vectorSealed)
	}

	c := testCipher(t, vectorKeyHex)
	if got := string(c.sealIV([]byte(vectorPlain), iv)); got != vectorSealed {
		t.Fatalf("sealIV:\n got %s\nwant %s", got, vectorSealed)
	}
	plain, ok := c.Open([]byte(vectorSealed))
	if !ok || string(plain) != vectorPlain {
		t.Fatalf("open(vector) = %q, %v; want %q", plain, ok, vectorPlain)
	}

	// All 16 IV bytes as the nonce is a different construction: it must not
	// open the vector (so the truncation is load-bearing, not incidental).
	gcm16, err := cipher.NewGCMWithNonceSize(block, 16)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gcm16.Open(nil, iv[:], sealed, nil); err == nil {
		t.Fatal("a 16-byte nonce opened the vector")
	}
}

func TestCipher_SealOpenRoundTrip(t *testing.T) {
	c := testCipher(t, vectorKeyHex)
	for _, plain := range []string{`{}`, `null`, `0`, `"s"`, `[1,2,{"a":"\u00e9"}]`, ` {"sp": true} `,
		`{"big":"` + strings.Repeat("x", 70000) + `"}`} {
		env := c.Seal([]byte(plain))
		var shape map[string]string
		if err := json.Unmarshal(env, &shape); err != nil || len(shape) != 3 {
			t.Fatalf("envelope %s is not a 3-member object of strings: %v", env, err)
		}
		iv, _ := base64.StdEncoding.DecodeString(shape["iv"])
		tag, _ := base64.StdEncoding.DecodeString(shape["authTag"])
		if len(iv) != 16 || len(tag) != 16 || shape["encrypted"] == "" {
			t.Fatalf("envelope %s: iv %d bytes, tag %d bytes", env, len(iv), len(tag))
		}
		got, ok := c.Open(env)
		if !ok || string(got) != plain {
			t.Fatalf("open(seal(%.40q)) = %.40q, %v", plain, got, ok)
		}
	}
	a, b := c.Seal([]byte(`{}`)), c.Seal([]byte(`{}`))
	if bytes.Equal(a, b) {
		t.Fatal("two seals of one payload are equal: the IV is not random")
	}
}

// Queen's C++ broker kept the envelope in Postgres JSONB, which reorders
// keys and adds spaces; the envelope is recognised by its members, not its
// spelling.
func TestCipher_OpenAnySpelling(t *testing.T) {
	c := testCipher(t, vectorKeyHex)
	var m map[string]string
	if err := json.Unmarshal([]byte(vectorSealed), &m); err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{
		fmt.Sprintf(`{"iv": %q, "authTag": %q, "encrypted": %q}`, m["iv"], m["authTag"], m["encrypted"]),
		fmt.Sprintf("\n { \"authTag\" :\t%q ,\"encrypted\":%q,\"iv\":%q }\n", m["authTag"], m["encrypted"], m["iv"]),
		// JSON escapes in keys and values are decoded first.
		fmt.Sprintf(`{"\u0065ncrypted":%q,"iv":%q,"authTag":%q}`, m["encrypted"], m["iv"], strings.ReplaceAll(m["authTag"], "/", `\/`)),
	} {
		if got, ok := c.Open([]byte(env)); !ok || string(got) != vectorPlain {
			t.Errorf("open(%s) = %q, %v", env, got, ok)
		}
	}
}

// Anything that is not exactly an envelope this key opens is returned as
// stored: open reports false and never panics.
func TestCipher_OpenRefuses(t *testing.T) {
	c := testCipher(t, vectorKeyHex)
	var m map[string]string
	if err := json.Unmarshal([]byte(vectorSealed), &m); err != nil {
		t.Fatal(err)
	}
	env := func(enc, iv, tag string, extra string) string {
		return fmt.Sprintf(`{"encrypted":%q,"iv":%q,"authTag":%q%s}`, enc, iv, tag, extra)
	}
	b64 := base64.StdEncoding.EncodeToString
	otherKey := testCipher(t, strings.Repeat("ab", 32)).sealIV([]byte(vectorPlain), vectorIV(t))
	notJSON := c.sealIV([]byte(`{"unterminated":`), vectorIV(t))
	tampered := []byte(vectorSealed)
	tampered[15] ^= 1 // inside the ciphertext's base64
	cases := map[string]string{
		"plain object":        `{"orderId":8812,"note":"some text long enough to pass the length check.........."}`,
		"array":               `[` + vectorSealed + `]`,
		"string":              `"` + strings.Repeat("x", 100) + `"`,
		"extra member":        env(m["encrypted"], m["iv"], m["authTag"], `,"v":1`),
		"missing member":      fmt.Sprintf(`{"encrypted":%q,"iv":%q,"tag":%q}`, m["encrypted"], m["iv"], m["authTag"]),
		"duplicate member":    fmt.Sprintf(`{"encrypted":%q,"iv":%q,"iv":%q}`, m["encrypted"], m["iv"], m["authTag"]),
		"number value":        fmt.Sprintf(`{"encrypted":%q,"iv":%q,"authTag":12345678901234567890123}`, m["encrypted"], m["iv"]),
		"not base64":          env("!!!!"+m["encrypted"], m["iv"], m["authTag"], ""),
		"url base64":          env(strings.NewReplacer("/", "_", "+", "-").Replace(m["encrypted"]), m["iv"], m["authTag"], ""),
		"unpadded":            env(m["encrypted"], strings.TrimRight(m["iv"], "="), m["authTag"], ""),
		"12-byte iv":          env(m["encrypted"], b64(make([]byte, 12)), m["authTag"], ""),
		"15-byte tag":         env(m["encrypted"], m["iv"], b64(make([]byte, 15)), ""),
		"escaped newline":     fmt.Sprintf(`{"encrypted":"%s\n%s","iv":%q,"authTag":%q}`, m["encrypted"][:8], m["encrypted"][8:], m["iv"], m["authTag"]),
		"raw newline":         fmt.Sprintf("{\"encrypted\":\"%s\n%s\",\"iv\":%q,\"authTag\":%q}", m["encrypted"][:8], m["encrypted"][8:], m["iv"], m["authTag"]),
		"trailing data":       vectorSealed + ` {}`,
		"truncated":           vectorSealed[:len(vectorSealed)-1],
		"another key":         string(otherKey),
		"tampered":            string(tampered),
		"plaintext not JSON":  string(notJSON),
		"empty":               ``,
		"too short":           `{"encrypted":"","iv":"","authTag":""}`,
		"first key not ours":  `{"id":"` + strings.Repeat("a", 80) + `","encrypted":"","iv":"","authTag":""}`,
		"nested envelope key": `{"x":` + vectorSealed + `}`,
	}
	for name, stored := range cases {
		if got, ok := c.Open([]byte(stored)); ok {
			t.Errorf("%s: open(%s) = %q, want refused", name, stored, got)
		}
		before := c.undecryptable.Get()
		if data, dec := c.Reveal([]byte(stored), true); dec || string(data) != stored {
			t.Errorf("%s: reveal changed the stored bytes", name)
		}
		if got := c.undecryptable.Get() - before; got != 1 {
			t.Errorf("%s: a sealed payload that does not open counted %d times, want 1", name, got)
		}
	}
	var none *Cipher
	if _, ok := none.Open([]byte(vectorSealed)); ok {
		t.Error("a nil cipher opened an envelope")
	}
	if data, dec := none.Reveal([]byte(vectorSealed), true); dec || string(data) != vectorSealed {
		t.Error("a nil cipher's reveal changed the envelope")
	}
}

// reveal opens only what the broker sealed: the very envelope this key
// opens is returned as stored, and not counted, when its sealed bit is off.
func TestCipher_Reveal_OnlySealed(t *testing.T) {
	c := testCipher(t, vectorKeyHex)
	data, dec := c.Reveal([]byte(vectorSealed), true)
	if !dec || string(data) != vectorPlain {
		t.Fatalf("sealed: reveal = %s, %v; want the plaintext", data, dec)
	}
	data, dec = c.Reveal([]byte(vectorSealed), false)
	if dec || string(data) != vectorSealed {
		t.Fatalf("not sealed: reveal = %s, %v; want the envelope as stored", data, dec)
	}
	if n := c.undecryptable.Get(); n != 0 {
		t.Fatalf("decrypt failures counted %d, want 0", n)
	}
}

func TestParseKey(t *testing.T) {
	good := strings.Repeat("0123456789abcdef", 4)
	for _, text := range []string{good, strings.ToUpper(good), good + "\n", "  " + good} {
		if key, err := ParseKey(text); err != nil || len(key) != 32 {
			t.Errorf("ParseKey(%q) = %d bytes, %v", text, len(key), err)
		}
	}
	for _, text := range []string{"", good[:63], good + "0", good[:62] + "zz", strings.Repeat("é", 32)} {
		_, err := ParseKey(text)
		if err == nil {
			t.Errorf("ParseKey(%q) accepted", text)
			continue
		}
		if len(text) >= 8 && strings.Contains(err.Error(), text[:8]) {
			t.Errorf("the error quotes the key: %v", err)
		}
	}
}

// FuzzCipher_Open: open never panics; what it opens is one JSON
// value; and any JSON value sealed opens to itself.
func FuzzCipher_Open(f *testing.F) {
	c := testCipher(f, vectorKeyHex)
	f.Add([]byte(vectorSealed))
	f.Add([]byte(`{"iv":"oKGio6SlpqeoqaqrrK2urw==","authTag":"dOCuKXxGKbI+HLmUmIFikQ==","encrypted":""}`))
	f.Add([]byte(`{"orderId":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if plain, ok := c.Open(b); ok && !oneJSONValue(plain) {
			t.Fatalf("open(%q) = %q: not one JSON value", b, plain)
		}
		if !oneJSONValue(b) {
			return
		}
		if got, ok := c.Open(c.Seal(b)); !ok || !bytes.Equal(got, b) {
			t.Fatalf("open(seal(%q)) = %q, %v", b, got, ok)
		}
	})
}
