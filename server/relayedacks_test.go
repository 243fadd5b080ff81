package server_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/servertest"
)

// writesFollower is a follower that leads nothing it writes: every push,
// ack and transaction is raft.ErrNotLeader here, as on a follower's node.
type writesFollower struct{ follower }

func (f writesFollower) Propose(ctx context.Context, c engine.Command) (engine.Result, error) {
	switch c.(type) {
	case engine.AckCmd, engine.TransactionCmd:
		return engine.Result{}, raft.ErrNotLeader
	}
	return f.follower.Propose(ctx, c)
}

// writesPair is preparedPair with a writesFollower.
func writesPair(t *testing.T, leaderURL func(leader *client) string) (lb *servertest.LocalBroker, leader, f *client) {
	t.Helper()
	lb = servertest.NewLocalBroker(t)
	opts := server.Options{Logger: quietLogger(), ClusterSecret: testSecret, EncryptionKey: testKey}
	leader = newClientOptions(t, lb, opts)
	addr := strings.TrimPrefix(leaderURL(leader), "http://")
	f = newClientOptions(t, writesFollower{follower{LocalBroker: lb, leaderHTTP: addr}}, opts)
	return lb, leader, f
}

// A follower with the cluster secret reads an ack or a transaction itself
// and sends the command to the leader on the cluster path, as it sends a
// push: the leader's ack and transaction routes never see the request.
// Bad input is the follower's own 400, and a transaction's pushes are
// sealed once, on the follower.
func TestPrepared_FollowerSendsAcksAndTransactionsToTheLeader(t *testing.T) {
	t.Parallel()
	lb, leader, f := writesPair(t, direct)
	leader.configure("sealed", map[string]any{"encryptionEnabled": true})
	leader.pushOne("work", "", "w1", 1)
	leader.pushOne("work", "", "w2", 2)
	leader.pushOne("work", "", "w3", 3)
	m := leader.mustPop(popPath("work", "batch=3")).Messages
	if len(m) != 3 {
		t.Fatalf("popped %d, want 3", len(m))
	}

	var one []ackResult
	f.do("POST", "/api/v1/ack", map[string]any{"transactionId": m[0].TransactionID, "partitionId": m[0].PartitionID,
		"leaseId": m[0].LeaseID, "status": "completed"}).expect(t, http.StatusOK).decode(t, &one)
	if len(one) != 1 || !one[0].Success {
		t.Fatalf("ack through the follower: %+v", one)
	}
	var batch []ackResult
	f.do("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": []any{
		map[string]any{"transactionId": m[1].TransactionID, "partitionId": m[1].PartitionID, "leaseId": m[1].LeaseID, "status": "completed"},
		map[string]any{"transactionId": "none", "partitionId": m[1].PartitionID, "status": "completed"}}}).
		expect(t, http.StatusOK).decode(t, &batch)
	if len(batch) != 2 || !batch[0].Success || batch[0].TransactionID != m[1].TransactionID || batch[1].TransactionID != "none" {
		t.Fatalf("ack batch through the follower: %+v", batch)
	}

	tx := f.do("POST", "/api/v1/transaction", map[string]any{"operations": []any{
		map[string]any{"type": "ack", "transactionId": m[2].TransactionID, "partitionId": m[2].PartitionID, "status": "completed"},
		map[string]any{"type": "push", "items": []any{map[string]any{"queue": "sealed", "transactionId": "s1",
			"payload": map[string]any{"card": "TX-MARKER"}}}},
	}, "requiredLeases": []string{m[2].LeaseID}}).expect(t, http.StatusOK).object(t)
	if tx["success"] != true {
		t.Fatalf("transaction through the follower: %v", tx)
	}
	leader.mustBeEmpty(popPath("work", "batch=3")) // all three acked
	s := leader.mustPop(popPath("sealed", "batch=10")).Messages
	if len(s) != 1 || !sameJSON(t, s[0].Data, `{"card":"TX-MARKER"}`) {
		t.Fatalf("the transaction's push popped %+v, want its payload opened once", s)
	}
	if raw := stored(t, lb, s[0].PartitionID, "s1"); !isEnvelope(raw) || bytes.Contains(raw, []byte("MARKER")) {
		t.Fatalf("the transaction's push to an encrypted queue is stored as %s", raw)
	}

	for name, want := range map[string]float64{
		`queen_http_requests_total{route="propose_relayed",status="2xx"}`: 3,
		`queen_http_requests_total{route="ack",status="2xx"}`:             0,
		`queen_http_requests_total{route="ack_batch",status="2xx"}`:       0,
		`queen_http_requests_total{route="transaction",status="2xx"}`:     0,
	} {
		if got := leader.metric(name); got != want {
			t.Errorf("leader %s = %v, want %v", name, got, want)
		}
	}
	f.do("POST", "/api/v1/ack", map[string]any{"partitionId": m[0].PartitionID}).expectError(t, http.StatusBadRequest, "invalid_argument")
	f.do("POST", "/api/v1/transaction", map[string]any{"operations": []any{map[string]any{"type": "push", "items": []any{
		map[string]any{"payload": 1}}}}}).expectError(t, http.StatusBadRequest, "invalid_argument")
	if got := leader.metric(`queen_http_requests_total{route="propose_relayed",status="2xx"}`); got != 3 {
		t.Errorf("bad input reached the leader: %v commands, want 3", got)
	}
}

