// Package cors says which browser origins may call the API (the server's
// Options.CORSOrigins, --cors-origins) and writes the CORS headers of
// docs/api.md §1.3 on every answer.
//
// Queen answers "*" to everyone, and that stays the default. A list
// narrows it: a listed origin, or the broker's own (a page it served
// itself, such as /dlq), gets its origin reflected with Vary: Origin, and
// any other Origin is refused before a handler runs (the server answers
// 403 origin_not_allowed from its error table). A request without an Origin
// header (SDKs, curl, other servers) is never refused here: CORS protects
// browsers' users, not the API.
//
// It is apart from package server because it is a policy compiled once and
// applied to every request, with no route's logic in it; the server asks
// Policy.Apply first thing in its handler and maps a refusal to its error.
package cors
