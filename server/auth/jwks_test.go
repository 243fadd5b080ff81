package auth_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queenmq/queen/server/auth"
)

// jwksOptions configures a verifier on a JWKS server; refresh 0 keeps the
// hourly default, so only unknown key IDs refetch.
func jwksOptions(alg, url string, refresh time.Duration) (auth.Options, *logBuffer) {
	log, buf := newLogger()
	return auth.Options{
		Enabled:     true,
		Algorithm:   alg,
		JWKSURL:     url,
		JWKSRefresh: refresh,
		Now:         clock,
		Logger:      log,
	}, buf
}

// TestVerifier_Authenticate_JWKSRotation: the identity provider replaces
// key A with key B. The first token signed by B refetches the set at once
// (its kid is unknown); A's tokens are refused from then on, and the tokens
// naming unknown keys that follow do not refetch again.
func TestVerifier_Authenticate_JWKSRotation(t *testing.T) {
	k := keys()
	for _, c := range []struct {
		alg    string
		method jwt.SigningMethod
		a, b   any // private keys
		pa, pb any // public keys
	}{
		{auth.RS256, jwt.SigningMethodRS256, k.rsaA, k.rsaB, &k.rsaA.PublicKey, &k.rsaB.PublicKey},
		{auth.EdDSA, jwt.SigningMethodEdDSA, k.edA, k.edB, k.edA.Public(), k.edB.Public()},
	} {
		t.Run(c.alg, func(t *testing.T) {
			idp := newJWKSServer(t, jwk{"a", c.pa})
			o, _ := jwksOptions(c.alg, idp.URL, 0)
			v := mustNew(t, o)
			byA := sign(t, c.method, c.a, "a", claims(map[string]any{"role": "read-write"}))
			byB := sign(t, c.method, c.b, "b", claims(map[string]any{"role": "admin"}))
			if id, err := v.Authorize(bearerOf(byA), auth.ReadWrite); err != nil || id.Subject != "user-1" {
				t.Fatalf("token by A: %+v, %v", id, err)
			}
			if got := idp.hits.Load(); got != 1 {
				t.Fatalf("fetches after start: got %d, want 1", got)
			}

			idp.serve(t, jwk{"b", c.pb})
			if id, err := v.Authorize(bearerOf(byB), auth.Admin); err != nil || id.Level != auth.Admin {
				t.Fatalf("token by B after rotation: %+v, %v", id, err)
			}
			if got := idp.hits.Load(); got != 2 {
				t.Fatalf("fetches after B's first token: got %d, want 2", got)
			}
			for range 5 {
				_, err := v.Authenticate(bearerOf(byA))
				check(t, err, auth.ErrInvalidToken, "Unknown key ID: a")
				_, err = v.Authenticate(bearerOf(sign(t, c.method, c.b, "forged", claims(nil))))
				check(t, err, auth.ErrInvalidToken, "Unknown key ID: forged")
			}
			if got := idp.hits.Load(); got != 2 {
				t.Fatalf("unknown key IDs within the interval refetched: %d fetches, want 2", got)
			}
			// A token naming B's kid but signed by A is a forgery.
			_, err := v.Authenticate(bearerOf(sign(t, c.method, c.a, "b", claims(nil))))
			check(t, err, auth.ErrInvalidToken, "Invalid token signature")
		})
	}
}

// TestVerifier_Authenticate_JWKSIntervalRefresh picks up a rotation by the
// periodic refresh alone, and drops the retired key.
func TestVerifier_Authenticate_JWKSIntervalRefresh(t *testing.T) {
	k := keys()
	idp := newJWKSServer(t, jwk{"a", &k.rsaA.PublicKey})
	o, _ := jwksOptions(auth.RS256, idp.URL, 20*time.Millisecond)
	o.JWKSUnknownKIDInterval = time.Hour
	v := mustNew(t, o)
	byA := sign(t, jwt.SigningMethodRS256, k.rsaA, "a", claims(nil))
	byB := sign(t, jwt.SigningMethodRS256, k.rsaB, "b", claims(nil))
	if _, err := v.Authenticate(byA); err != nil {
		t.Fatal(err)
	}
	idp.serve(t, jwk{"b", &k.rsaB.PublicKey})
	eventually(t, "B accepted", func() bool { _, err := v.Authenticate(byB); return err == nil })
	_, err := v.Authenticate(byA)
	check(t, err, auth.ErrInvalidToken, "Unknown key ID: a")
}

