package server

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"

	"github.com/valyala/fasthttp"
)

// dlqPage is the DLQ page (docs/decisions.md B9): one static file, no build step, that drives
// the public API from the browser: list with the docs/decisions.md B1 filters, payload and
// error view, replay, replay with an edited payload (docs/decisions.md B4), delete.
//
//go:embed web/dlq.html
var dlqPage []byte

// dlqPolicy is the page's Content-Security-Policy: its one inline script
// and one inline style run because their hashes are listed, nothing else
// runs or loads, it talks only to this origin, and no other site may frame
// it (a page that shows payloads and deletes dead letters must not be
// clickjacked, nor run a script a payload smuggled in).
var dlqPolicy = "default-src 'none'; script-src " + inlineHash(dlqPage, "script") +
	"; style-src " + inlineHash(dlqPage, "style") +
	"; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// inlineHash returns the CSP source ('sha256-…') of the first inline
// <tag>…</tag> of page.
func inlineHash(page []byte, tag string) string {
	_, rest, _ := bytes.Cut(page, []byte("<"+tag+">"))
	body, _, _ := bytes.Cut(rest, []byte("</"+tag+">"))
	sum := sha256.Sum256(body)
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// dlqUI answers GET /dlq with the page.
func (s *Server) dlqUI(ctx *fasthttp.RequestCtx, _ *params) {
	h := &ctx.Response.Header
	h.SetContentType("text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", dlqPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBody(dlqPage)
}
