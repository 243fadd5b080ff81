package auth_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queenmq/queen/server/auth"
)

// TestVerifier_Authorize_Table runs every kind of credential against every
// level a route can need, on an HS256 verifier with an issuer and an
// audience, and checks the sentinel and Queen's exact text.
func TestVerifier_Authorize_Table(t *testing.T) {
	k := keys()
	v := mustNew(t, hsOptions())
	role := func(r any) jwt.MapClaims { return claims(map[string]any{"role": r}) }
	type want struct {
		err  error  // for every need above Public; nil: valid
		text string // public text of err
		held auth.Level
	}
	cases := []struct {
		name   string
		header string
		want   want
	}{
		{"no header", "", want{auth.ErrAuthRequired, "Authentication required", 0}},
		{"empty", "  \t ", want{auth.ErrAuthRequired, "Authentication required", 0}},
		{"Bearer only", "Bearer ", want{auth.ErrInvalidToken, "Empty token", 0}},
		{"Bearer no space", "Bearer", want{auth.ErrInvalidToken, "Empty token", 0}},
		{"garbage", "Bearer not-a-jwt", want{auth.ErrInvalidToken,
			"Token decode error: token is malformed: token contains an invalid number of segments", 0}},
		{"garbage segments", "Bearer a.b.c", want{auth.ErrInvalidToken,
			"Token decode error: token is malformed: could not base64 decode header: illegal base64 data at input byte 0", 0}},
		{"expired", bearerOf(hs(t, claims(map[string]any{"role": "admin", "exp": now.Add(-31 * time.Second).Unix()}))),
			want{auth.ErrInvalidToken, "Token has expired", 0}},
		{"not yet valid", bearerOf(hs(t, claims(map[string]any{"role": "admin", "nbf": now.Add(31 * time.Second).Unix()}))),
			want{auth.ErrInvalidToken, "Token verification failed: token is not valid yet", 0}},
		{"wrong signature", bearerOf(sign(t, jwt.SigningMethodHS256, []byte("another secret of 32 bytes......"), "", role("admin"))),
			want{auth.ErrInvalidToken, "Invalid token signature", 0}},
		{"wrong issuer", bearerOf(hs(t, claims(map[string]any{"role": "admin", "iss": "https://evil.test"}))),
			want{auth.ErrInvalidToken, "Invalid token issuer", 0}},
		{"no issuer", bearerOf(hs(t, claims(map[string]any{"role": "admin", "iss": nil}))),
			want{auth.ErrInvalidToken, "Invalid token issuer", 0}},
		{"wrong audience", bearerOf(hs(t, claims(map[string]any{"role": "admin", "aud": "other"}))),
			want{auth.ErrInvalidToken, "Invalid token audience", 0}},
		{"wrong audience array", bearerOf(hs(t, claims(map[string]any{"role": "admin", "aud": []string{"a", "b"}}))),
			want{auth.ErrInvalidToken, "Invalid token audience", 0}},
		{"no audience", bearerOf(hs(t, claims(map[string]any{"role": "admin", "aud": nil}))),
			want{auth.ErrInvalidToken, "Invalid token audience", 0}},
		{"wrong alg", bearerOf(sign(t, jwt.SigningMethodRS256, k.rsaA, "", role("admin"))),
			want{auth.ErrInvalidToken, "Token uses RS256, expected HS256", 0}},
		{"alg none", bearerOf(sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", role("admin"))),
			want{auth.ErrInvalidToken, "Token uses none, expected HS256", 0}},
		{"read-only", bearerOf(hs(t, role("read-only"))), want{nil, "", auth.ReadOnly}},
		{"read-write", bearerOf(hs(t, role("read-write"))), want{nil, "", auth.ReadWrite}},
		{"admin", bearerOf(hs(t, role("admin"))), want{nil, "", auth.Admin}},
		{"no role", bearerOf(hs(t, claims(nil))), want{nil, "", auth.Public}},
		{"unknown role", bearerOf(hs(t, role("superuser"))), want{nil, "", auth.Public}},
		{"array roles", bearerOf(hs(t, claims(map[string]any{"roles": []any{"read-only", 7, "read-write"}}))),
			want{nil, "", auth.ReadWrite}},
		{"both claims, highest wins", bearerOf(hs(t, claims(map[string]any{"role": "read-only", "roles": []string{"admin"}}))),
			want{nil, "", auth.Admin}},
		{"audience in array", bearerOf(hs(t, claims(map[string]any{"role": "admin", "aud": []string{"x", "queen"}}))),
			want{nil, "", auth.Admin}},
	}
	needs := []auth.Level{auth.Public, auth.ReadOnly, auth.ReadWrite, auth.Admin}
	for _, c := range cases {
		for _, need := range needs {
			t.Run(fmt.Sprintf("%s/need %s", c.name, need), func(t *testing.T) {
				id, err := v.Authorize(c.header, need)
				switch {
				case need == auth.Public:
					check(t, err, nil, "")
				case c.want.err != nil:
					check(t, err, c.want.err, c.want.text)
				case c.want.held < need:
					check(t, err, auth.ErrForbidden, "Insufficient permissions")
					if id.Level != c.want.held || id.Subject != "user-1" {
						t.Fatalf("forbidden identity: got %+v, want level %s of user-1", id, c.want.held)
					}
				default:
					check(t, err, nil, "")
					if id.Level != c.want.held || id.Subject != "user-1" {
						t.Fatalf("identity: got %+v, want level %s of user-1", id, c.want.held)
					}
				}
			})
		}
	}
}

// TestVerifier_Authenticate_Header covers the forms of the header value the
// clients and proxies send.
func TestVerifier_Authenticate_Header(t *testing.T) {
	v := mustNew(t, hsOptions())
	tok := hs(t, claims(map[string]any{"role": "admin"}))
	for _, h := range []string{
		"Bearer " + tok, "bearer " + tok, "BEARER " + tok, "BeArEr " + tok,
		tok, "  Bearer " + tok + "  ", "Bearer   " + tok, "Bearer\t" + tok,
	} {
		id, err := v.Authenticate(h)
		if err != nil || id.Level != auth.Admin {
			t.Errorf("Authenticate(%q): got %+v, %v; want admin", h, id, err)
		}
	}
	// Without a space after it, "Bearer" is part of the token.
	_, err := v.Authenticate("Bearer" + tok)
	check(t, err, auth.ErrInvalidToken, `Token decode error: token is malformed: could not JSON decode header: invalid character '\x05' looking for beginning of value`)
}

// TestVerifier_Authenticate_Identity reads sub, id, username and the roles
// as found.
func TestVerifier_Authenticate_Identity(t *testing.T) {
	v := mustNew(t, hsOptions())
	for _, c := range []struct {
		name  string
		extra map[string]any
		want  auth.Identity
	}{
		{"proxy token", map[string]any{"id": "42", "username": "ada", "role": "read-write"},
			auth.Identity{Subject: "user-1", ID: "42", Username: "ada", Roles: []string{"read-write"}, Level: auth.ReadWrite}},
		{"numeric id", map[string]any{"id": 42, "roles": []string{"x", "admin"}},
			auth.Identity{Subject: "user-1", ID: "42", Roles: []string{"x", "admin"}, Level: auth.Admin}},
		{"odd shapes ignored", map[string]any{"id": map[string]any{"a": 1}, "username": true, "role": 3, "roles": "read-only"},
			auth.Identity{Subject: "user-1", Roles: []string{"read-only"}, Level: auth.ReadOnly}},
		{"role as array", map[string]any{"role": []string{"read-only"}, "roles": []string{"read-write"}},
			auth.Identity{Subject: "user-1", Roles: []string{"read-only", "read-write"}, Level: auth.ReadWrite}},
		{"no subject", map[string]any{"sub": nil},
			auth.Identity{Level: auth.Public}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := v.Authenticate(bearerOf(hs(t, claims(c.extra))))
			if err != nil {
				t.Fatal(err)
			}
			if got.Subject != c.want.Subject || got.ID != c.want.ID || got.Username != c.want.Username ||
				got.Level != c.want.Level || !slices.Equal(got.Roles, c.want.Roles) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestVerifier_Authenticate_ClockSkew checks exp, nbf and iat against the
// leeway.
func TestVerifier_Authenticate_ClockSkew(t *testing.T) {
	skewed := mustNew(t, hsOptions())
	o := hsOptions()
	o.ClockSkew = auth.NoClockSkew
	exact := mustNew(t, o)
	for _, c := range []struct {
		name   string
		extra  map[string]any
		skewed string // "" accepted
		exact  string
	}{
		{"expired within skew", map[string]any{"exp": now.Add(-29 * time.Second).Unix()}, "", "Token has expired"},
		{"expired beyond skew", map[string]any{"exp": now.Add(-31 * time.Second).Unix()}, "Token has expired", "Token has expired"},
		{"nbf within skew", map[string]any{"nbf": now.Add(29 * time.Second).Unix()}, "", "Token verification failed: token is not valid yet"},
		{"iat within skew", map[string]any{"iat": now.Add(29 * time.Second).Unix()}, "", "Token verification failed: token used before issued"},
		{"iat beyond skew", map[string]any{"iat": now.Add(31 * time.Second).Unix()},
			"Token verification failed: token used before issued", "Token verification failed: token used before issued"},
		{"no time claims", map[string]any{"exp": nil, "nbf": nil, "iat": nil}, "", ""},
		{"exp not a number", map[string]any{"exp": "tomorrow"},
			`Token decode error: token is malformed: could not JSON decode claim: could not parse NumericData: json: invalid number literal, trying to unmarshal "\"tomorrow\"" into Number`,
			`Token decode error: token is malformed: could not JSON decode claim: could not parse NumericData: json: invalid number literal, trying to unmarshal "\"tomorrow\"" into Number`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := bearerOf(hs(t, claims(c.extra)))
			for _, side := range []struct {
				v    *auth.Verifier
				want string
			}{{skewed, c.skewed}, {exact, c.exact}} {
				_, err := side.v.Authenticate(h)
				if side.want == "" {
					check(t, err, nil, "")
				} else {
					check(t, err, auth.ErrInvalidToken, side.want)
				}
			}
		})
	}
}

// TestVerifier_Authenticate_RequireExp: a token without exp is good, as in
// Queen, until RequireExpiration (JWT_REQUIRE_EXP) refuses it, with a text
// that names the variable, also when an audience is configured (a missing
// aud gives the same library error).
func TestVerifier_Authenticate_RequireExp(t *testing.T) {
	lenient := mustNew(t, hsOptions())
	o := hsOptions()
	o.RequireExpiration = true
	strict := mustNew(t, o)
	noExp := bearerOf(hs(t, claims(map[string]any{"exp": nil})))
	_, err := lenient.Authenticate(noExp)
	check(t, err, nil, "")
	_, err = strict.Authenticate(noExp)
	check(t, err, auth.ErrInvalidToken, "Token verification failed: token has no expiry (exp), which JWT_REQUIRE_EXP requires")
	_, err = strict.Authenticate(bearerOf(hs(t, claims(nil))))
	check(t, err, nil, "")
	_, err = strict.Authenticate(bearerOf(hs(t, claims(map[string]any{"aud": nil}))))
	check(t, err, auth.ErrInvalidToken, "Invalid token audience")
}

// TestVerifier_Authenticate_Crit refuses any crit header (RFC 7515
// §4.1.11: an extension the recipient does not understand, and it
// understands none), whatever it lists, before the signature is looked at,
// on every key path.
func TestVerifier_Authenticate_Crit(t *testing.T) {
	k := keys()
	o := hsOptions()
	o.Algorithm, o.PublicKey = auth.Auto, pemOf(t, k.edA.Public())
	v := mustNew(t, o)
	const text = "Token verification failed: critical header extensions (crit) are not supported"
	for _, c := range []struct {
		name   string
		method jwt.SigningMethod
		key    any
		crit   any
	}{
		{"HS256 b64", jwt.SigningMethodHS256, []byte(secret), []string{"b64"}},
		{"HS256 empty", jwt.SigningMethodHS256, []byte(secret), []string{}},
		{"HS256 not a list", jwt.SigningMethodHS256, []byte(secret), "exp"},
		{"EdDSA custom", jwt.SigningMethodEdDSA, k.edA, []string{"https://example.test/ext"}},
		{"HS256 wrong key", jwt.SigningMethodHS256, []byte("another secret of 32 bytes......"), []string{"b64"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok := jwt.NewWithClaims(c.method, claims(map[string]any{"role": "admin"}))
			tok.Header["crit"] = c.crit
			s, err := tok.SignedString(c.key)
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.Authenticate(bearerOf(s))
			check(t, err, auth.ErrInvalidToken, text)
			// The same token without crit is good (but for the wrong key).
			delete(tok.Header, "crit")
			if s, err = tok.SignedString(c.key); err != nil {
				t.Fatal(err)
			}
			if _, err = v.Authenticate(bearerOf(s)); (err == nil) == (c.name == "HS256 wrong key") {
				t.Fatalf("without crit: err %v", err)
			}
		})
	}
}

// TestVerifier_Authenticate_NoIssuerOrAudience accepts any iss and aud when
// none is configured.
func TestVerifier_Authenticate_NoIssuerOrAudience(t *testing.T) {
	o := hsOptions()
	o.Issuer, o.Audience = "", ""
	v := mustNew(t, o)
	for _, extra := range []map[string]any{
		{"iss": "anyone", "aud": "anything"}, {"iss": nil, "aud": nil}, {"aud": []string{"a", "b"}},
	} {
		if _, err := v.Authenticate(bearerOf(hs(t, claims(extra)))); err != nil {
			t.Errorf("%v: %v", extra, err)
		}
	}
}

// TestVerifier_Authenticate_PEM verifies RS256 and EdDSA tokens against a
// static public key, in each PEM form an operator may paste.
func TestVerifier_Authenticate_PEM(t *testing.T) {
	k := keys()
	rsaPKCS1 := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&k.rsaA.PublicKey)}))
	for _, c := range []struct {
		name      string
		alg       string
		pem       string
		good, bad func(t *testing.T) string
		other     string // a token of the other asymmetric algorithm
		otherText string
	}{
		{"RS256 PKIX", auth.RS256, pemOf(t, &k.rsaA.PublicKey),
			func(t *testing.T) string { return sign(t, jwt.SigningMethodRS256, k.rsaA, "", claims(nil)) },
			func(t *testing.T) string { return sign(t, jwt.SigningMethodRS256, k.rsaB, "", claims(nil)) },
			sign(t, jwt.SigningMethodEdDSA, k.edA, "", claims(nil)), "Token uses EdDSA, expected RS256"},
		{"RS256 PKCS1", auth.RS256, rsaPKCS1,
			func(t *testing.T) string { return sign(t, jwt.SigningMethodRS256, k.rsaA, "", claims(nil)) },
			func(t *testing.T) string { return sign(t, jwt.SigningMethodRS256, k.rsaB, "", claims(nil)) },
			sign(t, jwt.SigningMethodPS256, k.rsaA, "", claims(nil)), "Token uses PS256, expected RS256"},
		{"RS256 escaped newlines", auth.RS256, strings.ReplaceAll(pemOf(t, &k.rsaA.PublicKey), "\n", `\n`),
			func(t *testing.T) string { return sign(t, jwt.SigningMethodRS256, k.rsaA, "", claims(nil)) },
			func(t *testing.T) string { return sign(t, jwt.SigningMethodRS256, k.rsaB, "", claims(nil)) },
			sign(t, jwt.SigningMethodRS512, k.rsaA, "", claims(nil)), "Token uses RS512, expected RS256"},
		{"EdDSA PKIX", auth.EdDSA, pemOf(t, k.edA.Public()),
			func(t *testing.T) string { return sign(t, jwt.SigningMethodEdDSA, k.edA, "", claims(nil)) },
			func(t *testing.T) string { return sign(t, jwt.SigningMethodEdDSA, k.edB, "", claims(nil)) },
			sign(t, jwt.SigningMethodRS256, k.rsaA, "", claims(nil)), "Token uses RS256, expected EdDSA"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := hsOptions()
			o.Algorithm, o.Secret, o.PublicKey = c.alg, "", c.pem
			v := mustNew(t, o)
			id, err := v.Authenticate(bearerOf(c.good(t)))
			if err != nil || id.Subject != "user-1" {
				t.Fatalf("good token: %+v, %v", id, err)
			}
			_, err = v.Authenticate(bearerOf(c.bad(t)))
			check(t, err, auth.ErrInvalidToken, "Invalid token signature")
			_, err = v.Authenticate(bearerOf(c.other))
			check(t, err, auth.ErrInvalidToken, c.otherText)
			_, err = v.Authenticate(bearerOf(hs(t, claims(nil))))
			check(t, err, auth.ErrInvalidToken, "Token uses HS256, expected "+c.alg)
		})
	}
}

