package auth

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// jwks serves keys from the identity provider's JSON Web Key Set through
// keyfunc, which fetches the set at start, refreshes it every
// Options.JWKSRefresh in its own goroutine, refetches it (rate-limited) when
// a token names a key ID the set lacks, and keeps the last good set when a
// fetch fails.
type jwks struct {
	keyfunc keyfunc.Keyfunc
	// ctx lives until close; it ends keyfunc's refresh goroutine and any
	// fetch in flight.
	ctx    context.Context
	cancel context.CancelFunc
	// own is the HTTP client New made, whose idle connections close
	// closes; nil when the caller gave one.
	own *http.Client
	log *slog.Logger
	url string
}

// fetchProbe is put in the context of one key lookup; the refresh error
// handler marks it when a fetch made for that lookup fails.
type fetchProbe struct {
	failed atomic.Bool
}

// probeKey is the context key of a *fetchProbe.
type probeKey struct{}

// newJWKS fetches the key set once and starts the refresh goroutine. A
// failed fetch is logged, not returned.
func newJWKS(o Options) (*jwks, error) {
	ctx, cancel := context.WithCancel(context.Background())
	j := &jwks{ctx: ctx, cancel: cancel, log: o.Logger, url: o.JWKSURL}
	client := o.HTTPClient
	if client == nil {
		var transport *http.Transport
		if t, ok := http.DefaultTransport.(*http.Transport); ok {
			transport = t.Clone()
		} else {
			transport = &http.Transport{Proxy: http.ProxyFromEnvironment}
		}
		client = &http.Client{Transport: transport}
		j.own = client
	}
	noFirstError := true
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{o.JWKSURL}, keyfunc.Override{
		Client:                    client,
		HTTPTimeout:               o.JWKSTimeout,
		NoErrorReturnFirstHTTPReq: &noFirstError,
		// Bounds the wait for the limiter plus the fetch it allows; a
		// lookup that would wait longer fails at once instead.
		RateLimitWaitMax:        o.JWKSTimeout,
		RefreshErrorHandlerFunc: j.fetchFailed,
		RefreshInterval:         o.JWKSRefresh,
		RefreshUnknownKID:       rate.NewLimiter(rate.Every(o.JWKSUnknownKIDInterval), 1),
	})
	if err != nil {
		j.close()
		return nil, fmt.Errorf("%w: JWT_JWKS_URL: %w", ErrConfig, err)
	}
	j.keyfunc = kf
	if n := j.count(); n == 0 {
		j.log.Error(`auth: no JWKS keys yet; requests needing them answer 500 "Failed to fetch JWKS" until a fetch succeeds`,
			"url", j.url, "refresh", o.JWKSRefresh)
	} else {
		j.log.Info("auth: JWKS loaded", "url", j.url, "keys", n)
	}
	return j, nil
}

// fetchFailed is keyfunc's RefreshErrorHandlerFunc: it logs, and marks the
// probe of the lookup that asked for the fetch, if any.
func (j *jwks) fetchFailed(u string) func(context.Context, error) {
	return func(ctx context.Context, err error) {
		if j.ctx.Err() != nil {
			return // closed: the failure is our own cancellation
		}
		if p, ok := ctx.Value(probeKey{}).(*fetchProbe); ok {
			p.failed.Store(true)
		}
		j.log.Warn("auth: JWKS fetch failed; the last good key set stays in force", "url", u, "err", err)
	}
}

// count returns how many keys the set in hand holds.
func (j *jwks) count() int {
	keys, err := j.keyfunc.Storage().KeyReadAll(j.ctx)
	if err != nil {
		return 0
	}
	return len(keys)
}

// key returns the key for a token signed with alg (RS256 or EdDSA): the one
// its kid names, or, without a kid, every key of the set that may serve
// alg. Failures become Queen's texts:
//   - no key set in hand, or the fetch this lookup asked for failed:
//     ErrJWKS "Failed to fetch JWKS" (500);
//   - the kid is not in the set, even after the refresh it may trigger:
//     "Unknown key ID: <kid>".
func (j *jwks) key(t *jwt.Token, alg string) (any, error) {
	kidValue, hasKid := t.Header["kid"]
	kid, ok := kidValue.(string)
	if hasKid && !ok {
		return nil, invalid("Token decode error: kid header is not a string", nil)
	}
	probe := new(fetchProbe)
	key, err := j.keyfunc.KeyfuncCtx(context.WithValue(j.ctx, probeKey{}, probe))(t)
	if err == nil {
		if set, ok := key.(jwt.VerificationKeySet); ok && len(set.Keys) == 0 {
			if j.count() == 0 {
				return nil, jwksUnavailable(nil)
			}
			return nil, invalid("Token verification failed: no key in the key set is for "+alg, nil)
		}
		return key, nil
	}
	if probe.failed.Load() {
		return nil, jwksUnavailable(err)
	}
	keys, rerr := j.keyfunc.Storage().KeyReadAll(j.ctx)
	if rerr != nil || len(keys) == 0 {
		return nil, jwksUnavailable(err)
	}
	for _, k := range keys {
		if k.Marshal().KID == kid {
			return nil, invalid("Token verification failed: key "+kid+" is not for "+alg, err)
		}
	}
	return nil, invalid("Unknown key ID: "+kid, err)
}

// close ends the refresh goroutine and closes idle connections.
func (j *jwks) close() {
	j.cancel()
	if j.own != nil {
		j.own.CloseIdleConnections()
	}
}
