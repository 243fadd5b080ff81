package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/server/auth"
)

// clusterSecretHeader carries the cluster secret (Options.ClusterSecret):
// `queen serve --join` and `queen leave` send it to the membership routes,
// and a follower sends it when it replays its spool through the leader.
const clusterSecretHeader = cluster.SecretHeader

// admit checks a routed request against its route's level before the
// handler runs, and records who sent it in p:
//
//   - Public routes are never checked.
//   - A request that carries the right cluster secret comes from a node of
//     the cluster (or its operator): it is admitted on every route, as an
//     admin, and p.node is set. A wrong secret is refused outright.
//   - Cluster routes need that secret, or an admin token when JWT is on;
//     without a secret configured they are closed to everyone else.
//   - Other routes need a token of their level when JWT is on (paths in
//     JWT_SKIP_PATHS excepted); p.subject is then the token's sub. The
//     skip list is matched against the raw path, the one the router
//     matched: fasthttp's ctx.Path() is decoded and normalised, so
//     "/api/v1/resources/queues/a%2F..%2F..%2F..%2F..%2F..%2Fhealth" reads
//     "/health" there while it routes to the queue "a/../../../../../health".
//
// A follower relays a client's request with the client's own headers, so
// the leader checks the same token again: a relay never turns an
// unauthenticated request into an authenticated one.
func (s *Server) admit(ctx *fasthttp.RequestCtx, level auth.Level, p *params) error {
	if level == auth.Public {
		return nil
	}
	if secret := ctx.Request.Header.Peek(clusterSecretHeader); len(secret) > 0 {
		if s.opts.ClusterSecret == "" || !secretEqual(secret, s.opts.ClusterSecret) {
			return errClusterSecret
		}
		p.node = true
		return nil
	}
	header := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)
	switch {
	case level == auth.Cluster && !s.auth.Enabled():
		if s.opts.ClusterSecret == "" {
			return errClusterClosed
		}
		return errClusterSecret
	case !s.auth.Enabled() || (level != auth.Cluster && s.auth.Skip(string(ctx.URI().PathOriginal()))):
		return nil
	}
	id, err := s.auth.Authorize(string(header), level)
	if err != nil {
		if errors.Is(err, auth.ErrForbidden) {
			s.log.Info("forbidden", "path", string(ctx.Path()), "sub", id.Subject, "level", id.Level, "need", level)
		}
		return err
	}
	p.subject = id.Subject
	return nil
}

// secretEqual compares got with the secret in constant time: both are
// hashed first, so neither the content nor the length leaks through timing.
func secretEqual(got []byte, secret string) bool {
	a, b := sha256.Sum256(got), sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}
