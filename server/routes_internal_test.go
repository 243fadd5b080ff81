package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server/auth"
)

// The production table passes checkRoutes; a row added without an access
// level or a disk class, or with a value past the known ones, is refused
// and named.
func TestCheckRoutes_RefusesUndeclaredRows(t *testing.T) {
	t.Parallel()
	table := (&Server{}).routeTable()
	if err := checkRoutes(table); err != nil {
		t.Fatalf("the route table: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*route)
		want string
	}{
		{"no level", func(r *route) { r.level = auth.Unset }, "declares no access level"},
		{"unknown level", func(r *route) { r.level = auth.Cluster + 1 }, "declares no access level"},
		{"no disk class", func(r *route) { r.disk = diskUnset }, "does not say whether it adds data"},
		{"unknown disk class", func(r *route) { r.disk = perCommand + 1 }, "does not say whether it adds data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := append([]route(nil), table...)
			added := route{method: "POST", pattern: "/api/v1/new", name: "new", level: auth.ReadWrite, disk: addsData}
			tc.edit(&added)
			bad = append(bad, added)
			err := checkRoutes(bad)
			if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "POST /api/v1/new") {
				t.Fatalf("got %v, want ErrInvalid naming POST /api/v1/new: %s", err, tc.want)
			}
		})
	}
}

// Every read of one queue (readsOneQueue) is a linearizable route of the
// table: a route renamed, or one that no longer waits for a read index, is
// refused by name, rather than its reads waiting for every group again.
func TestCheckRoutes_QueueReadsAreLinearizableRoutes(t *testing.T) {
	t.Parallel()
	table := (&Server{}).routeTable()
	for name := range readsOneQueue {
		for _, edit := range []func(*route){
			func(r *route) { r.name += "_renamed" },
			func(r *route) { r.read = local },
		} {
			bad := append([]route(nil), table...)
			for i := range bad {
				if bad[i].name == name {
					edit(&bad[i])
				}
			}
			if err := checkRoutes(bad); !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), name) {
				t.Errorf("route %s edited: checkRoutes = %v, want ErrInvalid naming it", name, err)
			}
		}
	}
}