// TestVerifier_Authenticate_KeyConfusion is the classic attack: an HS256
// token MACed with the server's public key, which the attacker knows. It
// must fail in every mode that holds that public key.
func TestVerifier_Authenticate_KeyConfusion(t *testing.T) {
	k := keys()
	rsaPEM, edPEM := pemOf(t, &k.rsaA.PublicKey), pemOf(t, k.edA.Public())
	for _, c := range []struct {
		name, alg, secret, pem, want string
	}{
		{"RS256 pinned", auth.RS256, "", rsaPEM, "Token uses HS256, expected RS256"},
		{"EdDSA pinned", auth.EdDSA, "", edPEM, "Token uses HS256, expected EdDSA"},
		{"auto without secret", auth.Auto, "", rsaPEM, "Token uses HS256, expected RS256"},
		{"auto with secret", auth.Auto, secret, rsaPEM, "Invalid token signature"},
		{"auto with secret, Ed25519", auth.Auto, secret, edPEM, "Invalid token signature"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := hsOptions()
			o.Algorithm, o.Secret, o.PublicKey = c.alg, c.secret, c.pem
			v := mustNew(t, o)
			for _, mac := range []string{c.pem, strings.TrimSpace(c.pem)} {
				forged := sign(t, jwt.SigningMethodHS256, []byte(mac), "", claims(map[string]any{"role": "admin"}))
				_, err := v.Authorize(bearerOf(forged), auth.ReadOnly)
				check(t, err, auth.ErrInvalidToken, c.want)
			}
		})
	}
}

