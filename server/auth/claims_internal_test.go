package auth

import (
	"encoding/json"
	"testing"
)

// TestUnquote_MatchesEncodingJSON: the fast path must decode every literal
// the way encoding/json does, since role values are matched on its result.
func TestUnquote_MatchesEncodingJSON(t *testing.T) {
	for _, lit := range []string{
		`""`, `"admin"`, `"read-write"`, `"a\"b"`, `"\u0041dmin"`, `"caf\u00e9"`, `"café"`,
		"\"bad \xff utf8\"", `"tab\tescaped\\"`, `"\/"`,
	} {
		got, gotErr := unquote([]byte(lit))
		var want string
		wantErr := json.Unmarshal([]byte(lit), &want)
		if got != want || (gotErr == nil) != (wantErr == nil) {
			t.Errorf("unquote(%s): got %q, %v; want %q, %v", lit, got, gotErr, want, wantErr)
		}
	}
}
