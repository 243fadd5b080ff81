// Package auth verifies the JSON Web Tokens of Queen's HTTP API (docs/api.md §2)
// and tells the access level they hold. The HTTP edge calls it per request;
// it knows nothing of HTTP servers and imports no package of the project.
//
// # Use
//
//	opts, err := auth.OptionsFromEnv(os.Getenv) // JWT_* (docs/api.md §16)
//	v, err := auth.New(opts)
//	defer v.Close()
//	// per request, unless !v.Enabled() or v.Skip(path):
//	id, err := v.Authorize(string(authorizationHeader), auth.ReadWrite)
//	// err: errors.Is(...) one of the sentinels below; auth.PublicMessage(err)
//	// is the {"error": "..."} text. id.Subject is producerSub on push.
//
// # Errors
//
// Each rejection matches one sentinel of errors.go; the server's error table
// maps it:
//
//	ErrAuthRequired  401  Authentication required
//	ErrInvalidToken  401  Token has expired | Invalid token signature |
//	                      Invalid token issuer | Invalid token audience |
//	                      Token uses <alg>, expected <alg> | Unknown key ID: <kid> |
//	                      Token verification failed: … | Token decode error: … |
//	                      Empty token
//	ErrForbidden     403  Insufficient permissions
//	ErrJWKS          500  Failed to fetch JWKS
//	ErrConfig        500  Invalid algorithm configuration
//
// # Levels
//
// Public < ReadOnly < ReadWrite < Admin. A token's level is the highest its
// roles give (JWT_ROLE_*; single-role claim JWT_ROLES_CLAIM and array claim
// JWT_ROLES_ARRAY_CLAIM both count). A valid token with no known role holds
// Public: every checked route answers it 403, as Queen does.
//
// # Keys
//
// The algorithm is pinned (JWT_ALGORITHM): the parser refuses any other alg
// header, "none" included, before a key is chosen, and each algorithm only
// ever gets a key of its own kind (the HMAC secret for HS256, an RSA key for
// RS256, an Ed25519 key for EdDSA), so a token MACed with the RSA public key
// is refused whatever the mode. A static PEM key (JWT_PUBLIC_KEY) serves its
// algorithm; the key set at JWT_JWKS_URL serves the others. DESIGN.md tells
// the choices made where Queen's spec is silent.
package auth