// A leader of a version whose command table does not relay a transaction
// refuses it on the cluster path before proposing it (400
// not_preparable): the follower then relays the client's request whole,
// and the leader reads and seals it itself.
func TestPrepared_OlderLeaderGetsTheTransactionRelayed(t *testing.T) {
	t.Parallel()
	lb, leader, f := writesPair(t, func(leader *client) string {
		return olderLeader(t, leader, http.StatusBadRequest, "not_preparable", "raft: command cannot be prepared for another node")
	})
	leader.configure("sealed", map[string]any{"encryptionEnabled": true})
	tx := f.do("POST", "/api/v1/transaction", map[string]any{"operations": []any{
		map[string]any{"type": "push", "items": []any{map[string]any{"queue": "sealed", "transactionId": "o1",
			"payload": map[string]any{"card": "OLD-MARKER"}}}},
	}}).expect(t, http.StatusOK).object(t)
	if tx["success"] != true {
		t.Fatalf("transaction via a follower of an older leader: %v", tx)
	}
	s := leader.mustPop(popPath("sealed", "batch=10")).Messages
	if len(s) != 1 || !sameJSON(t, s[0].Data, `{"card":"OLD-MARKER"}`) {
		t.Fatalf("popped %+v, want the payload sealed once", s)
	}
	if raw := stored(t, lb, s[0].PartitionID, "o1"); !isEnvelope(raw) {
		t.Fatalf("stored as %s", raw)
	}
	if got := leader.metric(`queen_http_requests_total{route="transaction",status="2xx"}`); got != 1 {
		t.Errorf("the leader's transaction route answered %v relayed transactions, want 1", got)
	}
}

// Below the leader's disk reserve the cluster path serves what the
// client's own route would: a follower's ack goes through (consumers go on
// below the reserve), a transaction, which adds data, is refused 507, and
// nothing of it is written.
func TestPrepared_BelowReserveAcksGoOnAndTransactionsAreRefused(t *testing.T) {
	t.Parallel()
	lb := servertest.NewLocalBroker(t)
	opts := server.Options{Logger: quietLogger(), ClusterSecret: testSecret}
	leader, space := newDiskClient(t, lb, opts)
	f := newClientOptions(t, writesFollower{follower{LocalBroker: lb, leaderHTTP: strings.TrimPrefix(leader.base, "http://")}}, opts)
	leader.pushOne("d", "", "w1", 1)
	m := leader.mustPop(popPath("d", "batch=1")).Messages
	space.SetFree(63 * mib)

	var acks []ackResult
	f.do("POST", "/api/v1/ack", map[string]any{"transactionId": m[0].TransactionID, "partitionId": m[0].PartitionID,
		"leaseId": m[0].LeaseID, "status": "completed"}).expect(t, http.StatusOK).decode(t, &acks)
	if len(acks) != 1 || !acks[0].Success {
		t.Fatalf("ack through the follower below the reserve: %+v", acks)
	}
	f.do("POST", "/api/v1/transaction", map[string]any{"operations": []any{
		map[string]any{"type": "push", "items": []any{map[string]any{"queue": "d", "transactionId": "t1", "payload": 2}}}}}).
		expectInsufficientStorage(t, "local")
	for name, want := range map[string]float64{
		`queen_http_requests_total{route="propose_relayed",status="2xx"}`: 1,
		`queen_http_requests_total{route="propose_relayed",status="5xx"}`: 1,
	} {
		if got := leader.metric(name); got != want {
			t.Errorf("leader %s = %v, want %v", name, got, want)
		}
	}
	leader.mustBeEmpty(popPath("d", "batch=10"))
}
