package fuzz

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/queenmq/queen/server/servertest"
)

// FuzzPush pushes one item whose payload and transaction id are any bytes,
// spliced raw into the body, to a server on a real engine. Every reply is
// JSON that encoding/json reads and UTF-8 (RFC 8259 §8.1; json.Valid alone
// takes invalid UTF-8): the push's, and the pop's that delivers the item.
// A refusal is a 400 with a code; an accepted item round-trips: it pops
// with the transaction id and the payload encoding/json reads from the
// body. A body that is UTF-8, has no escapes and that encoding/json reads
// is accepted.
func FuzzPush(f *testing.F) {
	for _, seed := range []struct{ payload, txn string }{
		{`{"a":1}`, "t"}, {"\"a\xff\xfeb\"", "r1"}, {"{\"k\xff\":1}", "k"}, {"[\"\xc0\xaf\"]", "o"},
		{`"x"`, "job-\xff"}, {`"x"`, `order-\ud800`}, {`"\ud83d\ude00"`, `order-\uFFFD`}, {`"\udc00"`, "s"},
		{`[1,1e999999]`, "n"}, {`null`, "é"}, {`"\u2028"`, "\xef\xbf\xbd"}, {`{"a":[true,false,null,-0.5e-3]}`, ""},
		{"\"\xed\xa0\x80\"", "e"}, {`"ok"`, "order-\xfe"},
	} {
		f.Add([]byte(seed.payload), []byte(seed.txn))
	}
	base := servertest.Start(f, servertest.NewLocalBroker(f))
	hc := &http.Client{Timeout: 30 * time.Second}
	f.Cleanup(hc.CloseIdleConnections)
	call := func(t *testing.T, method, path string, body []byte) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) > 0 && (!json.Valid(out) || !utf8.Valid(out)) {
			t.Fatalf("%s %s answered %d with a body that is not JSON in UTF-8: %q", method, path, resp.StatusCode, out)
		}
		return resp.StatusCode, out
	}
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, payload, txn []byte) {
		// A fresh prefix keeps the id from a earlier run's dedup window.
		prefix := strconv.FormatInt(n.Add(1), 10) + "-"
		var body []byte
		body = append(body, `{"items":[{"queue":"fz","transactionId":"`+prefix...)
		body = append(body, txn...)
		body = append(body, `","payload":`...)
		body = append(body, payload...)
		body = append(body, `}]}`...)
		var sent struct {
			Items []struct {
				TransactionID string `json:"transactionId"`
				Payload       any    `json:"payload"`
			} `json:"items"`
		}
		clean := utf8.Valid(body) && !bytes.ContainsRune(body, '\\') && json.Unmarshal(body, &sent) == nil &&
			len(sent.Items) == 1 && len(prefix)+len(txn) <= 255
		status, out := call(t, "POST", "/api/v1/push", body)
		switch status {
		case http.StatusCreated:
		case http.StatusBadRequest:
			var e struct{ Error, Code string }
			if err := json.Unmarshal(out, &e); err != nil || e.Error == "" || e.Code == "" {
				t.Fatalf("400 without {error, code}: %q", out)
			}
			if clean {
				t.Fatalf("%q refused (%s: %s), but it is UTF-8 JSON without escapes", body, e.Code, e.Error)
			}
			return
		default:
			t.Fatalf("push answered %d: %q", status, out)
		}
		var results []struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(out, &results); err != nil || len(results) != 1 || results[0].Status != "queued" {
			t.Fatalf("push reply %q (%v), want one queued item", out, err)
		}
		if err := json.Unmarshal(body, &sent); err != nil || len(sent.Items) != 1 {
			t.Fatalf("accepted %q, which encoding/json does not read: %v", body, err)
		}
		status, out = call(t, "GET", "/api/v1/pop/queue/fz?batch=10&autoAck=true", nil)
		var popped struct {
			Messages []struct {
				TransactionID string `json:"transactionId"`
				Data          any    `json:"data"`
			} `json:"messages"`
		}
		if status != http.StatusOK || json.Unmarshal(out, &popped) != nil || len(popped.Messages) != 1 {
			t.Fatalf("pop answered %d %q, want the one item", status, out)
		}
		m, want := popped.Messages[0], sent.Items[0]
		if m.TransactionID != want.TransactionID || !reflect.DeepEqual(m.Data, want.Payload) {
			t.Fatalf("pushed %q, popped id %q data %#v, want %q %#v", body, m.TransactionID, m.Data, want.TransactionID, want.Payload)
		}
	})
}
