package server_test

import (
	"net"
	"strings"
	"testing"

	"github.com/queenmq/queen/server"
)

// TestBadInput sends malformed requests: each gets a 4xx with a stable code,
// writes nothing (the following reads find no queue, group or message) and
// the server keeps serving.
func TestBadInput(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	const uuid = "0190b0f0-0000-7000-8000-000000000000"
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"push malformed JSON", "POST", "/api/v1/push", `{"items":[{"queue":"q"`, 400, "invalid_json"},
		{"push empty body", "POST", "/api/v1/push", ``, 400, "empty_body"},
		{"push not an object", "POST", "/api/v1/push", `[{"queue":"q"}]`, 400, "invalid_argument"},
		{"push items not an array", "POST", "/api/v1/push", `{"items":{"queue":"q"}}`, 400, "invalid_argument"},
		{"push items null", "POST", "/api/v1/push", `{"items":null}`, 400, "invalid_argument"},
		{"push queue not a string", "POST", "/api/v1/push", `{"items":[{"queue":5}]}`, 400, "invalid_argument"},
		{"push queue missing", "POST", "/api/v1/push", `{"items":[{"payload":1}]}`, 400, "invalid_argument"},
		{"push queue empty", "POST", "/api/v1/push", `{"items":[{"queue":""}]}`, 400, "invalid_argument"},
		{"push queue control char", "POST", "/api/v1/push", `{"items":[{"queue":"a\u0001b"}]}`, 400, "invalid_argument"},
		{"push partition not a string", "POST", "/api/v1/push", `{"items":[{"queue":"q","partition":1}]}`, 400, "invalid_argument"},
		{"push transactionId not a string", "POST", "/api/v1/push", `{"items":[{"queue":"q","transactionId":{}}]}`, 400, "invalid_argument"},
		{"push traceId not a UUID", "POST", "/api/v1/push", `{"items":[{"queue":"q","traceId":"abc"}]}`, 400, "invalid_argument"},
		{"push second item bad", "POST", "/api/v1/push", `{"items":[{"queue":"q","payload":1},{"queue":"q","traceId":"x"}]}`, 400, "invalid_argument"},
		{"push bad payload", "POST", "/api/v1/push", `{"items":[{"queue":"q","payload":{"a":tru}}]}`, 400, "invalid_json"},
		{"push trailing data", "POST", "/api/v1/push", `{"items":[{"queue":"q"}]} x`, 400, "invalid_json"},
		{"push deep nesting", "POST", "/api/v1/push", `{"items":[{"queue":"q","payload":` + deep + `}]}`, 400, "invalid_json"},
		{"push number beyond a double", "POST", "/api/v1/push", `{"items":[{"queue":"q","payload":{"a":[1,1e999999]}}]}`, 400, "invalid_json"},
		{"push bad escape", "POST", "/api/v1/push", `{"items":[{"queue":"q\x"}]}`, 400, "invalid_json"},
		// Invalid UTF-8 anywhere in a body (RFC 8259 §8.1): stored as sent it
		// would make every pop reply carrying it unreadable, and an id would be
		// reported as another (U+FFFD) that does not ack it. Escaped halves of
		// a surrogate pair likewise.
		{"push payload invalid UTF-8", "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"q\",\"payload\":\"a\xff\xfeb\"}]}", 400, "invalid_utf8"},
		{"push payload key invalid UTF-8", "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"q\",\"payload\":{\"k\xff\":1}}]}", 400, "invalid_utf8"},
		{"push payload overlong", "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"q\",\"payload\":[\"\xc0\xaf\"]}]}", 400, "invalid_utf8"},
		{"push payload encoded surrogate", "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"q\",\"payload\":\"\xed\xa0\x80\"}]}", 400, "invalid_utf8"},
		{"push payload truncated sequence", "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"q\",\"payload\":\"long ascii text then \xe2\x82\"}]}", 400, "invalid_utf8"},
		{"push payload lone surrogate escape", "POST", "/api/v1/push", `{"items":[{"queue":"q","payload":"\ud800"}]}`, 400, "invalid_utf8"},
		{"push payload low surrogate first", "POST", "/api/v1/push", `{"items":[{"queue":"q","payload":"\udc00\ud800"}]}`, 400, "invalid_utf8"},
		{"push transactionId invalid UTF-8", "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"q\",\"transactionId\":\"job-\xff\"}]}", 400, "invalid_utf8"},
		{"push transactionId lone surrogate", "POST", "/api/v1/push", `{"items":[{"queue":"q","transactionId":"order-\udfff"}]}`, 400, "invalid_utf8"},
		{"push queue invalid UTF-8", "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"q\xc3\"}]}", 400, "invalid_utf8"},
		{"push member name invalid UTF-8", "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"q\",\"x\xff\":1}]}", 400, "invalid_utf8"},
		{"ack error text invalid UTF-8", "POST", "/api/v1/ack", "{\"transactionId\":\"t\",\"partitionId\":\"" + uuid + "\",\"status\":\"failed\",\"error\":\"bad\xff\"}", 400, "invalid_utf8"},
		{"configure invalid UTF-8", "POST", "/api/v1/configure", "{\"queue\":\"q\",\"options\":{\"x\":\"\xff\"}}", 400, "invalid_utf8"},
		{"transaction invalid UTF-8", "POST", "/api/v1/transaction", "{\"operations\":[{\"type\":\"push\",\"queue\":\"q\",\"payload\":\"\xf8\x88\x80\x80\x80\"}]}", 400, "invalid_utf8"},
		{"ack missing transactionId", "POST", "/api/v1/ack", `{"partitionId":"` + uuid + `"}`, 400, "invalid_argument"},
		{"ack missing partitionId", "POST", "/api/v1/ack", `{"transactionId":"t"}`, 400, "invalid_argument"},
		{"ack status not a string", "POST", "/api/v1/ack", `{"transactionId":"t","partitionId":"` + uuid + `","status":3}`, 400, "invalid_argument"},
		{"ack batch missing list", "POST", "/api/v1/ack/batch", `{"consumerGroup":"g"}`, 400, "invalid_argument"},
		{"ack batch item without partition", "POST", "/api/v1/ack/batch", `{"acknowledgments":[{"transactionId":"t"}]}`, 400, "invalid_argument"},
		{"configure missing queue", "POST", "/api/v1/configure", `{"options":{}}`, 400, "invalid_argument"},
		{"configure negative option", "POST", "/api/v1/configure", `{"queue":"q","options":{"retryLimit":-1}}`, 400, "invalid_argument"},
		{"configure non-numeric option", "POST", "/api/v1/configure", `{"queue":"q","options":{"leaseTime":"soon"}}`, 400, "invalid_argument"},
		{"configure bool for int", "POST", "/api/v1/configure", `{"queue":"q","options":{"leaseTime":true}}`, 400, "invalid_argument"},
		{"configure int for bool", "POST", "/api/v1/configure", `{"queue":"q","options":{"deadLetterQueue":7}}`, 400, "invalid_argument"},
		{"configure options not an object", "POST", "/api/v1/configure", `{"queue":"q","options":[1]}`, 400, "invalid_argument"},
		{"pop bad subscriptionFrom", "GET", "/api/v1/pop/queue/q?batch=1&consumerGroup=g&subscriptionFrom=yesterday", "", 400, "invalid_argument"},
		{"pop discovery without filter", "GET", "/api/v1/pop?batch=1", "", 400, "invalid_argument"},
		{"transaction unknown op", "POST", "/api/v1/transaction", `{"operations":[{"type":"delete","queue":"q"}]}`, 400, "invalid_argument"},
		{"transaction empty", "POST", "/api/v1/transaction", `{"operations":[]}`, 400, "invalid_argument"},
		{"transaction push then bad ack", "POST", "/api/v1/transaction", `{"operations":[{"type":"push","queue":"q","payload":1},{"type":"ack","transactionId":"t"}]}`, 400, "invalid_argument"},
		{"seek without target", "POST", "/api/v1/consumer-groups/g/queues/q/seek", `{}`, 400, "invalid_argument"},
		{"seek bad timestamp", "POST", "/api/v1/consumer-groups/g/queues/q/seek", `{"timestamp":"noon"}`, 400, "invalid_argument"},
		{"subscription missing timestamp", "POST", "/api/v1/consumer-groups/g/subscription", `{}`, 400, "invalid_argument"},
		{"dlq bad from", "GET", "/api/v1/dlq?from=tuesday", "", 400, "invalid_argument"},
		{"maintenance without enabled", "POST", "/api/v1/system/maintenance", `{}`, 400, "invalid_argument"},
		{"unknown route", "GET", "/api/v1/nope", "", 404, "no_such_route"},
		{"unknown deprecated stream route", "POST", "/api/v1/stream/define", `{}`, 404, "no_such_route"},
		{"wrong method", "GET", "/api/v1/push", "", 405, "method_not_allowed"},
		{"message detail bad partition id", "GET", "/api/v1/messages/not-a-uuid/t", "", 404, "message_not_found"},
		{"delete bad partition id", "DELETE", "/api/v1/messages/not-a-uuid/t", "", 404, "no_dead_letter"},
		{"unknown queue", "GET", "/api/v1/resources/queues/q", "", 404, "queue_not_found"},
		{"seek unknown queue", "POST", "/api/v1/consumer-groups/g/queues/q/seek", `{"toEnd":true}`, 404, "queue_not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.body != "" || tc.method == "POST" {
				body = tc.body
			}
			c.do(tc.method, tc.path, body).expectError(t, tc.status, tc.code)
		})
	}
	// Nothing was written.
	var queues struct {
		Queues []any `json:"queues"`
	}
	c.do("GET", "/api/v1/resources/queues", nil).expect(t, 200).decode(t, &queues)
	if len(queues.Queues) != 0 {
		t.Fatalf("queues after bad input: %v", queues.Queues)
	}
	var groups []any
	c.do("GET", "/api/v1/consumer-groups", nil).expect(t, 200).decode(t, &groups)
	if len(groups) != 0 {
		t.Fatalf("groups after bad input: %v", groups)
	}
	// And the server still serves.
	c.do("GET", "/health", nil).expect(t, 200)
	c.pushOne("q", "", "ok", 1)
}