// TestVerifier_Authenticate_JWKSRefreshFailure keeps the last good set when
// refreshes fail, and answers 500 "Failed to fetch JWKS" when the fetch an
// unknown key ID asked for fails, as Queen does.
func TestVerifier_Authenticate_JWKSRefreshFailure(t *testing.T) {
	k := keys()
	idp := newJWKSServer(t, jwk{"a", &k.rsaA.PublicKey})
	o, logs := jwksOptions(auth.RS256, idp.URL, 10*time.Millisecond)
	v := mustNew(t, o)
	byA := sign(t, jwt.SigningMethodRS256, k.rsaA, "a", claims(nil))

	idp.fail(http.StatusServiceUnavailable)
	failedFrom := idp.hits.Load()
	eventually(t, "two failed refreshes", func() bool { return idp.hits.Load() >= failedFrom+2 })
	if _, err := v.Authenticate(byA); err != nil {
		t.Fatalf("token by A with the IdP down: %v", err)
	}
	_, err := v.Authenticate(sign(t, jwt.SigningMethodRS256, k.rsaB, "b", claims(nil)))
	check(t, err, auth.ErrJWKS, "Failed to fetch JWKS")
	if !strings.Contains(logs.String(), "JWKS fetch failed") {
		t.Fatalf("refresh failures not logged:\n%s", logs)
	}

	idp.serve(t, jwk{"a", &k.rsaA.PublicKey}, jwk{"b", &k.rsaB.PublicKey})
	byB := sign(t, jwt.SigningMethodRS256, k.rsaB, "b", claims(nil))
	eventually(t, "B accepted", func() bool { _, err := v.Authenticate(byB); return err == nil })
	if _, err := v.Authenticate(byA); err != nil {
		t.Fatalf("token by A after recovery: %v", err)
	}
}

// TestNew_JWKSDown starts while the identity provider is down: New
// succeeds, logs it, and requests needing keys answer 500 until a fetch
// succeeds.
func TestNew_JWKSDown(t *testing.T) {
	k := keys()
	idp := newJWKSServer(t)
	idp.fail(http.StatusBadGateway)
	o, logs := jwksOptions(auth.Auto, idp.URL, 10*time.Millisecond)
	o.Secret = secret
	v := mustNew(t, o)
	if !strings.Contains(logs.String(), "no JWKS keys yet") {
		t.Fatalf("start without keys not logged:\n%s", logs)
	}
	byA := sign(t, jwt.SigningMethodEdDSA, k.edA, "a", claims(nil))
	noKid := sign(t, jwt.SigningMethodRS256, k.rsaA, "", claims(nil))
	for _, tok := range []string{byA, noKid} {
		_, err := v.Authorize(bearerOf(tok), auth.ReadOnly)
		check(t, err, auth.ErrJWKS, "Failed to fetch JWKS")
	}
	// HS256 needs no key set and works meanwhile.
	if _, err := v.Authenticate(hs(t, claims(nil))); err != nil {
		t.Fatalf("HS256 with the IdP down: %v", err)
	}

	idp.serve(t, jwk{"a", k.edA.Public()}, jwk{"r", &k.rsaA.PublicKey})
	eventually(t, "EdDSA accepted", func() bool { _, err := v.Authenticate(byA); return err == nil })
	if _, err := v.Authenticate(noKid); err != nil {
		t.Fatalf("token without kid: %v", err)
	}
}

// TestVerifier_Authenticate_JWKSAuto picks the key by the token's alg and
// kid, and refuses a kid whose key is of another algorithm.
func TestVerifier_Authenticate_JWKSAuto(t *testing.T) {
	k := keys()
	idp := newJWKSServer(t, jwk{"r", &k.rsaA.PublicKey}, jwk{"e", k.edA.Public()})
	o, _ := jwksOptions(auth.Auto, idp.URL, 0)
	o.Secret = secret
	v := mustNew(t, o)
	for _, tok := range []string{
		hs(t, claims(nil)),
		sign(t, jwt.SigningMethodRS256, k.rsaA, "r", claims(nil)),
		sign(t, jwt.SigningMethodEdDSA, k.edA, "e", claims(nil)),
		sign(t, jwt.SigningMethodRS256, k.rsaA, "", claims(nil)),
		sign(t, jwt.SigningMethodEdDSA, k.edA, "", claims(nil)),
	} {
		if _, err := v.Authenticate(tok); err != nil {
			t.Errorf("%.30s: %v", tok, err)
		}
	}
	_, err := v.Authenticate(sign(t, jwt.SigningMethodEdDSA, k.edA, "r", claims(nil)))
	check(t, err, auth.ErrInvalidToken, "Token verification failed: key r is not for EdDSA")
	_, err = v.Authenticate(sign(t, jwt.SigningMethodES256, mustECDSA(t), "r", claims(nil)))
	check(t, err, auth.ErrInvalidToken, "Token uses ES256, expected HS256, RS256 or EdDSA")
	// The RSA public key of the set as an HMAC secret: the secret wins.
	_, err = v.Authenticate(sign(t, jwt.SigningMethodHS256, []byte(pemOf(t, &k.rsaA.PublicKey)), "r", claims(nil)))
	check(t, err, auth.ErrInvalidToken, "Invalid token signature")
	if got := idp.hits.Load(); got != 1 {
		t.Fatalf("fetches: got %d, want 1", got)
	}
}

