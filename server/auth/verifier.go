package auth

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/golang-jwt/jwt/v5"
)

// Verifier checks the Authorization header of a request against the
// configured keys and tells the level it holds. It is safe for concurrent
// use. Build it with New and Close it when done.
//
// A Verifier that did not come from New (nil, or the zero value) fails
// closed: Enabled reports true and every check that needs a token returns
// ErrConfig.
type Verifier struct {
	// disabled is set by New when Options.Enabled is false.
	disabled bool
	// skip are the JWT_SKIP_PATHS entries.
	skip []string
	// parser holds the accepted algorithms and the claim checks; it is
	// read-only after New and shared by all requests.
	parser *jwt.Parser
	// keyfunc is v.key, bound once so that parsing does not allocate a
	// method value per request.
	keyfunc jwt.Keyfunc
	// keys are the accepted algorithms and static keys.
	keys keyConfig
	// expected names the accepted algorithms for "Token uses X, expected Y".
	expected string
	// jwks serves the algorithms with no static key; nil when none.
	jwks *jwks
	// issuer and audience are Options.Issuer and Options.Audience.
	issuer, audience string
	// requireExp is Options.RequireExpiration.
	requireExp bool
	// names are the role claim names when not the defaults; nil otherwise.
	names *claimNames
	// roleAdmin, roleReadWrite and roleReadOnly are the role values.
	roleAdmin, roleReadWrite, roleReadOnly string
	// closeOnce makes Close idempotent.
	closeOnce sync.Once
}

// New validates opts, completes them with defaults and builds a Verifier.
// With Enabled false it returns a Verifier that lets every request through.
//
// With a JWKS URL, New fetches the key set once, waiting at most
// Options.JWKSTimeout, and starts a goroutine that refreshes it until Close.
// A failed first fetch does not fail New: the node starts, logs the
// failure, and answers requests that need the set with ErrJWKS (500 "Failed
// to fetch JWKS") until a refresh succeeds, so that a node can come up while
// the identity provider is down.
func New(opts Options) (*Verifier, error) {
	opts.EnsureDefaults()
	k, err := opts.keys()
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	v := &Verifier{skip: slices.Clone(opts.SkipPaths)}
	if !opts.Enabled {
		v.disabled = true
		log.Info("auth: JWT authentication disabled")
		return v, nil
	}
	v.keys = k
	v.expected = orList(k.algs)
	v.issuer, v.audience, v.requireExp = opts.Issuer, opts.Audience, opts.RequireExpiration
	v.roleAdmin, v.roleReadWrite, v.roleReadOnly = opts.RoleAdmin, opts.RoleReadWrite, opts.RoleReadOnly
	if opts.RolesClaim != "role" || opts.RolesArrayClaim != "roles" {
		v.names = &claimNames{role: opts.RolesClaim, roles: opts.RolesArrayClaim}
	}
	popts := []jwt.ParserOption{
		jwt.WithValidMethods(k.algs),
		jwt.WithTimeFunc(opts.Now),
		jwt.WithIssuedAt(),
	}
	if opts.ClockSkew > 0 {
		popts = append(popts, jwt.WithLeeway(opts.ClockSkew))
	}
	if opts.Issuer != "" {
		popts = append(popts, jwt.WithIssuer(opts.Issuer))
	}
	if opts.Audience != "" {
		popts = append(popts, jwt.WithAudience(opts.Audience))
	}
	if opts.RequireExpiration {
		popts = append(popts, jwt.WithExpirationRequired())
	}
	v.parser = jwt.NewParser(popts...)
	v.keyfunc = v.key

	log.Info("auth: JWT authentication enabled", "algorithm", opts.Algorithm, "accepts", k.algs,
		"issuer", opts.Issuer, "audience", opts.Audience, "requireExp", opts.RequireExpiration, "skipPaths", opts.SkipPaths)
	if k.hmac != nil && len(opts.Secret) < 32 {
		log.Warn("auth: JWT_SECRET is shorter than 32 bytes; HS256 wants a key of at least 256 bits (RFC 7518 §3.2)")
	}
	switch {
	case k.jwks:
		if u, _ := url.Parse(opts.JWKSURL); u != nil && u.Scheme == "http" {
			log.Warn("auth: JWT_JWKS_URL is plain http: whoever can alter the fetch can mint tokens", "url", opts.JWKSURL)
		}
		if v.jwks, err = newJWKS(opts); err != nil {
			return nil, err
		}
	case opts.JWKSURL != "":
		log.Warn("auth: JWT_JWKS_URL is not used: every accepted algorithm has a static key", "url", opts.JWKSURL)
	}
	return v, nil
}

