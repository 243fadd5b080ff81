package auth_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: every
// Verifier is closed, and Close must end the JWKS refresh.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestImports keeps auth a leaf (STYLE.md rule 1): the standard library and
// the JWT libraries only, no project package and no fasthttp, so that the
// server owns the HTTP edge and auth can be tested without it.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var p struct{ Imports []string }
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{
		"github.com/golang-jwt/jwt/v5":     true,
		"github.com/MicahParks/keyfunc/v3": true,
		"golang.org/x/time/rate":           true, // the type of keyfunc's unknown-kid limiter
	}
	for _, imp := range p.Imports {
		std := !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".")
		if !std && !allowed[imp] {
			t.Errorf("auth imports %s: only the standard library, jwt, keyfunc and rate are allowed", imp)
		}
	}
}
