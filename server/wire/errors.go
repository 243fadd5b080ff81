package wire

import (
	"errors"

	"github.com/queenmq/queen/engine"
)

var (
	// ErrEmptyBody is returned when a body that must be an object is empty.
	ErrEmptyBody = errors.New("server: empty request body")
	// ErrInvalidJSON is returned when a body is not valid JSON.
	ErrInvalidJSON = errors.New("server: invalid JSON")
	// ErrInvalidUTF8 is returned when a string in a body is not UTF-8 or
	// escapes half of a UTF-16 surrogate pair (RFC 8259 §8.1, §8.2).
	ErrInvalidUTF8 = errors.New("server: invalid UTF-8")
)

// Error carries the client-facing text of bad input; Kind is the sentinel
// that picks the HTTP edge's error-table row (ErrInvalidJSON, ErrInvalidUTF8, or
// engine.ErrInvalid for a well-formed value of the wrong type).
type Error struct {
	Kind error
	Msg  string
}

func (e *Error) Error() string { return e.Kind.Error() + ": " + e.Msg }
func (e *Error) Unwrap() error { return e.Kind }

// BadRequest is a 400 invalid_argument with msg as the client's text.
func BadRequest(msg string) error { return &Error{Kind: engine.ErrInvalid, Msg: msg} }

// invalidJSON is a 400 invalid_json.
func invalidJSON(msg string) error {
	return &Error{Kind: ErrInvalidJSON, Msg: "Invalid JSON: " + msg}
}
