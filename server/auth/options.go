package auth

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The accepted values of Options.Algorithm (JWT_ALGORITHM), spelled as in
// docs/api.md §16.
const (
	// HS256 verifies HMAC-SHA256 tokens with Options.Secret.
	HS256 = "HS256"
	// RS256 verifies RSA PKCS#1 v1.5 SHA-256 tokens with Options.PublicKey
	// or a key from Options.JWKSURL.
	RS256 = "RS256"
	// EdDSA verifies Ed25519 tokens with Options.PublicKey or a key from
	// Options.JWKSURL.
	EdDSA = "EdDSA"
	// Auto accepts each of the above for which a key is configured, chosen
	// by the token's alg header.
	Auto = "auto"
)

// NoClockSkew, as Options.ClockSkew, checks exp, nbf and iat with no leeway
// at all (JWT_CLOCK_SKEW=0). Zero cannot say so: it takes the default.
const NoClockSkew time.Duration = -1

// Options configures a Verifier. Every field but the last three has an
// environment variable of Queen's (docs/api.md §16); OptionsFromEnv reads them.
// Zero fields take the defaults given in their comments.
type Options struct {
	// Enabled turns authentication on (JWT_ENABLED, default false). When
	// false no route checks anything and the other fields are not used.
	Enabled bool
	// Algorithm is the only signature algorithm accepted (JWT_ALGORITHM):
	// HS256 (default), RS256, EdDSA, or "auto" for any of them that has a
	// key configured. A token signed with anything else, "none" included,
	// is rejected before its signature is looked at.
	Algorithm string
	// Secret is the HMAC key for HS256, used as raw bytes (JWT_SECRET).
	// Required for HS256. Anyone who knows it can mint admin tokens.
	Secret string
	// PublicKey is a PEM public key for RS256 or EdDSA (JWT_PUBLIC_KEY):
	// "PUBLIC KEY" (PKIX, RSA or Ed25519), "RSA PUBLIC KEY" (PKCS#1) or a
	// certificate. Literal "\n" sequences are read as newlines when the
	// value holds no real one, since PEMs often travel that way in env
	// files. For its algorithm it takes precedence over JWKSURL, as in
	// Queen.
	PublicKey string
	// JWKSURL is the identity provider's JSON Web Key Set (JWT_JWKS_URL),
	// for RS256 and EdDSA. Keys are fetched at New, every JWKSRefresh, and
	// when a token names a key ID the set lacks (at most once per
	// JWKSUnknownKIDInterval).
	JWKSURL string
	// JWKSRefresh is how often the key set is fetched again
	// (JWT_JWKS_REFRESH_INTERVAL in seconds, default 3600 s). A failed
	// refresh keeps the last good set.
	JWKSRefresh time.Duration
	// JWKSTimeout bounds one key set fetch (JWT_JWKS_TIMEOUT_MS, default
	// 5000 ms), and so how long New and a request naming an unknown key ID
	// can wait for the identity provider.
	JWKSTimeout time.Duration
	// JWKSUnknownKIDInterval is the least time between two fetches asked
	// for by tokens naming unknown key IDs (default 1 min; no Queen
	// variable). The first such token after a rotation fetches at once;
	// later ones within the interval are answered from the set in hand, so
	// forged key IDs cannot make this node hammer the identity provider.
	JWKSUnknownKIDInterval time.Duration
	// Issuer, when set, must equal the token's iss claim (JWT_ISSUER).
	Issuer string
	// Audience, when set, must be the token's aud claim or one of its
	// entries (JWT_AUDIENCE).
	Audience string
	// ClockSkew is the leeway for exp, nbf and iat (JWT_CLOCK_SKEW in
	// seconds, default 30 s). NoClockSkew disables it.
	ClockSkew time.Duration
	// RequireExpiration refuses a token without an exp claim
	// (JWT_REQUIRE_EXP, default false; this broker's variable, not
	// Queen's). Off, as in Queen, such a token is good until its key is
	// rotated: turn it on when the identity provider always sets exp.
	RequireExpiration bool
	// SkipPaths are request paths that bypass authentication
	// (JWT_SKIP_PATHS, default /health, /metrics/prometheus, /metrics, /).
	// A path matches an entry exactly, or, for an entry longer than "/"
	// that ends in "/", by prefix. nil takes the default; an empty non-nil
	// slice skips nothing.
	SkipPaths []string
	// RolesClaim is the claim holding a single role (JWT_ROLES_CLAIM,
	// default "role").
	RolesClaim string
	// RolesArrayClaim is the claim holding an array of roles
	// (JWT_ROLES_ARRAY_CLAIM, default "roles"). Either claim may hold a
	// string or an array of strings; roles from both count.
	RolesArrayClaim string
	// RoleAdmin is the role value that gives Admin (JWT_ROLE_ADMIN,
	// default "admin").
	RoleAdmin string
	// RoleReadWrite is the role value that gives ReadWrite
	// (JWT_ROLE_READ_WRITE, default "read-write").
	RoleReadWrite string
	// RoleReadOnly is the role value that gives ReadOnly
	// (JWT_ROLE_READ_ONLY, default "read-only").
	RoleReadOnly string
	// Logger receives the configuration at New and every failed key set
	// fetch (default slog.Default()). Rejected requests are not logged
	// here: the server logs what it answers.
	Logger *slog.Logger
	// Now is the clock exp, nbf and iat are checked against (default
	// time.Now). For tests.
	Now func() time.Time
	// HTTPClient fetches the key set (default: a client of the Verifier's
	// own, whose idle connections Close closes). Its Timeout, if any,
	// applies on top of JWKSTimeout.
	HTTPClient *http.Client
}

