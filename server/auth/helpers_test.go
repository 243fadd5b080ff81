package auth_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queenmq/queen/server/auth"
)

// now is the fixed clock every test verifier runs on.
var now = time.Unix(1_800_000_000, 0)

func clock() time.Time { return now }

// testKeys are generated once per test binary: RSA generation is slow.
type testKeys struct {
	rsaA, rsaB *rsa.PrivateKey
	edA, edB   ed25519.PrivateKey
}

var keys = sync.OnceValue(func() testKeys {
	var k testKeys
	var err error
	for _, p := range []**rsa.PrivateKey{&k.rsaA, &k.rsaB} {
		if *p, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	}
	for _, p := range []*ed25519.PrivateKey{&k.edA, &k.edB} {
		if _, *p, err = ed25519.GenerateKey(rand.Reader); err != nil {
			panic(err)
		}
	}
	return k
})

// secret is the HS256 secret of the test verifiers.
const secret = "0123456789abcdef0123456789abcdef"

// claims returns valid claims for a verifier configured by hsOptions, plus
// extra (a nil value deletes a claim).
func claims(extra map[string]any) jwt.MapClaims {
	c := jwt.MapClaims{
		"sub": "user-1",
		"iss": "https://idp.test",
		"aud": "queen",
		"iat": now.Add(-time.Minute).Unix(),
		"nbf": now.Add(-time.Minute).Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// sign mints a token; kid, when not empty, goes in the header.
func sign(t testing.TB, method jwt.SigningMethod, key any, kid string, c jwt.Claims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("sign %s: %v", method.Alg(), err)
	}
	return s
}

// hs mints an HS256 token with the test secret.
func hs(t testing.TB, c jwt.Claims) string {
	return sign(t, jwt.SigningMethodHS256, []byte(secret), "", c)
}

// pemOf writes a public key as a PKIX "PUBLIC KEY" PEM.
func pemOf(t testing.TB, pub any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// logBuffer collects a verifier's log lines; safe for the refresh goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// newLogger returns a debug logger into a fresh buffer.
func newLogger() (*slog.Logger, *logBuffer) {
	b := new(logBuffer)
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// hsOptions configures an HS256 verifier with an issuer and an audience.
func hsOptions() auth.Options {
	log, _ := newLogger()
	return auth.Options{
		Enabled:   true,
		Algorithm: auth.HS256,
		Secret:    secret,
		Issuer:    "https://idp.test",
		Audience:  "queen",
		Now:       clock,
		Logger:    log,
	}
}

// mustNew builds a verifier closed at the end of the test.
func mustNew(t testing.TB, o auth.Options) *auth.Verifier {
	t.Helper()
	v, err := auth.New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(v.Close)
	return v
}

// jwk is one key of a served JSON Web Key Set.
type jwk struct {
	kid string
	pub any // *rsa.PublicKey or ed25519.PublicKey
}

// jwksServer serves a key set the test can swap or break, on 127.0.0.1.
type jwksServer struct {
	*httptest.Server
	mu     sync.Mutex
	body   []byte
	status int
	hits   atomic.Int64
}

func newJWKSServer(t testing.TB, set ...jwk) *jwksServer {
	t.Helper()
	s := &jwksServer{status: http.StatusOK}
	s.serve(t, set...)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		status, body := s.status, s.body
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

// serve replaces the key set and answers 200 from now on.
func (s *jwksServer) serve(t testing.TB, set ...jwk) {
	t.Helper()
	keys := []map[string]string{}
	b64 := base64.RawURLEncoding.EncodeToString
	for _, k := range set {
		switch pub := k.pub.(type) {
		case *rsa.PublicKey:
			keys = append(keys, map[string]string{"kty": "RSA", "kid": k.kid, "alg": "RS256", "use": "sig",
				"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes())})
		case ed25519.PublicKey:
			keys = append(keys, map[string]string{"kty": "OKP", "crv": "Ed25519", "kid": k.kid, "alg": "EdDSA", "use": "sig",
				"x": b64(pub)})
		default:
			t.Fatalf("jwk %s: unsupported key %T", k.kid, pub)
		}
	}
	body, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.body, s.status = body, http.StatusOK
	s.mu.Unlock()
}

// fail makes every fetch answer status.
func (s *jwksServer) fail(status int) {
	s.mu.Lock()
	s.body, s.status = []byte(`{"error":"down"}`), status
	s.mu.Unlock()
}

// eventually polls cond every few milliseconds for up to 5 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// check asserts err matches want and carries text as its public message.
func check(t testing.TB, err, want error, text string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("got error %v, want none", err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("got error %v, want %v", err, want)
	}
	if got := auth.PublicMessage(err); got != text {
		t.Fatalf("public message: got %q, want %q", got, text)
	}
}

// bearerOf prefixes a token the way the SDKs send it.
func bearerOf(token string) string { return "Bearer " + token }

// mustECDSA generates a P-256 key, for a token of an algorithm no mode
// accepts.
func mustECDSA(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
