package server

import (
	"errors"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/raft"
)

// A relayed command's error answer becomes the table's sentinel with the
// answer's text, so the node the client reached answers it the same; an
// unknown code is a failed relay.
func TestRefusal_MapsCodesBack(t *testing.T) {
	t.Parallel()
	err := Refusal(fasthttp.StatusInsufficientStorage, []byte(`{"error":"node n2: below reserve","code":"insufficient_storage"}`))
	row, msg, ok := classify(err)
	if !ok || row.code != "insufficient_storage" || row.status != fasthttp.StatusInsufficientStorage || msg != "node n2: below reserve" {
		t.Fatalf("relayed 507: row %+v msg %q ok %v", row, msg, ok)
	}
	if err := Refusal(fasthttp.StatusTeapot, []byte(`{"error":"?","code":"no_such_code"}`)); !errors.Is(err, raft.ErrForward) {
		t.Fatalf("unknown code: err %v, want ErrForward", err)
	}
}