// TestVerifier_Authenticate_AutoPEM accepts HS256 with the secret and RS256
// with the PEM key, and nothing else.
func TestVerifier_Authenticate_AutoPEM(t *testing.T) {
	k := keys()
	o := hsOptions()
	o.Algorithm, o.PublicKey = auth.Auto, pemOf(t, &k.rsaA.PublicKey)
	v := mustNew(t, o)
	for _, tok := range []string{
		hs(t, claims(nil)), sign(t, jwt.SigningMethodRS256, k.rsaA, "", claims(nil)),
	} {
		if _, err := v.Authenticate(tok); err != nil {
			t.Errorf("%.20s: %v", tok, err)
		}
	}
	_, err := v.Authenticate(sign(t, jwt.SigningMethodEdDSA, k.edA, "", claims(nil)))
	check(t, err, auth.ErrInvalidToken, "Token uses EdDSA, expected HS256 or RS256")
	_, err = v.Authenticate(sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", claims(nil)))
	check(t, err, auth.ErrInvalidToken, "Token uses none, expected HS256 or RS256")
}

// TestVerifier_Authenticate_AlgHeader covers alg headers the library knows
// nothing of, or that are missing.
func TestVerifier_Authenticate_AlgHeader(t *testing.T) {
	v := mustNew(t, hsOptions())
	seg := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	body := seg(`{"sub":"x"}`)
	for _, c := range []struct{ header, want string }{
		{`{"alg":"XY999"}`, "Token uses XY999, expected HS256"},
		{`{"alg":"hs256"}`, "Token uses hs256, expected HS256"},
		{`{"typ":"JWT"}`, "Token decode error: token is unverifiable: signing method (alg) is unspecified"},
		{`{"alg":5}`, "Token decode error: token is unverifiable: signing method (alg) is unspecified"},
	} {
		_, err := v.Authenticate(seg(c.header) + "." + body + ".c2ln")
		check(t, err, auth.ErrInvalidToken, c.want)
	}
}

// TestVerifier_Authenticate_CustomRoleClaims reads roles under configured
// claim names, and no longer under the default ones.
func TestVerifier_Authenticate_CustomRoleClaims(t *testing.T) {
	o := hsOptions()
	o.RolesClaim, o.RolesArrayClaim = "perm", "groups"
	o.RoleAdmin, o.RoleReadWrite, o.RoleReadOnly = "queen-admin", "queen-rw", "queen-ro"
	v := mustNew(t, o)
	same := o
	same.RolesClaim, same.RolesArrayClaim = "grants", "grants"
	vs := mustNew(t, same)
	for _, c := range []struct {
		name  string
		v     *auth.Verifier
		extra map[string]any
		want  auth.Level
		roles []string
	}{
		{"single", v, map[string]any{"perm": "queen-rw"}, auth.ReadWrite, []string{"queen-rw"}},
		{"array", v, map[string]any{"groups": []string{"queen-ro", "queen-admin"}}, auth.Admin, []string{"queen-ro", "queen-admin"}},
		{"both", v, map[string]any{"perm": "queen-ro", "groups": []string{"queen-rw"}}, auth.ReadWrite, []string{"queen-ro", "queen-rw"}},
		{"default names ignored", v, map[string]any{"role": "admin", "roles": []string{"queen-admin"}}, auth.Public, nil},
		{"one name for both", vs, map[string]any{"grants": []string{"queen-ro", "queen-rw"}}, auth.ReadWrite, []string{"queen-ro", "queen-rw"}},
		{"one name, string", vs, map[string]any{"grants": "queen-admin"}, auth.Admin, []string{"queen-admin"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, err := c.v.Authenticate(bearerOf(hs(t, claims(c.extra))))
			if err != nil {
				t.Fatal(err)
			}
			if id.Level != c.want || !slices.Equal(id.Roles, c.roles) || id.Subject != "user-1" {
				t.Fatalf("got %+v, want level %s roles %q", id, c.want, c.roles)
			}
		})
	}
}

// TestVerifier_Authorize_Disabled lets everything through.
func TestVerifier_Authorize_Disabled(t *testing.T) {
	log, _ := newLogger()
	v := mustNew(t, auth.Options{Algorithm: "nonsense", Logger: log})
	if v.Enabled() {
		t.Fatal("Enabled: got true, want false")
	}
	for _, h := range []string{"", "Bearer junk"} {
		for _, need := range []auth.Level{auth.Public, auth.ReadOnly, auth.Admin} {
			id, err := v.Authorize(h, need)
			if err != nil || id.Subject != "" {
				t.Errorf("Authorize(%q, %s): got %+v, %v; want pass with no subject", h, need, id, err)
			}
		}
	}
	if !v.Skip("/health") || v.Skip("/api/v1/push") {
		t.Error("Skip must keep its list semantics when disabled")
	}
}

// TestVerifier_Authorize_NotFromNew fails closed.
func TestVerifier_Authorize_NotFromNew(t *testing.T) {
	for name, v := range map[string]*auth.Verifier{"nil": nil, "zero": new(auth.Verifier)} {
		t.Run(name, func(t *testing.T) {
			if !v.Enabled() {
				t.Fatal("Enabled: got false, want true")
			}
			_, err := v.Authorize("Bearer "+hs(t, claims(map[string]any{"role": "admin"})), auth.ReadOnly)
			check(t, err, auth.ErrConfig, "Invalid algorithm configuration")
			if _, err := v.Authorize("", auth.Public); err != nil {
				t.Fatalf("public route: %v", err)
			}
			if v.Skip("/health") {
				t.Fatal("Skip: got true, want false")
			}
			v.Close()
		})
	}
}

// TestVerifier_Skip checks JWT_SKIP_PATHS matching.
func TestVerifier_Skip(t *testing.T) {
	o := hsOptions()
	o.SkipPaths = []string{"/health", "/metrics", "/", "/assets/", "/static"}
	v := mustNew(t, o)
	for path, want := range map[string]bool{
		"/health": true, "/health/": false, "/healthz": false,
		"/metrics": true, "/metrics/prometheus": false,
		"/": true, "/api/v1/push": false, "": false,
		"/assets/": true, "/assets/app.js": true, "/assets": false,
		"/static": true, "/static/x": false,
	} {
		if got := v.Skip(path); got != want {
			t.Errorf("Skip(%q): got %v, want %v", path, got, want)
		}
	}
	def := mustNew(t, hsOptions())
	for path, want := range map[string]bool{
		"/health": true, "/metrics": true, "/metrics/prometheus": true, "/": true, "/api/v1/dlq": false,
	} {
		if got := def.Skip(path); got != want {
			t.Errorf("default Skip(%q): got %v, want %v", path, got, want)
		}
	}
	o.SkipPaths = []string{}
	none := mustNew(t, o)
	if none.Skip("/health") || none.Skip("/") {
		t.Error("an empty list must skip nothing")
	}
}

// TestVerifier_Close is idempotent and leaves static keys working.
func TestVerifier_Close(t *testing.T) {
	v := mustNew(t, hsOptions())
	v.Close()
	v.Close()
	if _, err := v.Authenticate(hs(t, claims(nil))); err != nil {
		t.Fatal(err)
	}
}