// TestBadInput_PerItemAckErrors: a partitionId or leaseId that is not a UUID
// names nothing; the item fails on its own, its neighbours are applied.
func TestBadInput_PerItemAckErrors(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "", "m", 1)
	p := c.mustPop(popPath("q", "batch=1"))
	m := p.Messages[0]
	var res []ackResult
	c.do("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": []any{
		map[string]any{"transactionId": "x", "partitionId": "not-a-uuid"},
		map[string]any{"transactionId": "y", "partitionId": m.PartitionID, "leaseId": "not-a-lease"},
		map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID},
		map[string]any{"transactionId": "nope", "partitionId": m.PartitionID},
	}}).expect(t, 200).decode(t, &res)
	if len(res) != 4 {
		t.Fatalf("%d results, want 4", len(res))
	}
	for i, want := range []bool{false, false, true, false} {
		if res[i].Success != want || res[i].Index != i || (!want && res[i].Error == nil) {
			t.Fatalf("item %d: %+v, want success %v", i, res[i], want)
		}
	}
	c.do("POST", "/api/v1/ack", map[string]any{"transactionId": "t", "partitionId": "zzz"}).expect(t, 200).decode(t, &res)
	if len(res) != 1 || res[0].Success || res[0].Error == nil {
		t.Fatalf("single ack with a bad partition id: %+v", res)
	}
	c.mustBeEmpty(popPath("q", "batch=1"))
}