// orList writes algs as "A", "A or B", "A, B or C".
func orList(algs []string) string {
	if len(algs) < 2 {
		return strings.Join(algs, "")
	}
	return strings.Join(algs[:len(algs)-1], ", ") + " or " + algs[len(algs)-1]
}

// Enabled reports whether requests are checked at all (JWT_ENABLED).
func (v *Verifier) Enabled() bool {
	return v == nil || !v.disabled
}

// Skip reports whether path bypasses authentication under JWT_SKIP_PATHS:
// it equals an entry, or starts with an entry longer than "/" that ends in
// "/". path is the request path without its query string. Skip does not
// look at Enabled.
func (v *Verifier) Skip(path string) bool {
	if v == nil {
		return false
	}
	for _, p := range v.skip {
		if path == p || len(p) > 1 && p[len(p)-1] == '/' && strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// Authenticate verifies the token in an Authorization header value and
// returns who it speaks for. The value is "Bearer <jwt>" (the scheme is
// matched case-insensitively) or, without that prefix, the token whole;
// surrounding spaces are ignored. A blank value returns ErrAuthRequired; a
// "Bearer" with nothing after it, ErrInvalidToken "Empty token". A valid
// token with no known role is not an error: its Identity.Level is Public.
//
// With auth disabled it returns an Identity with Level Admin and no
// Subject.
func (v *Verifier) Authenticate(authorization string) (Identity, error) {
	if v == nil || !v.disabled && v.parser == nil {
		return Identity{}, fmt.Errorf("%w: Verifier not made by New", ErrConfig)
	}
	if v.disabled {
		return Identity{Level: Admin}, nil
	}
	token, err := bearer(authorization)
	if err != nil {
		return Identity{}, err
	}
	var (
		c  *claims
		jc jwt.Claims
	)
	if v.names == nil {
		c = new(claims)
		jc = c
	} else {
		cc := &customClaims{names: *v.names}
		c, jc = &cc.claims, cc
	}
	t, err := v.parser.ParseWithClaims(token, jc, v.keyfunc)
	if err != nil {
		return Identity{}, v.reject(t, c, err)
	}
	return v.identity(c), nil
}

// Authorize authenticates the header and checks that its level reaches
// need. need Public checks nothing, not even the header, and returns a zero
// Identity. A valid token whose level is too low returns its Identity with
// ErrForbidden, for the log. With auth disabled every request passes, as
// Authenticate describes.
func (v *Verifier) Authorize(authorization string, need Level) (Identity, error) {
	switch {
	case need == Unset || need > Cluster:
		return Identity{}, fmt.Errorf("%w: a route needs level %v", ErrConfig, need)
	case v != nil && v.disabled:
		return Identity{Level: Admin}, nil
	case need == Public:
		return Identity{}, nil
	}
	id, err := v.Authenticate(authorization)
	if err != nil {
		return Identity{}, err
	}
	if id.Level < min(need, Admin) {
		return id, ErrForbidden
	}
	return id, nil
}

// Close stops the key set refresh and closes the Verifier's idle
// connections to the identity provider. Tokens are still checked afterwards,
// against the keys in hand. Close is idempotent.
func (v *Verifier) Close() {
	if v == nil {
		return
	}
	v.closeOnce.Do(func() {
		if v.jwks != nil {
			v.jwks.close()
		}
	})
}

// bearer extracts the token from an Authorization header value.
func bearer(h string) (string, error) {
	h = strings.TrimSpace(h)
	if h == "" {
		return "", ErrAuthRequired
	}
	const scheme = "bearer"
	if len(h) >= len(scheme) && strings.EqualFold(h[:len(scheme)], scheme) {
		rest := h[len(scheme):]
		if rest == "" {
			return "", invalid("Empty token", nil)
		}
		if rest[0] == ' ' || rest[0] == '\t' {
			return strings.TrimLeft(rest, " \t"), nil
		}
	}
	return h, nil
}

// key is the jwt.Keyfunc: the key for the token's algorithm. The parser has
// already refused algorithms not in v.keys.algs.
//
// It also refuses a token whose header has crit: RFC 7515 §4.1.11 says a
// recipient must reject a JWS that lists an extension it does not
// understand (and that crit is never empty), and this verifier understands
// none, so the token's meaning may depend on something it would ignore.
func (v *Verifier) key(t *jwt.Token) (any, error) {
	if _, ok := t.Header["crit"]; ok {
		return nil, invalid("Token verification failed: critical header extensions (crit) are not supported", nil)
	}
	alg := t.Method.Alg()
	var static any
	switch alg {
	case HS256:
		static = v.keys.hmac
	case RS256:
		static = v.keys.rsa
	case EdDSA:
		static = v.keys.ed
	}
	switch {
	case static != nil:
		return static, nil
	case alg != HS256 && v.jwks != nil:
		return v.jwks.key(t, alg)
	}
	return nil, invalid("Token uses "+alg+", expected "+v.expected, nil)
}

// reject turns a parse failure into Queen's text. t and c are what the
// parser got through before failing (t may be nil).
func (v *Verifier) reject(t *jwt.Token, c *claims, err error) error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	if errors.Is(err, jwt.ErrTokenMalformed) {
		return invalid("Token decode error: "+err.Error(), err)
	}
	if t != nil {
		alg, ok := t.Header["alg"].(string)
		if !ok {
			return invalid("Token decode error: "+err.Error(), err)
		}
		if !slices.Contains(v.keys.algs, alg) {
			return invalid("Token uses "+alg+", expected "+v.expected, err)
		}
	}
	missing := errors.Is(err, jwt.ErrTokenRequiredClaimMissing)
	switch {
	case missing && v.requireExp && c.ExpiresAt == nil:
		return invalid("Token verification failed: token has no expiry (exp), which JWT_REQUIRE_EXP requires", err)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return invalid("Invalid token signature", err)
	case errors.Is(err, jwt.ErrTokenExpired):
		return invalid("Token has expired", err)
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return invalid("Token verification failed: token is not valid yet", err)
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return invalid("Token verification failed: token used before issued", err)
	case errors.Is(err, jwt.ErrTokenInvalidIssuer), missing && v.issuer != "" && c.Issuer == "":
		return invalid("Invalid token issuer", err)
	case errors.Is(err, jwt.ErrTokenInvalidAudience), missing && v.audience != "":
		return invalid("Invalid token audience", err)
	}
	return invalid("Token verification failed: "+err.Error(), err)
}

// identity reads the verified claims.
func (v *Verifier) identity(c *claims) Identity {
	id := Identity{Subject: c.Subject, Level: Public, ID: string(c.UserID), Username: string(c.Username)}
	switch {
	case len(c.Roles) == 0:
		id.Roles = c.Role
	case len(c.Role) == 0:
		id.Roles = c.Roles
	default:
		id.Roles = append(c.Role[:len(c.Role):len(c.Role)], c.Roles...)
	}
	for _, r := range id.Roles {
		id.Level = max(id.Level, v.level(r))
	}
	return id
}

// level is the level one role value gives.
func (v *Verifier) level(role string) Level {
	switch role {
	case v.roleAdmin:
		return Admin
	case v.roleReadWrite:
		return ReadWrite
	case v.roleReadOnly:
		return ReadOnly
	}
	return Public
}