// defaultSkipPaths returns a fresh copy of JWT_SKIP_PATHS's default.
func defaultSkipPaths() []string {
	return []string{"/health", "/metrics/prometheus", "/metrics", "/"}
}

// DefaultOptions returns the options a zero Options is completed with.
func DefaultOptions() Options {
	var o Options
	o.EnsureDefaults()
	return o
}

// EnsureDefaults fills every zero field with its default.
func (o *Options) EnsureDefaults() {
	if o.Algorithm == "" {
		o.Algorithm = HS256
	}
	if o.JWKSRefresh == 0 {
		o.JWKSRefresh = time.Hour
	}
	if o.JWKSTimeout == 0 {
		o.JWKSTimeout = 5 * time.Second
	}
	if o.JWKSUnknownKIDInterval == 0 {
		o.JWKSUnknownKIDInterval = time.Minute
	}
	if o.ClockSkew == 0 {
		o.ClockSkew = 30 * time.Second
	}
	if o.SkipPaths == nil {
		o.SkipPaths = defaultSkipPaths()
	}
	if o.RolesClaim == "" {
		o.RolesClaim = "role"
	}
	if o.RolesArrayClaim == "" {
		o.RolesArrayClaim = "roles"
	}
	if o.RoleAdmin == "" {
		o.RoleAdmin = "admin"
	}
	if o.RoleReadWrite == "" {
		o.RoleReadWrite = "read-write"
	}
	if o.RoleReadOnly == "" {
		o.RoleReadOnly = "read-only"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate reports the first reason the options cannot work, naming the
// environment variable; the error wraps ErrConfig. Zero fields are judged by
// their defaults. With Enabled false nothing is checked: the other fields
// are not used.
func (o Options) Validate() error {
	_, err := o.keys()
	return err
}

// keyConfig is what Validate derives from the options and New builds on.
type keyConfig struct {
	// algs are the accepted alg header values, in a fixed order.
	algs []string
	// hmac, rsa and ed are the static keys, boxed once so that handing
	// them to the jwt library does not allocate; nil when absent.
	hmac, rsa, ed any
	// jwks is true when some accepted algorithm has no static key and so
	// is served by the key set at JWKSURL.
	jwks bool
}

// keys validates o and works out which algorithms are accepted with which
// keys.
func (o Options) keys() (keyConfig, error) {
	o.EnsureDefaults()
	var k keyConfig
	if !o.Enabled {
		return k, nil
	}
	switch {
	case o.JWKSRefresh < 0:
		return k, configError("JWT_JWKS_REFRESH_INTERVAL must be positive, got %v", o.JWKSRefresh)
	case o.JWKSTimeout < 0:
		return k, configError("JWT_JWKS_TIMEOUT_MS must be positive, got %v", o.JWKSTimeout)
	case o.JWKSUnknownKIDInterval < 0:
		return k, configError("JWKSUnknownKIDInterval must be positive, got %v", o.JWKSUnknownKIDInterval)
	}
	for _, v := range [...]struct{ name, value string }{
		{"JWT_ROLES_CLAIM", o.RolesClaim}, {"JWT_ROLES_ARRAY_CLAIM", o.RolesArrayClaim},
		{"JWT_ROLE_ADMIN", o.RoleAdmin}, {"JWT_ROLE_READ_WRITE", o.RoleReadWrite}, {"JWT_ROLE_READ_ONLY", o.RoleReadOnly},
	} {
		// A stray space would make the claim or role never match, and
		// every token answer 403 with nothing in the logs to say why.
		if strings.TrimSpace(v.value) != v.value {
			return k, configError("%s %q has surrounding spaces", v.name, v.value)
		}
	}
	var rsaKey, edKey any
	if o.PublicKey != "" {
		pub, err := parsePublicKey(o.PublicKey)
		if err != nil {
			return k, fmt.Errorf("%w: JWT_PUBLIC_KEY: %w", ErrConfig, err)
		}
		rsaKey, edKey = pub.rsa, pub.ed
	}
	if o.JWKSURL != "" {
		u, err := url.ParseRequestURI(o.JWKSURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return k, configError("JWT_JWKS_URL %q is not an http(s) URL", o.JWKSURL)
		}
	}
	jwks := o.JWKSURL != ""
	switch o.Algorithm {
	case HS256:
		if o.Secret == "" {
			return k, configError("JWT_SECRET is required when JWT_ALGORITHM is HS256")
		}
		k.algs, k.hmac = []string{HS256}, []byte(o.Secret)
	case RS256:
		if rsaKey == nil && edKey != nil {
			return k, configError("JWT_PUBLIC_KEY is an Ed25519 key; JWT_ALGORITHM RS256 needs an RSA key")
		}
		if rsaKey == nil && !jwks {
			return k, configError("JWT_ALGORITHM RS256 needs JWT_JWKS_URL or JWT_PUBLIC_KEY")
		}
		k.algs, k.rsa, k.jwks = []string{RS256}, rsaKey, rsaKey == nil
	case EdDSA:
		if edKey == nil && rsaKey != nil {
			return k, configError("JWT_PUBLIC_KEY is an RSA key; JWT_ALGORITHM EdDSA needs an Ed25519 key")
		}
		if edKey == nil && !jwks {
			return k, configError("JWT_ALGORITHM EdDSA needs JWT_JWKS_URL or JWT_PUBLIC_KEY")
		}
		k.algs, k.ed, k.jwks = []string{EdDSA}, edKey, edKey == nil
	case Auto:
		if o.Secret == "" && rsaKey == nil && edKey == nil && !jwks {
			return k, configError("JWT_ALGORITHM auto needs JWT_SECRET, JWT_PUBLIC_KEY or JWT_JWKS_URL")
		}
		if o.Secret != "" {
			k.algs, k.hmac = append(k.algs, HS256), []byte(o.Secret)
		}
		if rsaKey != nil || jwks {
			k.algs, k.rsa = append(k.algs, RS256), rsaKey
		}
		if edKey != nil || jwks {
			k.algs, k.ed = append(k.algs, EdDSA), edKey
		}
		k.jwks = jwks && (rsaKey == nil || edKey == nil)
	default:
		return k, configError("JWT_ALGORITHM %q is not one of HS256, RS256, EdDSA, auto", o.Algorithm)
	}
	return k, nil
}

// configError wraps ErrConfig with a message naming the variable.
func configError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
}

// OptionsFromEnv reads Queen's JWT_* variables (docs/api.md §16), and this
// broker's JWT_REQUIRE_EXP, through getenv,
// usually os.Getenv, on top of DefaultOptions. An unset or empty variable
// keeps the default. A malformed number or boolean is an error naming the
// variable (all of them, joined); each wraps ErrConfig. The result is not
// validated: New does that.
//
// Booleans are read by strconv.ParseBool ("true", "1", "false", "0", ...).
// JWT_ALGORITHM is matched case-insensitively and stored in its canonical
// spelling. JWT_CLOCK_SKEW=0 means no leeway (NoClockSkew). JWT_SKIP_PATHS
// is split on commas, each entry trimmed of spaces and tabs, empty entries
// dropped; a value of only commas skips nothing.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	o := DefaultOptions()
	var errs []error
	str := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	// number reads a whole number of units, at least min, into dst; 0
	// (when min allows it) stores zero instead.
	number := func(name string, unit time.Duration, min int64, dst *time.Duration, zero time.Duration) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return
		}
		n, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%w: %s %q is not a whole number", ErrConfig, name, v))
		case n < min:
			errs = append(errs, fmt.Errorf("%w: %s %d is below %d", ErrConfig, name, n, min))
		case n > math.MaxInt64/int64(unit):
			errs = append(errs, fmt.Errorf("%w: %s %d is too large", ErrConfig, name, n))
		case n == 0:
			*dst = zero
		default:
			*dst = time.Duration(n) * unit
		}
	}
	boolean := func(name string, dst *bool) {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%w: %s %q is not a boolean", ErrConfig, name, v))
			}
			*dst = b
		}
	}
	boolean("JWT_ENABLED", &o.Enabled)
	if v := strings.TrimSpace(getenv("JWT_ALGORITHM")); v != "" {
		o.Algorithm = v
		for _, a := range []string{HS256, RS256, EdDSA, Auto} {
			if strings.EqualFold(v, a) {
				o.Algorithm = a
			}
		}
	}
	str("JWT_SECRET", &o.Secret)
	str("JWT_PUBLIC_KEY", &o.PublicKey)
	str("JWT_JWKS_URL", &o.JWKSURL)
	number("JWT_JWKS_REFRESH_INTERVAL", time.Second, 1, &o.JWKSRefresh, 0)
	number("JWT_JWKS_TIMEOUT_MS", time.Millisecond, 1, &o.JWKSTimeout, 0)
	str("JWT_ISSUER", &o.Issuer)
	str("JWT_AUDIENCE", &o.Audience)
	number("JWT_CLOCK_SKEW", time.Second, 0, &o.ClockSkew, NoClockSkew)
	boolean("JWT_REQUIRE_EXP", &o.RequireExpiration)
	if v := getenv("JWT_SKIP_PATHS"); v != "" {
		o.SkipPaths = []string{}
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.Trim(p, " \t"); p != "" {
				o.SkipPaths = append(o.SkipPaths, p)
			}
		}
	}
	str("JWT_ROLES_CLAIM", &o.RolesClaim)
	str("JWT_ROLES_ARRAY_CLAIM", &o.RolesArrayClaim)
	str("JWT_ROLE_ADMIN", &o.RoleAdmin)
	str("JWT_ROLE_READ_WRITE", &o.RoleReadWrite)
	str("JWT_ROLE_READ_ONLY", &o.RoleReadOnly)
	return o, errors.Join(errs...)
}
