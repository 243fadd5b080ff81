package auth

import "strconv"

// Level is an access level. A route declares the level it needs; a token's
// roles give the level it holds. Levels are cumulative: a holder of a level
// may reach every route that needs that level or a lower one
// (READ_ONLY ⊂ READ_WRITE ⊂ ADMIN, docs/api.md §2).
type Level uint8

const (
	// Unset is the zero Level. No route may declare it: the server refuses
	// a route table that does (so a route added without a level fails
	// its tests), and Authorize fails closed on it.
	Unset Level = iota
	// Public routes are never checked (health, metrics, OPTIONS, the
	// dashboard). As a held level it means "no known role": the token is
	// valid but may reach public routes only, so every other route answers
	// 403, as in Queen.
	Public
	// ReadOnly is held by the read-only role (JWT_ROLE_READ_ONLY) and
	// needed by routes that only read.
	ReadOnly
	// ReadWrite is held by the read-write role (JWT_ROLE_READ_WRITE) and
	// needed by push, pop, ack, configure and the other writes.
	ReadWrite
	// Admin is held by the admin role (JWT_ROLE_ADMIN) and needed by
	// deletions and system routes.
	Admin
	// Cluster is needed by node-to-node routes (cluster membership). No
	// role grants it: the server admits the cluster secret there, and
	// Authorize admits an admin token.
	Cluster
)

// String returns "public", "read-only", "read-write" or "admin".
func (l Level) String() string {
	switch l {
	case Public:
		return "public"
	case ReadOnly:
		return "read-only"
	case ReadWrite:
		return "read-write"
	case Admin:
		return "admin"
	case Cluster:
		return "cluster"
	case Unset:
		return "unset"
	}
	return "Level(" + strconv.Itoa(int(l)) + ")"
}

// Identity is who a verified token speaks for.
type Identity struct {
	// Subject is the token's sub claim. The push route stamps it on every
	// message as producerSub. Empty when auth is off.
	Subject string
	// Level is the highest level the token's roles give; Public when none
	// of its roles is known. With auth off it is Admin.
	Level Level
	// Roles lists the token's role values as found, the single-role claim
	// first, then the array claim; unknown values included. For logs.
	Roles []string
	// ID is the proxy's id claim (a string, or a number written in
	// decimal), for logs.
	ID string
	// Username is the proxy's username claim, for logs.
	Username string
}
