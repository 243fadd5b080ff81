// Package urlquery reads a request's query-string parameters as the HTTP
// API defines them (docs/api.md §1.2): booleans are true only for "true"
// or "1" (what the SDKs send); an integer parameter that is present must
// be a base-10 integer at or above its minimum, else the request is a 400
// naming it (a mistyped batch=1.5 or batch=-5 is refused, not read as the
// default); a timestamp is ISO-8601.
//
// It is apart from package server because these rules are the API's, not
// a route's: every route that takes a page, a flag or a time reads it here,
// and the rules are tested once, apart from any route. Its errors are
// wire.BadRequest (400 invalid_argument in the edge's error table).
package urlquery
