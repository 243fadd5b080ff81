package main

import (
	"encoding/json"
	"testing"
)

// The under-replicated line names each group below its wanted voters (R for
// a data group, min(5, nodes) for the directory) with its voters, from
// GET /api/v1/system/placement's answer; a healthy cluster, one whose
// groups are on every node (R 0) or a single group has none.
func TestUnderReplicated(t *testing.T) {
	for _, c := range []struct{ name, answer, want string }{
		{"healthy", `{"nodes":[{"id":"n1"},{"id":"n2"},{"id":"n3"}],"replicas":3,"groups":[
			{"id":0,"members":["n1","n2","n3"]},{"id":1,"members":["n1","n2","n3"]},{"id":2,"members":["n3","n1","n2"]}]}`, ""},
		{"a forced leave, not repaired", `{"nodes":[{"id":"n1"},{"id":"n2"},{"id":"n4"},{"id":"n5"}],"replicas":3,"groups":[
			{"id":0,"members":["n1","n2","n4","n5"]},{"id":1,"members":["n1","n4","n5"]},{"id":2,"members":["n1","n2"]},{"id":3,"members":["n2","n5"]}]}`,
			"under-replicated: group 2 has 2 of 3 voters (n1, n2); group 3 has 2 of 3 voters (n2, n5)"},
		{"the directory below five of six", `{"nodes":[{"id":"n1"},{"id":"n2"},{"id":"n3"},{"id":"n4"},{"id":"n5"},{"id":"n6"}],"replicas":3,"groups":[
			{"id":0,"members":["n1","n2","n3","n4"]},{"id":1,"members":["n1","n2","n3"]},{"id":2,"members":[]}]}`,
			"under-replicated: group 0 (directory) has 4 of 5 voters (n1, n2, n3, n4)"},
		{"every group on every node", `{"nodes":[{"id":"n1"},{"id":"n2"}],"replicas":0,"groups":[
			{"id":0,"members":["n1","n2"]},{"id":1,"members":["n1"]}]}`, ""},
		{"one group", `{"nodes":[{"id":"n1"},{"id":"n2"},{"id":"n3"}],"replicas":0,"groups":[{"id":1,"members":["n1","n2"]}]}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var p placement
			if err := json.Unmarshal([]byte(c.answer), &p); err != nil {
				t.Fatal(err)
			}
			if got := underReplicated(p); got != c.want {
				t.Fatalf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}
