package urlquery

import (
	"fmt"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server/wire"
)

// String returns the parameter key ("" when absent).
func String(args *fasthttp.Args, key string) string {
	return string(args.Peek(key))
}

// Bool reads an optional boolean: def when absent, else true only for
// "true" or "1".
func Bool(args *fasthttp.Args, key string, def bool) bool {
	v := args.Peek(key)
	if v == nil {
		return def
	}
	return string(v) == "true" || string(v) == "1"
}

// Int reads an optional integer parameter: def when absent or empty, a
// 400 when it is not an integer of at least low. Callers cap the high end
// where a route has one (a larger value is not a mistake, only more than
// the route serves at once).
func Int(args *fasthttp.Args, key string, def, low int64) (int64, error) {
	v := args.Peek(key)
	if len(v) == 0 {
		return def, nil
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < low {
		return def, wire.BadRequest(fmt.Sprintf("%s must be an integer of at least %d", key, low))
	}
	return n, nil
}

// Page reads limit (default def, at least 1, capped at most) and offset
// (default 0, at least 0).
func Page(args *fasthttp.Args, def, most int64) (limit, offset int, err error) {
	l, err := Int(args, "limit", def, 1)
	if err != nil {
		return 0, 0, err
	}
	o, err := Int(args, "offset", 0, 0)
	return int(min(l, most)), int(min(o, 1<<30)), err
}

// Time reads an optional ISO-8601 timestamp as engine microseconds (0 when
// absent); an unparsable one is a 400.
func Time(args *fasthttp.Args, key string) (int64, error) {
	v := args.Peek(key)
	if len(v) == 0 {
		return 0, nil
	}
	t, ok := wire.ParseTime(string(v))
	if !ok {
		return 0, wire.BadRequest(key + " must be an ISO-8601 timestamp")
	}
	return engine.Micros(t), nil
}
