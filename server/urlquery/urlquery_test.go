package urlquery_test

import (
	"errors"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server/urlquery"
)

func args(q string) *fasthttp.Args {
	var a fasthttp.Args
	a.Parse(q)
	return &a
}

func TestPage(t *testing.T) {
	for _, tc := range []struct {
		query               string
		wantLimit, wantOffs int
		wantErr             bool
	}{
		{"", 50, 0, false},
		{"limit=7&offset=3", 7, 3, false},
		{"limit=5000", 1000, 0, false}, // capped, not refused
		{"limit=", 50, 0, false},
		{"limit=0", 0, 0, true},
		{"limit=1.5", 0, 0, true},
		{"offset=-1", 0, 0, true},
	} {
		limit, offset, err := urlquery.Page(args(tc.query), 50, 1000)
		if tc.wantErr {
			if !errors.Is(err, engine.ErrInvalid) {
				t.Errorf("%q: err %v, want engine.ErrInvalid", tc.query, err)
			}
			continue
		}
		if err != nil || limit != tc.wantLimit || offset != tc.wantOffs {
			t.Errorf("%q: got %d, %d, %v; want %d, %d", tc.query, limit, offset, err, tc.wantLimit, tc.wantOffs)
		}
	}
}

func TestBool(t *testing.T) {
	for q, want := range map[string]bool{"": true, "w=true": true, "w=1": true, "w=false": false, "w=yes": false, "w=": false} {
		if got := urlquery.Bool(args(q), "w", true); got != want {
			t.Errorf("%q: got %v, want %v", q, got, want)
		}
	}
}

func TestTime(t *testing.T) {
	got, err := urlquery.Time(args("from=2026-01-02T03:04:05.000006Z"), "from")
	if want := int64(1767323045000006); err != nil || got != want {
		t.Errorf("got %d, %v; want %d", got, err, want)
	}
	if got, err := urlquery.Time(args(""), "from"); got != 0 || err != nil {
		t.Errorf("absent: got %d, %v; want 0, nil", got, err)
	}
	if _, err := urlquery.Time(args("from=yesterday"), "from"); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("unparsable: err %v, want engine.ErrInvalid", err)
	}
}
