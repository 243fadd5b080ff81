package auth_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/queenmq/queen/server/auth"
)

// TestPublicMessage gives Queen's text for each sentinel, and nothing for
// foreign errors.
func TestPublicMessage(t *testing.T) {
	expired := &auth.Error{Kind: auth.ErrInvalidToken, Message: "Token has expired", Cause: errors.New("secret detail")}
	for _, c := range []struct {
		err  error
		want string
	}{
		{auth.ErrAuthRequired, "Authentication required"},
		{auth.ErrForbidden, "Insufficient permissions"},
		{auth.ErrJWKS, "Failed to fetch JWKS"},
		{auth.ErrConfig, "Invalid algorithm configuration"},
		{fmt.Errorf("wrapped: %w", auth.ErrForbidden), "Insufficient permissions"},
		{expired, "Token has expired"},
		{fmt.Errorf("wrapped: %w", expired), "Token has expired"},
		{errors.New("other"), ""},
	} {
		if got := auth.PublicMessage(c.err); got != c.want {
			t.Errorf("PublicMessage(%v): got %q, want %q", c.err, got, c.want)
		}
	}
	cause := errors.New("token is expired")
	e := &auth.Error{Kind: auth.ErrInvalidToken, Message: "Token has expired", Cause: cause}
	if !errors.Is(e, auth.ErrInvalidToken) || !errors.Is(e, cause) {
		t.Error("Error must unwrap to its kind and its cause")
	}
	if got, want := e.Error(), "auth: Token has expired: token is expired"; got != want {
		t.Errorf("Error(): got %q, want %q", got, want)
	}
}
