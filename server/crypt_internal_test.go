package server

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
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

func testCipher(t testing.TB, keyHex string) *payloadCipher {
	t.Helper()
	key, err := parseEncryptionKey(keyHex)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newPayloadCipher(key, metrics.NewSet())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func vectorIV(t testing.TB) (iv [envelopeIVLen]byte) {
	b, err := hex.DecodeString(vectorIVHex)
	if err != nil || copy(iv[:], b) != envelopeIVLen {
		t.Fatalf("bad vector iv: %v", err)
	}
	return iv
}

// The construction, spelled out with the standard library alone: this is
// what Queen's C++ broker (OpenSSL, IV length never set, so 12 of the 16
// IV bytes are the nonce) and its Rust port write.
func TestPayloadCipher_TestVector(t *testing.T) {
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
	plain, ok := c.open([]byte(vectorSealed))
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

func TestPayloadCipher_SealOpenRoundTrip(t *testing.T) {
	c := testCipher(t, vectorKeyHex)
	for _, plain := range []string{`{}`, `null`, `0`, `"s"`, `[1,2,{"a":"\u00e9"}]`, ` {"sp": true} `,
		`{"big":"` + strings.Repeat("x", 70000) + `"}`} {
		env := c.seal([]byte(plain))
		var shape map[string]string
		if err := json.Unmarshal(env, &shape); err != nil || len(shape) != 3 {
			t.Fatalf("envelope %s is not a 3-member object of strings: %v", env, err)
		}
		iv, _ := base64.StdEncoding.DecodeString(shape["iv"])
		tag, _ := base64.StdEncoding.DecodeString(shape["authTag"])
		if len(iv) != 16 || len(tag) != 16 || shape["encrypted"] == "" {
			t.Fatalf("envelope %s: iv %d bytes, tag %d bytes", env, len(iv), len(tag))
		}
		got, ok := c.open(env)
		if !ok || string(got) != plain {
			t.Fatalf("open(seal(%.40q)) = %.40q, %v", plain, got, ok)
		}
	}
	a, b := c.seal([]byte(`{}`)), c.seal([]byte(`{}`))
	if bytes.Equal(a, b) {
		t.Fatal("two seals of one payload are equal: the IV is not random")
	}
}

// Queen's C++ broker kept the envelope in Postgres JSONB, which reorders
// keys and adds spaces; the envelope is recognised by its members, not its
// spelling.
func TestPayloadCipher_OpenAnySpelling(t *testing.T) {
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
		if got, ok := c.open([]byte(env)); !ok || string(got) != vectorPlain {
			t.Errorf("open(%s) = %q, %v", env, got, ok)
		}
	}
}

// Anything that is not exactly an envelope this key opens is returned as
// stored: open reports false and never panics.
func TestPayloadCipher_OpenRefuses(t *testing.T) {
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
		if got, ok := c.open([]byte(stored)); ok {
			t.Errorf("%s: open(%s) = %q, want refused", name, stored, got)
		}
		before := c.undecryptable.Get()
		if data, dec := c.reveal([]byte(stored), true); dec || string(data) != stored {
			t.Errorf("%s: reveal changed the stored bytes", name)
		}
		if got := c.undecryptable.Get() - before; got != 1 {
			t.Errorf("%s: a sealed payload that does not open counted %d times, want 1", name, got)
		}
	}
	var none *payloadCipher
	if _, ok := none.open([]byte(vectorSealed)); ok {
		t.Error("a nil cipher opened an envelope")
	}
	if data, dec := none.reveal([]byte(vectorSealed), true); dec || string(data) != vectorSealed {
		t.Error("a nil cipher's reveal changed the envelope")
	}
}

// reveal opens only what the broker sealed: the very envelope this key
// opens is returned as stored, and not counted, when its sealed bit is off.
func TestPayloadCipher_Reveal_OnlySealed(t *testing.T) {
	c := testCipher(t, vectorKeyHex)
	data, dec := c.reveal([]byte(vectorSealed), true)
	if !dec || string(data) != vectorPlain {
		t.Fatalf("sealed: reveal = %s, %v; want the plaintext", data, dec)
	}
	data, dec = c.reveal([]byte(vectorSealed), false)
	if dec || string(data) != vectorSealed {
		t.Fatalf("not sealed: reveal = %s, %v; want the envelope as stored", data, dec)
	}
	if n := c.undecryptable.Get(); n != 0 {
		t.Fatalf("decrypt failures counted %d, want 0", n)
	}
}

func TestParseEncryptionKey(t *testing.T) {
	good := strings.Repeat("0123456789abcdef", 4)
	for _, text := range []string{good, strings.ToUpper(good), good + "\n", "  " + good} {
		if key, err := parseEncryptionKey(text); err != nil || len(key) != 32 {
			t.Errorf("parseEncryptionKey(%q) = %d bytes, %v", text, len(key), err)
		}
	}
	for _, text := range []string{"", good[:63], good + "0", good[:62] + "zz", strings.Repeat("é", 32)} {
		_, err := parseEncryptionKey(text)
		if err == nil {
			t.Errorf("parseEncryptionKey(%q) accepted", text)
			continue
		}
		if len(text) >= 8 && strings.Contains(err.Error(), text[:8]) {
			t.Errorf("the error quotes the key: %v", err)
		}
	}
}

