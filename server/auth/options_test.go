package auth_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/server/auth"
)

// env is a getenv over a map.
func env(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

// comparable strips the fields reflect.DeepEqual cannot judge.
func comparable(o auth.Options) auth.Options {
	o.Logger, o.Now, o.HTTPClient = nil, nil, nil
	return o
}

// TestOptionsFromEnv_Defaults reads an empty environment as Queen's
// defaults (docs/api.md §16).
func TestOptionsFromEnv_Defaults(t *testing.T) {
	got, err := auth.OptionsFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := auth.Options{
		Enabled:                false,
		Algorithm:              "HS256",
		JWKSRefresh:            3600 * time.Second,
		JWKSTimeout:            5000 * time.Millisecond,
		JWKSUnknownKIDInterval: time.Minute,
		ClockSkew:              30 * time.Second,
		SkipPaths:              []string{"/health", "/metrics/prometheus", "/metrics", "/"},
		RolesClaim:             "role",
		RolesArrayClaim:        "roles",
		RoleAdmin:              "admin",
		RoleReadWrite:          "read-write",
		RoleReadOnly:           "read-only",
	}
	if !reflect.DeepEqual(comparable(got), want) {
		t.Fatalf("got  %+v\nwant %+v", comparable(got), want)
	}
	if got.Logger == nil || got.Now == nil {
		t.Fatal("Logger and Now must be defaulted")
	}
	if d := auth.DefaultOptions(); !reflect.DeepEqual(comparable(d), want) {
		t.Fatalf("DefaultOptions: got %+v", comparable(d))
	}
}

// TestOptionsFromEnv_AllVariables reads every JWT_* variable.
func TestOptionsFromEnv_AllVariables(t *testing.T) {
	got, err := auth.OptionsFromEnv(env(map[string]string{
		"JWT_ENABLED":               "true",
		"JWT_ALGORITHM":             "eddsa",
		"JWT_SECRET":                "s3cret",
		"JWT_PUBLIC_KEY":            "-----BEGIN PUBLIC KEY-----",
		"JWT_JWKS_URL":              "https://idp.test/.well-known/jwks.json",
		"JWT_JWKS_REFRESH_INTERVAL": "600",
		"JWT_JWKS_TIMEOUT_MS":       " 1500 ",
		"JWT_ISSUER":                "https://idp.test",
		"JWT_AUDIENCE":              "queen",
		"JWT_CLOCK_SKEW":            "5",
		"JWT_REQUIRE_EXP":           "true",
		"JWT_SKIP_PATHS":            " /health ,\t/assets/ ,, /",
		"JWT_ROLES_CLAIM":           "perm",
		"JWT_ROLES_ARRAY_CLAIM":     "groups",
		"JWT_ROLE_ADMIN":            "queen-admin",
		"JWT_ROLE_READ_WRITE":       "queen-rw",
		"JWT_ROLE_READ_ONLY":        "queen-ro",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := auth.Options{
		Enabled:                true,
		Algorithm:              "EdDSA",
		Secret:                 "s3cret",
		PublicKey:              "-----BEGIN PUBLIC KEY-----",
		JWKSURL:                "https://idp.test/.well-known/jwks.json",
		JWKSRefresh:            600 * time.Second,
		JWKSTimeout:            1500 * time.Millisecond,
		JWKSUnknownKIDInterval: time.Minute,
		Issuer:                 "https://idp.test",
		Audience:               "queen",
		ClockSkew:              5 * time.Second,
		RequireExpiration:      true,
		SkipPaths:              []string{"/health", "/assets/", "/"},
		RolesClaim:             "perm",
		RolesArrayClaim:        "groups",
		RoleAdmin:              "queen-admin",
		RoleReadWrite:          "queen-rw",
		RoleReadOnly:           "queen-ro",
	}
	if !reflect.DeepEqual(comparable(got), want) {
		t.Fatalf("got  %+v\nwant %+v", comparable(got), want)
	}
}

// TestOptionsFromEnv_Values covers the values with a special reading.
func TestOptionsFromEnv_Values(t *testing.T) {
	for _, c := range []struct {
		name string
		vars map[string]string
		ok   func(auth.Options) bool
	}{
		{"enabled 1", map[string]string{"JWT_ENABLED": "1"}, func(o auth.Options) bool { return o.Enabled }},
		{"enabled false", map[string]string{"JWT_ENABLED": "false"}, func(o auth.Options) bool { return !o.Enabled }},
		{"skew 0 is no leeway", map[string]string{"JWT_CLOCK_SKEW": "0"}, func(o auth.Options) bool { return o.ClockSkew == auth.NoClockSkew }},
		{"algorithm auto", map[string]string{"JWT_ALGORITHM": "AUTO"}, func(o auth.Options) bool { return o.Algorithm == auth.Auto }},
		{"algorithm unknown kept", map[string]string{"JWT_ALGORITHM": "ES256"}, func(o auth.Options) bool { return o.Algorithm == "ES256" }},
		{"skip paths only commas", map[string]string{"JWT_SKIP_PATHS": " , ,"}, func(o auth.Options) bool {
			return o.SkipPaths != nil && len(o.SkipPaths) == 0
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, err := auth.OptionsFromEnv(env(c.vars))
			if err != nil {
				t.Fatal(err)
			}
			if !c.ok(o) {
				t.Fatalf("got %+v", comparable(o))
			}
		})
	}
	o, _ := auth.OptionsFromEnv(env(map[string]string{"JWT_CLOCK_SKEW": "0"}))
	o.EnsureDefaults()
	if o.ClockSkew != auth.NoClockSkew {
		t.Fatalf("EnsureDefaults replaced NoClockSkew with %v", o.ClockSkew)
	}
}

// TestOptionsFromEnv_BadValues names each malformed variable.
func TestOptionsFromEnv_BadValues(t *testing.T) {
	bad := map[string]string{
		"JWT_ENABLED":               "yes please",
		"JWT_JWKS_REFRESH_INTERVAL": "1h",
		"JWT_JWKS_TIMEOUT_MS":       "0",
		"JWT_CLOCK_SKEW":            "-5",
		"JWT_REQUIRE_EXP":           "sometimes",
	}
	_, err := auth.OptionsFromEnv(env(bad))
	if !errors.Is(err, auth.ErrConfig) {
		t.Fatalf("got %v, want ErrConfig", err)
	}
	for name := range bad {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
	_, err = auth.OptionsFromEnv(env(map[string]string{"JWT_JWKS_REFRESH_INTERVAL": "99999999999999"}))
	if err == nil || !strings.Contains(err.Error(), "JWT_JWKS_REFRESH_INTERVAL") {
		t.Fatalf("overflow: got %v", err)
	}
}

// TestOptions_Validate reports each unworkable configuration, naming the
// variable.
func TestOptions_Validate(t *testing.T) {
	k := keys()
	rsaPEM, edPEM := pemOf(t, &k.rsaA.PublicKey), pemOf(t, k.edA.Public())
	on := func(f func(*auth.Options)) auth.Options {
		o := auth.Options{Enabled: true}
		f(&o)
		return o
	}
	for _, c := range []struct {
		name string
		o    auth.Options
		want string // "" valid; else a substring of the error
	}{
		{"disabled, anything goes", auth.Options{Algorithm: "nope", PublicKey: "junk"}, ""},
		{"HS256 with secret", on(func(o *auth.Options) { o.Secret = "s" }), ""},
		{"HS256 without secret", on(func(o *auth.Options) {}), "JWT_SECRET is required"},
		{"HS256 without secret, PEM given", on(func(o *auth.Options) { o.PublicKey = rsaPEM }), "JWT_SECRET is required"},
		{"unknown algorithm", on(func(o *auth.Options) { o.Algorithm = "ES256"; o.Secret = "s" }), `JWT_ALGORITHM "ES256"`},
		{"lower-case algorithm", on(func(o *auth.Options) { o.Algorithm = "rs256"; o.PublicKey = rsaPEM }), `JWT_ALGORITHM "rs256"`},
		{"RS256 without key", on(func(o *auth.Options) { o.Algorithm = auth.RS256; o.Secret = "s" }), "JWT_JWKS_URL or JWT_PUBLIC_KEY"},
		{"EdDSA without key", on(func(o *auth.Options) { o.Algorithm = auth.EdDSA }), "JWT_JWKS_URL or JWT_PUBLIC_KEY"},
		{"RS256 with PEM", on(func(o *auth.Options) { o.Algorithm = auth.RS256; o.PublicKey = rsaPEM }), ""},
		{"RS256 with JWKS", on(func(o *auth.Options) { o.Algorithm = auth.RS256; o.JWKSURL = "https://idp.test/jwks" }), ""},
		{"RS256 with Ed25519 PEM", on(func(o *auth.Options) { o.Algorithm = auth.RS256; o.PublicKey = edPEM }), "JWT_PUBLIC_KEY is an Ed25519 key"},
		{"EdDSA with RSA PEM", on(func(o *auth.Options) {
			o.Algorithm = auth.EdDSA
			o.PublicKey = rsaPEM
			o.JWKSURL = "https://idp.test/jwks"
		}), "JWT_PUBLIC_KEY is an RSA key"},
		{"unparsable PEM", on(func(o *auth.Options) { o.Algorithm = auth.RS256; o.PublicKey = "not a pem" }), "JWT_PUBLIC_KEY: not a PEM block"},
		{"PEM of a private key", on(func(o *auth.Options) {
			o.Algorithm = auth.RS256
			o.PublicKey = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n"
		}), "JWT_PUBLIC_KEY: not an RSA or Ed25519 public key"},
		{"bad JWKS URL", on(func(o *auth.Options) { o.Algorithm = auth.RS256; o.JWKSURL = "idp.test/jwks" }), "JWT_JWKS_URL"},
		{"JWKS URL not http", on(func(o *auth.Options) { o.Algorithm = auth.RS256; o.JWKSURL = "file:///etc/jwks" }), "JWT_JWKS_URL"},
		{"auto with nothing", on(func(o *auth.Options) { o.Algorithm = auth.Auto }), "JWT_SECRET, JWT_PUBLIC_KEY or JWT_JWKS_URL"},
		{"auto with secret", on(func(o *auth.Options) { o.Algorithm = auth.Auto; o.Secret = "s" }), ""},
		{"auto with PEM", on(func(o *auth.Options) { o.Algorithm = auth.Auto; o.PublicKey = edPEM }), ""},
		{"negative refresh", on(func(o *auth.Options) { o.Secret = "s"; o.JWKSRefresh = -time.Second }), "JWT_JWKS_REFRESH_INTERVAL"},
		{"negative timeout", on(func(o *auth.Options) { o.Secret = "s"; o.JWKSTimeout = -time.Second }), "JWT_JWKS_TIMEOUT_MS"},
		{"role with spaces", on(func(o *auth.Options) { o.Secret = "s"; o.RoleAdmin = "admin " }), "JWT_ROLE_ADMIN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.o.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			if !errors.Is(err, auth.ErrConfig) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrConfig naming %q", err, c.want)
			}
			if _, nerr := auth.New(c.o); nerr == nil || nerr.Error() != err.Error() {
				t.Fatalf("New: got %v, want %v", nerr, err)
			}
		})
	}
}
