package auth_test

import (
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queenmq/queen/server/auth"
)

// BenchmarkVerifier_Authorize measures one request's check, header to
// level, for each algorithm: a typical SDK token (sub, iss, aud, iat, nbf,
// exp, role) against a verifier with issuer and audience checks.
func BenchmarkVerifier_Authorize(b *testing.B) {
	k := keys()
	c := claims(map[string]any{"role": "read-write"})
	pemOpts := func(alg, pem string) auth.Options {
		o := hsOptions()
		o.Algorithm, o.Secret, o.PublicKey = alg, "", pem
		return o
	}
	idp := newJWKSServer(b, jwk{"r", &k.rsaA.PublicKey}, jwk{"e", k.edA.Public()})
	jwksOpts := hsOptions()
	jwksOpts.Algorithm, jwksOpts.JWKSURL = auth.Auto, idp.URL
	for _, bc := range []struct {
		name  string
		o     auth.Options
		token string
	}{
		{"HS256", hsOptions(), hs(b, c)},
		{"RS256", pemOpts(auth.RS256, pemOf(b, &k.rsaA.PublicKey)), sign(b, jwt.SigningMethodRS256, k.rsaA, "", c)},
		{"EdDSA", pemOpts(auth.EdDSA, pemOf(b, k.edA.Public())), sign(b, jwt.SigningMethodEdDSA, k.edA, "", c)},
		{"RS256-JWKS", jwksOpts, sign(b, jwt.SigningMethodRS256, k.rsaA, "r", c)},
		{"EdDSA-JWKS", jwksOpts, sign(b, jwt.SigningMethodEdDSA, k.edA, "e", c)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			v := mustNew(b, bc.o)
			h := bearerOf(bc.token)
			if _, err := v.Authorize(h, auth.ReadWrite); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Authorize(h, auth.ReadWrite); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
