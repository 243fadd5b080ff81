package auth_test

import (
	"errors"
	"testing"

	"github.com/queenmq/queen/server/auth"
)

// TestLevel_String names each level.
func TestLevel_String(t *testing.T) {
	for l, want := range map[auth.Level]string{
		auth.Unset: "unset", auth.Public: "public", auth.ReadOnly: "read-only", auth.ReadWrite: "read-write",
		auth.Admin: "admin", auth.Cluster: "cluster", 9: "Level(9)",
	} {
		if got := l.String(); got != want {
			t.Errorf("%d: got %q, want %q", l, got, want)
		}
	}
}

// TestVerifier_Authorize_ClusterAndUnset: an admin token reaches the
// node-to-node level, a read-write one does not; a route that declares no
// level fails closed whatever the token, even with auth off.
func TestVerifier_Authorize_ClusterAndUnset(t *testing.T) {
	v := mustNew(t, hsOptions())
	admin := bearerOf(hs(t, claims(map[string]any{"role": "admin"})))
	rw := bearerOf(hs(t, claims(map[string]any{"role": "read-write"})))
	if _, err := v.Authorize(admin, auth.Cluster); err != nil {
		t.Errorf("admin token at cluster level: %v", err)
	}
	if _, err := v.Authorize(rw, auth.Cluster); !errors.Is(err, auth.ErrForbidden) {
		t.Errorf("read-write token at cluster level: %v, want ErrForbidden", err)
	}
	off := mustNew(t, auth.Options{})
	for _, ver := range []*auth.Verifier{v, off} {
		if _, err := ver.Authorize(admin, auth.Unset); !errors.Is(err, auth.ErrConfig) {
			t.Errorf("enabled=%v: unset level: %v, want ErrConfig", ver.Enabled(), err)
		}
	}
}
