// Package wire is the broker's JSON on the wire, without reflection: Writer
// appends a reply document to a byte slice, Scanner walks a request body
// once, validating it as it goes, and hands raw values (payloads) back as
// sub-slices of the body, never re-encoded.
//
// Bad input comes back as *Error, whose Kind (ErrInvalidJSON, ErrEmptyBody
// or engine.ErrInvalid) the HTTP edge's error table maps to a 400 and whose
// Msg is the client's text. The package knows nothing of HTTP: the query-
// string helpers and the error table stay in package server.
package wire
