package auth

import (
	"encoding/pem"
	"errors"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// publicKey is a parsed JWT_PUBLIC_KEY: exactly one of rsa and ed is set,
// each boxed once (*rsa.PublicKey or ed25519.PublicKey).
type publicKey struct {
	rsa, ed any
}

// parsePublicKey reads a PEM RSA or Ed25519 public key with the jwt
// library's parsers, which accept PKIX, PKCS#1 (RSA) and certificates.
func parsePublicKey(s string) (publicKey, error) {
	if !strings.Contains(s, "\n") && strings.Contains(s, `\n`) {
		s = strings.ReplaceAll(s, `\n`, "\n")
	}
	b := []byte(s)
	if block, _ := pem.Decode(b); block == nil {
		return publicKey{}, errors.New("not a PEM block")
	}
	if k, err := jwt.ParseRSAPublicKeyFromPEM(b); err == nil {
		return publicKey{rsa: k}, nil
	}
	if k, err := jwt.ParseEdPublicKeyFromPEM(b); err == nil {
		return publicKey{ed: k}, nil
	}
	return publicKey{}, errors.New("not an RSA or Ed25519 public key")
}
