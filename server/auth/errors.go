package auth

import (
	"errors"
	"strings"
)

// Sentinel errors. The HTTP edge maps them with errors.Is to a status and a
// machine code, and takes the body text from PublicMessage. Every error
// Authenticate and Authorize return matches exactly one of them.
var (
	// ErrAuthRequired is returned when the request carries no credentials:
	// no Authorization header, or one that is blank. Queen answers 401
	// "Authentication required".
	ErrAuthRequired = errors.New("auth: authentication required")
	// ErrInvalidToken is returned when a token is present but is not
	// accepted: malformed, badly signed, expired, from another issuer or
	// audience, signed with an algorithm or key this node does not accept.
	// It always comes wrapped in an *Error whose Message is one of Queen's
	// 401 texts ("Token has expired", "Unknown key ID: k1", ...).
	ErrInvalidToken = errors.New("auth: invalid token")
	// ErrForbidden is returned by Authorize when the token is valid but its
	// roles do not reach the level the route needs. Queen answers 403
	// "Insufficient permissions".
	ErrForbidden = errors.New("auth: insufficient permissions")
	// ErrJWKS is returned when a token needs a key from JWT_JWKS_URL and no
	// usable key set could be fetched: the identity provider has not answered
	// since start, or a refresh asked for by an unknown key ID failed. Queen
	// answers 500 "Failed to fetch JWKS". It is the server's fault, not the
	// client's, so clients retry it.
	ErrJWKS = errors.New("auth: JWKS unavailable")
	// ErrConfig is returned by OptionsFromEnv, Validate and New for a
	// configuration that cannot work; the message names the environment
	// variable. At request time it is returned only by a Verifier that did
	// not come from New (a nil or zero Verifier fails closed). Queen answers
	// 500 "Invalid algorithm configuration".
	ErrConfig = errors.New("auth: invalid configuration")
)

// Queen's public texts for the sentinels that carry no detail of their own.
const (
	textAuthRequired = "Authentication required"
	textForbidden    = "Insufficient permissions"
	textJWKS         = "Failed to fetch JWKS"
	textConfig       = "Invalid algorithm configuration"
)

// Error is a rejection that carries the exact text Queen puts in the
// {"error": "..."} body. Kind is the sentinel it matches with errors.Is;
// Cause, when set, is the library error behind it, for logs only.
type Error struct {
	// Kind is ErrInvalidToken, ErrJWKS or ErrConfig.
	Kind error
	// Message is the public text, safe to send to the client.
	Message string
	// Cause is the underlying error; it may hold details not meant for the
	// client (URLs, library internals) and is never part of Message.
	Cause error
}

// Error returns "auth: " followed by the public text and, if any, the cause.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("auth: ")
	b.WriteString(e.Message)
	if e.Cause != nil {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	}
	return b.String()
}

// Unwrap lets errors.Is see both the sentinel and the cause.
func (e *Error) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Cause}
}

// PublicMessage returns the text Queen sends in the error body for err, or ""
// when err did not come from this package. It never includes a cause.
func PublicMessage(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Message
	}
	switch {
	case errors.Is(err, ErrAuthRequired):
		return textAuthRequired
	case errors.Is(err, ErrForbidden):
		return textForbidden
	case errors.Is(err, ErrJWKS):
		return textJWKS
	case errors.Is(err, ErrConfig):
		return textConfig
	}
	return ""
}

// invalid builds an ErrInvalidToken rejection with Queen's text.
func invalid(message string, cause error) error {
	return &Error{Kind: ErrInvalidToken, Message: message, Cause: cause}
}

// jwksUnavailable builds an ErrJWKS rejection.
func jwksUnavailable(cause error) error {
	return &Error{Kind: ErrJWKS, Message: textJWKS, Cause: cause}
}