// TestBadInput_OversizeBody: a body above MaxBodyBytes is a 413 with the docs/decisions.md C2
// body; nothing is written and the server keeps serving.
func TestBadInput_OversizeBody(t *testing.T) {
	t.Parallel()
	c := newClientOptions(t, newBroker(t), server.Options{MaxBodyBytes: 1024})
	big := `{"items":[{"queue":"q","payload":"` + strings.Repeat("x", 2048) + `"}]}`
	c.do("POST", "/api/v1/push", big).expectError(t, 413, "body_too_large")
	c.do("GET", "/api/v1/resources/queues/q", nil).expectError(t, 404, "queue_not_found")
	c.pushOne("q", "", "small", 1)
}

// raw sends bytes on a fresh connection and returns the first reply.
func (c *client) raw(req string) string {
	c.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(c.base, "http://"))
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(req)); err != nil {
		c.t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, _ := conn.Read(buf)
	return string(buf[:n])
}

// TestBadInput_RawRequests: requests no HTTP client library would send.
// Bytes that are not HTTP and a bad percent escape get a 400 with the docs/decisions.md C2
// body.
func TestBadInput_RawRequests(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	if got := c.raw("NOT HTTP AT ALL\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 400") || !strings.Contains(got, `"code":"bad_request"`) {
		t.Fatalf("reply to garbage: %q", got)
	}
	if got := c.raw("GET /api/v1/pop/queue/q%zz?batch=1 HTTP/1.1\r\nHost: x\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 400") || !strings.Contains(got, `"code":"invalid_argument"`) {
		t.Fatalf("reply to a bad escape: %q", got)
	}
	c.do("GET", "/health", nil).expect(t, 200)
}

