package memory

import "errors"

var (
	// ErrTooLarge is returned by Budget.ReadBody for a body over its
	// maxBody bytes.
	ErrTooLarge = errors.New("memory: body too large")
	// ErrOverloaded is returned by Budget.ReadBody when the budget cannot
	// hold the body.
	ErrOverloaded = errors.New("memory: request bodies in flight exceed the budget")
)
