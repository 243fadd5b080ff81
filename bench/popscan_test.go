package bench

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestScanPop(t *testing.T) {
	// The reply shape of docs/api.md §6.4, with payloads that try to mislead a
	// scanner: keys of interest inside data, escaped quotes and brackets in
	// strings, nested arrays.
	body := `{"success":true,"queue":"q","partition":"p0","partitionId":"pid-top","leaseId":"lease-1",
	  "leaseExpiresAt":"2026-01-01T00:00:00.000Z","consumerGroup":"__QUEUE_MODE__","partitionsClaimed":1,
	  "messages":[
	    {"id":"m1","transactionId":"t1","traceId":null,"data":{"transactionId":"evil","s":"a\"}]{[\\","n":[1,[2,{"x":"}"}]],"b":true},
	     "producerSub":null,"createdAt":"2026-01-01T00:00:00.000001Z","partitionId":"pid-1","partition":"p0","leaseId":"lease-1","consumerGroup":"__QUEUE_MODE__","queue":"q","retryCount":0,"deliveryAttempt":1},
	    {"id":"m2","transactionId":"t\"2","data":"just a string","partitionId":"pid-2","leaseId":"","retryCount":0},
	    {"id":"m3","transactionId":"t3","data":-1.5e3,"partitionId":"pid-3"},
	    {"transactionId":"t4","data":null,"partitionId":"pid-4","leaseId":null}
	  ]}`
	if !json.Valid([]byte(body)) {
		t.Fatal("test body is not JSON")
	}
	var r popReply
	if err := scanPop([]byte(body), &r); err != nil {
		t.Fatalf("scanPop: %v", err)
	}
	if got, want := string(r.leaseID), "lease-1"; got != want {
		t.Errorf("leaseId = %q, want %q", got, want)
	}
	var got []string
	for _, m := range r.messages {
		got = append(got, fmt.Sprintf("%s|%s|%s", m.transactionID, m.partitionID, m.leaseID))
	}
	want := []string{"t1|pid-1|lease-1", `t\"2|pid-2|`, "t3|pid-3|", "t4|pid-4|"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("messages = %q, want %q", got, want)
	}

	// The ack body re-embeds the raw strings: it must be valid JSON that
	// names the same transaction ids, falling back to the top-level lease.
	ack := appendAck(nil, &r, "g1")
	var decoded struct {
		Acks []struct {
			TransactionID string `json:"transactionId"`
			PartitionID   string `json:"partitionId"`
			LeaseID       string `json:"leaseId"`
			Status        string `json:"status"`
		} `json:"acknowledgments"`
		Group string `json:"consumerGroup"`
	}
	if err := json.Unmarshal(ack, &decoded); err != nil {
		t.Fatalf("ack body %s: %v", ack, err)
	}
	if decoded.Group != "g1" || len(decoded.Acks) != 4 || decoded.Acks[1].TransactionID != `t"2` ||
		decoded.Acks[1].LeaseID != "lease-1" || decoded.Acks[0].Status != "completed" {
		t.Errorf("ack body decodes to %+v", decoded)
	}
}

func TestScanPop_Empty(t *testing.T) {
	r := popReply{messages: make([]poppedMessage, 3)}
	for _, body := range []string{"", "  ", `{}`, `{"messages":[]}`, `{"success":true,"messages":null,"leaseId":null}`} {
		if err := scanPop([]byte(body), &r); err != nil || len(r.messages) != 0 || r.leaseID != nil {
			t.Errorf("%q: %d messages, lease %q, err %v", body, len(r.messages), r.leaseID, err)
		}
	}
}

func TestScanPop_Malformed(t *testing.T) {
	for _, body := range []string{
		`{"messages":[{"transactionId":"t1"`,
		`{"messages":[{"transactionId":"t1}]}`,
		`{"messages":[1,2]}`,
		`{"leaseId":}`,
		`{"a" 1}`,
		`[`,
		`{"messages":[{"data":{"x":[1,2}`,
	} {
		var r popReply
		if err := scanPop([]byte(body), &r); err == nil {
			t.Errorf("%q: no error", body)
		}
	}
}

func TestScanPop_NoAlloc(t *testing.T) {
	body := []byte(`{"leaseId":"l","messages":[{"transactionId":"t","data":{"a":[1,2,"x"]},"partitionId":"p"}]}`)
	r := popReply{messages: make([]poppedMessage, 0, 4)}
	if n := testing.AllocsPerRun(100, func() { scanPop(body, &r) }); n != 0 {
		t.Fatalf("scanPop allocates %v times", n)
	}
}