// TestBadInput_MistypedParameters: an integer query parameter that is not an
// integer at or above its minimum is a 400 naming it (batch=-5, 0, 1.5 or abc
// was read as 1 before), a value above a route's cap is capped, and a name
// with an invisible format character (zero width, bidirectional override,
// byte-order mark) is refused wherever a name enters. Nothing is written.
func TestBadInput_MistypedParameters(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for _, tc := range []struct{ path, param string }{
		{"/api/v1/pop/queue/q?batch=-5", "batch"},
		{"/api/v1/pop/queue/q?batch=0", "batch"},
		{"/api/v1/pop/queue/q?batch=1.5", "batch"},
		{"/api/v1/pop/queue/q?batch=abc", "batch"},
		{"/api/v1/pop/queue/q?partitions=0", "partitions"},
		{"/api/v1/pop/queue/q?timeout=-1&wait=true", "timeout"},
		{"/api/v1/pop/queue/q?timeout=soon", "timeout"},
		{"/api/v1/pop/queue/q?leaseSeconds=-30", "leaseSeconds"},
		{"/api/v1/pop?namespace=n&batch=x", "batch"},
		{"/api/v1/dlq?limit=0", "limit"},
		{"/api/v1/dlq?offset=-1", "offset"},
		{"/api/v1/messages?limit=ten", "limit"},
		{"/api/v1/status/queues?offset=1.5", "offset"},
		{"/api/v1/consumer-groups/lagging?minLagSeconds=an+hour", "minLagSeconds"},
		{"/api/v1/traces/names?limit=-2", "limit"},
	} {
		r := c.do("GET", tc.path, nil)
		r.expectError(t, 400, "invalid_argument")
		if !strings.Contains(string(r.body), tc.param+" must be an integer") {
			t.Errorf("GET %s: %s, want an error naming %s", tc.path, r.body, tc.param)
		}
	}
	// Above the cap is capped, not refused.
	c.pushOne("q", "", "a", 1)
	if got := c.mustPop(popPath("q", "batch=999999&partitions=99999")); len(got.Messages) != 1 {
		t.Fatalf("popped %d", len(got.Messages))
	}
	c.do("GET", "/api/v1/dlq?limit=999999", nil).expect(t, 200)

	for _, name := range []string{"orders\u200b", "\u202eredro", "\ufeffq", "a\u2060b"} {
		esc := strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(name,
			"\u200b", "%E2%80%8B"), "\u202e", "%E2%80%AE"), "\ufeff", "%EF%BB%BF"), "\u2060", "%E2%81%A0")
		for _, req := range []struct {
			method, path string
			body         any
		}{
			{"POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": name, "payload": 1}}}},
			{"POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "q", "partition": name, "payload": 1}}}},
			{"POST", "/api/v1/configure", map[string]any{"queue": name}},
			{"GET", "/api/v1/pop/queue/" + esc + "?batch=1", nil},
			{"GET", "/api/v1/pop/queue/q?batch=1&consumerGroup=" + esc, nil},
		} {
			r := c.do(req.method, req.path, req.body)
			r.expectError(t, 400, "invalid_argument")
			if !strings.Contains(string(r.body), "invisible format character") {
				t.Errorf("%s %s with %q: %s", req.method, req.path, name, r.body)
			}
		}
	}
	var queues struct {
		Queues []struct {
			Name string `json:"name"`
		} `json:"queues"`
	}
	c.do("GET", "/api/v1/resources/queues", nil).expect(t, 200).decode(t, &queues)
	if len(queues.Queues) != 1 || queues.Queues[0].Name != "q" {
		t.Fatalf("queues %+v, want only q", queues.Queues)
	}
}

// TestBadInput_TransactionIDsRoundTrip: a transaction id in any Unicode, raw
// or escaped (a surrogate pair, U+FFFD itself), is delivered as pushed and
// acks with the id the pop reported; the bytes that made an id impossible to
// ack (reported as U+FFFD, stored as sent) are refused at push, so ids
// that differ only there cannot collide.
func TestBadInput_TransactionIDsRoundTrip(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.do("POST", "/api/v1/push", `{"items":[{"queue":"u","transactionId":"order-é"},`+
		`{"queue":"u","transactionId":"order-\uFFFD"},{"queue":"u","transactionId":"order-\ud83d\ude00"}]}`).expect(t, 201)
	for _, bad := range []string{"order-\xff", "order-\xfe", `order-\udfff`} {
		c.do("POST", "/api/v1/push", `{"items":[{"queue":"u","transactionId":"`+bad+`"}]}`).expectError(t, 400, "invalid_utf8")
	}
	p := c.mustPop(popPath("u", "batch=10"))
	var got []string
	for _, m := range p.Messages {
		got = append(got, m.TransactionID)
		var res []ackResult
		c.do("POST", "/api/v1/ack", map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID,
			"leaseId": m.LeaseID}).expect(t, 200).decode(t, &res)
		if len(res) != 1 || !res[0].Success {
			t.Fatalf("ack of %q: %+v", m.TransactionID, res)
		}
	}
	if want := []string{"order-é", "order-\uFFFD", "order-😀"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("popped ids %q, want %q", got, want)
	}
}