// TestVerifier_Authenticate_JWKSWithPEM serves RS256 from the PEM and
// EdDSA from the set, in auto mode.
func TestVerifier_Authenticate_JWKSWithPEM(t *testing.T) {
	k := keys()
	idp := newJWKSServer(t, jwk{"e", k.edA.Public()}, jwk{"r", &k.rsaB.PublicKey})
	o, _ := jwksOptions(auth.Auto, idp.URL, 0)
	o.PublicKey = pemOf(t, &k.rsaA.PublicKey)
	v := mustNew(t, o)
	if _, err := v.Authenticate(sign(t, jwt.SigningMethodRS256, k.rsaA, "r", claims(nil))); err != nil {
		t.Fatalf("RS256 by the PEM key: %v", err)
	}
	_, err := v.Authenticate(sign(t, jwt.SigningMethodRS256, k.rsaB, "r", claims(nil)))
	check(t, err, auth.ErrInvalidToken, "Invalid token signature")
	if _, err := v.Authenticate(sign(t, jwt.SigningMethodEdDSA, k.edA, "e", claims(nil))); err != nil {
		t.Fatalf("EdDSA by the set: %v", err)
	}
}

// TestNew_JWKSUnused does not fetch a set that no algorithm needs.
func TestNew_JWKSUnused(t *testing.T) {
	k := keys()
	idp := newJWKSServer(t, jwk{"a", &k.rsaA.PublicKey})
	o, logs := jwksOptions(auth.RS256, idp.URL, 0)
	o.PublicKey = pemOf(t, &k.rsaA.PublicKey)
	mustNew(t, o)
	if got := idp.hits.Load(); got != 0 {
		t.Fatalf("fetches: got %d, want 0", got)
	}
	if !strings.Contains(logs.String(), "JWT_JWKS_URL is not used") {
		t.Fatalf("unused URL not logged:\n%s", logs)
	}
}

// TestVerifier_Close_JWKS ends the refresh goroutine (TestMain's goleak
// check fails the package otherwise) and keeps the keys in hand.
func TestVerifier_Close_JWKS(t *testing.T) {
	k := keys()
	idp := newJWKSServer(t, jwk{"a", &k.rsaA.PublicKey})
	o, logs := jwksOptions(auth.RS256, idp.URL, 5*time.Millisecond)
	v := mustNew(t, o)
	eventually(t, "a refresh", func() bool { return idp.hits.Load() >= 2 })
	v.Close()
	hits := idp.hits.Load()
	time.Sleep(30 * time.Millisecond)
	if got := idp.hits.Load(); got > hits+1 {
		t.Fatalf("refreshes after Close: %d", got-hits)
	}
	if _, err := v.Authenticate(sign(t, jwt.SigningMethodRS256, k.rsaA, "a", claims(nil))); err != nil {
		t.Fatalf("after Close: %v", err)
	}
	if strings.Contains(logs.String(), "context canceled") {
		t.Fatalf("Close logged its own cancellation:\n%s", logs)
	}
}

// TestVerifier_Authenticate_JWKSKeyHeader covers kid headers the set cannot
// answer: not a string, and absent with no key of the token's algorithm.
func TestVerifier_Authenticate_JWKSKeyHeader(t *testing.T) {
	k := keys()
	idp := newJWKSServer(t, jwk{"r", &k.rsaA.PublicKey})
	o, _ := jwksOptions(auth.EdDSA, idp.URL, 0)
	v := mustNew(t, o)
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims(nil))
	tok.Header["kid"] = 7
	numeric, err := tok.SignedString(k.edA)
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.Authenticate(numeric)
	check(t, err, auth.ErrInvalidToken, "Token decode error: kid header is not a string")
	_, err = v.Authenticate(sign(t, jwt.SigningMethodEdDSA, k.edA, "", claims(nil)))
	check(t, err, auth.ErrInvalidToken, "Token verification failed: no key in the key set is for EdDSA")
	if got := idp.hits.Load(); got != 1 {
		t.Fatalf("fetches: got %d, want 1", got)
	}
}