// FuzzPayloadCipher_Open: open never panics; what it opens is one JSON
// value; and any JSON value sealed opens to itself.
func FuzzPayloadCipher_Open(f *testing.F) {
	c := testCipher(f, vectorKeyHex)
	f.Add([]byte(vectorSealed))
	f.Add([]byte(`{"iv":"oKGio6SlpqeoqaqrrK2urw==","authTag":"dOCuKXxGKbI+HLmUmIFikQ==","encrypted":""}`))
	f.Add([]byte(`{"orderId":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if plain, ok := c.open(b); ok && !oneJSONValue(plain) {
			t.Fatalf("open(%q) = %q: not one JSON value", b, plain)
		}
		if !oneJSONValue(b) {
			return
		}
		if got, ok := c.open(c.seal(b)); !ok || !bytes.Equal(got, b) {
			t.Fatalf("open(seal(%q)) = %q, %v", b, got, ok)
		}
	})
}

// engineBroker answers the push path with canned results but reads queue
// configurations from a real engine, with (Fast) or without the cheap
// QueueConfig lookup, so the benchmarks measure the edge's cost of
// encryption.
type engineBroker struct {
	stubBroker
	e *engine.Engine
}

func (b engineBroker) Queue(name string) (engine.QueueInfo, error) { return b.e.Queue(name) }

type engineBrokerFast struct{ engineBroker }

func (b engineBrokerFast) QueueConfig(name string) (engine.Config, bool) {
	return b.e.QueueConfig(name)
}

// configuredEngine opens an engine with queue "orders" (encryptionEnabled
// as given) holding partitions partitions, each with one consumer group.
func configuredEngine(b *testing.B, encrypted bool, partitions int) *engine.Engine {
	h := enginetest.MustOpen(b)
	var v int64
	if encrypted {
		v = 1
	}
	h.Configure(engine.ConfigureCmd{Queue: "orders", Set: []engine.OptionValue{{Option: engine.OptEncryptionEnabled, Value: v}}})
	var items []engine.PushItem
	for i := range partitions {
		items = append(items, engine.PushItem{Queue: "orders", Partition: fmt.Sprint("p", i), Payload: []byte(`{}`)})
	}
	h.Push(items...)
	for i := range partitions {
		h.Pop(engine.PopCmd{Queue: "orders", Partition: fmt.Sprint("p", i), Group: "g", Batch: 1, Partitions: 1})
	}
	return h.Engine
}

// BenchmarkPush100Encrypted compares a 100-item push (1 KB payloads) with
// no key, with a key to an unencrypted queue (the flag looked up through
// QueueInfo or QueueConfig, for a queue of 1 or 1000 partitions), and
// sealing every payload.
func BenchmarkPush100Encrypted(b *testing.B) {
	var items []string
	payload := `{"orderId":12345,"customer":"c-77","lines":[{"sku":"A1","qty":2},{"sku":"B7","qty":1}],"note":"` + strings.Repeat("x", 900) + `"}`
	for i := range 100 {
		items = append(items, fmt.Sprintf(`{"queue":"orders","partition":"Default","payload":%s,"transactionId":"0190b0f0-0000-7000-8000-%012d"}`, payload, i))
	}
	body := `{"items":[` + strings.Join(items, ",") + `]}`
	for _, bc := range []struct {
		name       string
		key        bool
		encrypted  bool
		fast       bool
		partitions int
	}{
		{"NoKey", false, true, false, 1},
		{"KeyPlainQueue/QueueInfo/1part", true, false, false, 1},
		{"KeyPlainQueue/QueueInfo/1000parts", true, false, false, 1000},
		{"KeyPlainQueue/QueueConfig/1000parts", true, false, true, 1000},
		{"KeyEncryptedQueue/QueueConfig/1part", true, true, true, 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := configuredEngine(b, bc.encrypted, bc.partitions)
			var broker Broker = engineBroker{e: e}
			if bc.fast {
				broker = engineBrokerFast{engineBroker{e: e}}
			}
			opts := Options{Logger: slog.New(slog.DiscardHandler)}
			if bc.key {
				opts.EncryptionKey = vectorKeyHex
			}
			s, err := New(broker, opts)
			if err != nil {
				b.Fatal(err)
			}
			run(b, s, "POST", "/api/v1/push", body, 201)
		})
	}
}

// BenchmarkQueueLookup is the per-request flag lookup alone.
func BenchmarkQueueLookup(b *testing.B) {
	for _, parts := range []int{1, 1000} {
		e := configuredEngine(b, true, parts)
		b.Run(fmt.Sprintf("QueueInfo/%dparts", parts), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if info, err := e.Queue("orders"); err != nil || !info.Config.Bool(engine.OptEncryptionEnabled) {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("QueueConfig/%dparts", parts), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if cfg, ok := e.QueueConfig("orders"); !ok || !cfg.Bool(engine.OptEncryptionEnabled) {
					b.Fatal("not found")
				}
			}
		})
	}
}

// BenchmarkPop100Encrypted is BenchmarkPop100 with every payload sealed.
func BenchmarkPop100Encrypted(b *testing.B) {
	c := testCipher(b, vectorKeyHex)
	payload := c.seal([]byte(`{"orderId":12345,"customer":"c-77","note":"` + strings.Repeat("x", 900) + `"}`))
	res := engine.PopResult{Group: engine.QueueMode, LeaseID: engine.ID{1},
		Claims: []engine.Claim{{Queue: "orders", Partition: "Default", PartitionID: engine.ID{2}, LeaseExpiresAt: 1 << 50}}}
	for i := range 100 {
		res.Messages = append(res.Messages, engine.Message{ID: engine.ID{byte(i)}, TransactionID: fmt.Sprint("t", i),
			Payload: payload, Sealed: true, CreatedAt: 1 << 50, Queue: "orders", Partition: "Default", PartitionID: engine.ID{2}, Attempt: 1})
	}
	s, err := New(stubBroker{pop: res}, Options{Logger: slog.New(slog.DiscardHandler), EncryptionKey: vectorKeyHex})
	if err != nil {
		b.Fatal(err)
	}
	run(b, s, "GET", "/api/v1/pop/queue/orders?batch=100&wait=false", "", 200)
}
