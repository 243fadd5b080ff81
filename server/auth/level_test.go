package auth_test

import (
	"testing"

	"github.com/queenmq/queen/server/auth"
)

// TestLevel_String names each level.
func TestLevel_String(t *testing.T) {
	for l, want := range map[auth.Level]string{
		auth.Public: "public", auth.ReadOnly: "read-only", auth.ReadWrite: "read-write", auth.Admin: "admin", 9: "Level(9)",
	} {
		if got := l.String(); got != want {
			t.Errorf("%d: got %q, want %q", l, got, want)
		}
	}
}
