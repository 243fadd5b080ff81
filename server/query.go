package server

import (
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/server/urlquery"
)

// Query-string helpers (docs/api.md §1.2), as package urlquery reads them.

func queryString(args *fasthttp.Args, key string) string { return urlquery.String(args, key) }

func queryBool(args *fasthttp.Args, key string, def bool) bool {
	return urlquery.Bool(args, key, def)
}

func queryInt(args *fasthttp.Args, key string, def, low int64) (int64, error) {
	return urlquery.Int(args, key, def, low)
}

func pageArgs(args *fasthttp.Args, def, most int64) (limit, offset int, err error) {
	return urlquery.Page(args, def, most)
}

func queryTime(args *fasthttp.Args, key string) (int64, error) { return urlquery.Time(args, key) }
