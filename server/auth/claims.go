package auth

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
)

// claims is what a token's payload decodes into. Decoding into a struct
// rather than jwt.MapClaims skips a map of boxed values per request; the
// registered claims (exp, nbf, iat, iss, aud, sub) come with the jwt
// library's own decoding and checks.
//
// The role claims have configurable names. With the default names ("role",
// "roles") they decode straight into Role and Roles; with others the
// payload goes through customClaims instead.
type claims struct {
	jwt.RegisteredClaims
	// UserID is the proxy's "id" claim.
	UserID text `json:"id"`
	// Username is the proxy's "username" claim.
	Username text `json:"username"`
	// Role and Roles are the role claims under their default names.
	Role  roles `json:"role"`
	Roles roles `json:"roles"`
}

// claimNames are the configured names of the two role claims.
type claimNames struct {
	role, roles string
}

// customClaims decodes a payload whose role claims have configured names.
// It costs a second pass over the payload, paid only by deployments that
// rename the claims.
type customClaims struct {
	claims
	names claimNames
}

// UnmarshalJSON decodes the fixed claims, then the role claims by name into
// Role (single-role claim first); Roles stays empty.
func (c *customClaims) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &c.claims); err != nil {
		return err
	}
	c.Role, c.Roles = nil, nil
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return err
	}
	for i, name := range [...]string{c.names.role, c.names.roles} {
		if i == 1 && name == c.names.role {
			break
		}
		if raw, ok := members[name]; ok {
			var r roles
			if err := r.UnmarshalJSON(raw); err != nil {
				return err
			}
			c.Role = append(c.Role, r...)
		}
	}
	return nil
}

// text is a claim read as a string: a JSON string as is, a number as
// written; anything else is ignored rather than failing the token.
type text string

// UnmarshalJSON implements json.Unmarshaler.
func (t *text) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		s, err := unquote(b)
		if err != nil {
			return err
		}
		*t = text(s)
	case len(b) > 0 && (b[0] == '-' || b[0] >= '0' && b[0] <= '9'):
		*t = text(b)
	}
	return nil
}

// roles is a role claim: a string or an array of strings. Other members of
// an array, and claims of other shapes, are ignored: an unexpected shape
// gives no role, it does not fail the token.
type roles []string

// UnmarshalJSON implements json.Unmarshaler.
func (r *roles) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '"':
		s, err := unquote(b)
		if err != nil {
			return err
		}
		*r = roles{s}
	case len(b) > 0 && b[0] == '[':
		var all []string
		if json.Unmarshal(b, &all) == nil {
			*r = all
			return nil
		}
		// Some member is not a string: keep the ones that are.
		var items []json.RawMessage
		if err := json.Unmarshal(b, &items); err != nil {
			return err
		}
		out := make(roles, 0, len(items))
		for _, item := range items {
			var s string
			if len(item) > 0 && item[0] == '"' && json.Unmarshal(item, &s) == nil {
				out = append(out, s)
			}
		}
		*r = out
	}
	return nil
}

// unquote decodes a JSON string literal exactly as encoding/json does. One
// without escapes and in valid UTF-8, the usual case, is copied out directly
// instead of going through a second decoder.
func unquote(b []byte) (string, error) {
	if n := len(b); n >= 2 && b[0] == '"' && b[n-1] == '"' {
		if inner := b[1 : n-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
			return string(inner), nil
		}
	}
	var s string
	err := json.Unmarshal(b, &s)
	return s, err
}
