package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/rafttest"
	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/servertest"
)

// Two valid keys and a malformed one (63 hex characters).
const (
	testKey      = "8f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
	otherKey     = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	malformedKey = "8f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f"
)

// newKeyedClient serves b with an encryption key.
func newKeyedClient(t *testing.T, b server.Broker, key string) *client {
	return newClientOptions(t, b, server.Options{EncryptionKey: key})
}

// stored returns the payload bytes the broker holds for a live message.
func stored(t *testing.T, b server.Broker, partitionID, txn string) []byte {
	t.Helper()
	part, err := engine.ParseID(partitionID)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.MessageAt(part, txn)
	if err != nil {
		t.Fatalf("MessageAt(%s, %s): %v", partitionID, txn, err)
	}
	return m.Payload
}

// isEnvelope reports whether b is Queen's envelope: an object of exactly
// encrypted, iv (16 bytes) and authTag (16 bytes), standard base64.
func isEnvelope(b []byte) bool {
	var m map[string]string
	if json.Unmarshal(b, &m) != nil || len(m) != 3 {
		return false
	}
	iv, err1 := base64.StdEncoding.DecodeString(m["iv"])
	tag, err2 := base64.StdEncoding.DecodeString(m["authTag"])
	_, err3 := base64.StdEncoding.DecodeString(m["encrypted"])
	return err1 == nil && err2 == nil && err3 == nil && len(iv) == 16 && len(tag) == 16 && m["encrypted"] != ""
}

// messageDetail reads GET /messages/{pid}/{txn}.
type messageDetail struct {
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload"`
	Data        json.RawMessage `json:"data"`
	IsEncrypted bool            `json:"isEncrypted"`
}

func (c *client) detail(partitionID, txn string) messageDetail {
	c.t.Helper()
	var d messageDetail
	c.do("GET", "/api/v1/messages/"+partitionID+"/"+txn, nil).expect(c.t, 200).decode(c.t, &d)
	return d
}

// dlqRows reads the DLQ with isEncrypted.
type encryptedRow struct {
	TransactionID string          `json:"transactionId"`
	Data          json.RawMessage `json:"data"`
	IsEncrypted   *bool           `json:"isEncrypted"`
}

func (c *client) dlqRows(query string) []encryptedRow {
	c.t.Helper()
	var page struct {
		Messages []encryptedRow `json:"messages"`
	}
	c.do("GET", "/api/v1/dlq?"+query, nil).expect(c.t, 200).decode(c.t, &page)
	return page.Messages
}

// sameJSON compares two JSON texts as values.
func sameJSON(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("bad JSON %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return bytes.Equal(gb, wb)
}

// The docs/semantics.md §16.37 path end to end: pushed payloads are sealed before the broker
// sees them and every read path gives the original JSON back.
func TestEncryption_Semantics16_37_PushPopDetailDLQReplay(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	c := newKeyedClient(t, b, testKey)
	opts := c.configure("q", map[string]any{"encryptionEnabled": true})["options"].(map[string]any)
	if opts["encryptionEnabled"] != true {
		t.Fatalf("configure options %v", opts)
	}
	const payload = `{"orderId":8812,"card":"4111-MARKER","lines":[1,2,3],"note":"h\u00e9llo"}`
	res := c.pushOne("q", "", "m1", json.RawMessage(payload))
	if raw := stored(t, b, res.PartitionID, "m1"); !isEnvelope(raw) || bytes.Contains(raw, []byte("MARKER")) {
		t.Fatalf("stored payload is not an envelope: %s", raw)
	}
	if d := c.detail(res.PartitionID, "m1"); !sameJSON(t, d.Payload, payload) || !sameJSON(t, d.Data, payload) || !d.IsEncrypted {
		t.Fatalf("message detail %+v", d)
	}

	p := c.mustPop(popPath("q", "batch=1"))
	if got := p.Messages[0].Data; !sameJSON(t, got, payload) {
		t.Fatalf("popped data %s, want %s", got, payload)
	}
	c.ack(p.Messages[0], "dlq", "poison")
	rows := c.dlqRows("queue=q")
	if len(rows) != 1 || !sameJSON(t, rows[0].Data, payload) || rows[0].IsEncrypted == nil || !*rows[0].IsEncrypted {
		t.Fatalf("dlq rows %+v", rows)
	}
	if d := c.detail(res.PartitionID, "m1"); d.Status != "dead_letter" || !sameJSON(t, d.Payload, payload) || !d.IsEncrypted {
		t.Fatalf("message detail after dead-lettering %+v", d)
	}

	// Replay re-pushes the stored envelope as it is: not sealed twice, so it
	// pops back as the original JSON.
	var replay struct {
		ReplayedAs pushResult `json:"replayedAs"`
	}
	c.do("POST", "/api/v1/messages/"+res.PartitionID+"/m1/retry", nil).expect(t, 200).decode(t, &replay)
	newTxn := replay.ReplayedAs.TransactionID
	if raw := stored(t, b, res.PartitionID, newTxn); !isEnvelope(raw) {
		t.Fatalf("replayed message stored as %s", raw)
	}
	p = c.mustPop(popPath("q", "batch=1"))
	if m := p.Messages[0]; m.TransactionID != newTxn || !sameJSON(t, m.Data, payload) {
		t.Fatalf("replayed message popped as %s %s", m.TransactionID, m.Data)
	}

	// A replay with a corrected payload (docs/decisions.md B4) is sealed at the edge.
	c.ack(p.Messages[0], "dlq", "again")
	const fixed = `{"orderId":8812,"fixed":"CORRECTED"}`
	c.do("POST", "/api/v1/messages/"+res.PartitionID+"/"+newTxn+"/retry", `{"data":`+fixed+`}`).expect(t, 200).decode(t, &replay)
	if raw := stored(t, b, res.PartitionID, replay.ReplayedAs.TransactionID); !isEnvelope(raw) || bytes.Contains(raw, []byte("CORRECTED")) {
		t.Fatalf("corrected replay stored as %s", raw)
	}
	if m := c.mustPop(popPath("q", "batch=1")).Messages[0]; !sameJSON(t, m.Data, fixed) {
		t.Fatalf("corrected replay popped as %s", m.Data)
	}
}

// A transaction's push operations are sealed like pushes; a queue without
// the flag, on the same server, stores plaintext.
func TestEncryption_TransactionAndUnencryptedQueue(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	c := newKeyedClient(t, b, testKey)
	c.configure("secret", map[string]any{"encryptionEnabled": true})
	var tx struct {
		Success bool `json:"success"`
		Results []struct {
			TransactionID string `json:"transactionId"`
			PartitionID   string `json:"partitionId"`
		} `json:"results"`
	}
	c.do("POST", "/api/v1/transaction", map[string]any{"operations": []map[string]any{
		{"type": "push", "items": []map[string]any{{"queue": "secret", "payload": map[string]any{"tx": "T1"}, "transactionId": "t1"}}},
		{"type": "push", "queue": "open", "data": map[string]any{"tx": "T2"}, "transactionId": "t2"},
	}}).expect(t, 200).decode(t, &tx)
	if !tx.Success || len(tx.Results) != 2 {
		t.Fatalf("transaction %+v", tx)
	}
	if raw := stored(t, b, tx.Results[0].PartitionID, "t1"); !isEnvelope(raw) {
		t.Fatalf("transaction push to an encrypted queue stored %s", raw)
	}
	if raw := stored(t, b, tx.Results[1].PartitionID, "t2"); string(raw) != `{"tx":"T2"}` {
		t.Fatalf("transaction push to a plain queue stored %s", raw)
	}
	if m := c.mustPop(popPath("secret", "batch=1")).Messages[0]; string(m.Data) != `{"tx":"T1"}` {
		t.Fatalf("popped %s", m.Data)
	}
	if rows := c.dlqRows(""); len(rows) != 0 {
		t.Fatalf("dlq %+v", rows)
	}
}

// The flag is read at push time: turning it on or off later rewrites
// nothing, and reads decrypt by each message's sealed bit, not by the flag.
func TestEncryption_FlagIsEvaluatedAtPushTime(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	c := newKeyedClient(t, b, testKey)
	before := c.pushOne("q", "", "before", map[string]any{"n": 1}) // creates q, unencrypted
	c.configure("q", map[string]any{"encryptionEnabled": true})
	c.pushOne("q", "", "during", map[string]any{"n": 2})
	c.configure("q", map[string]any{"encryptionEnabled": false})
	c.pushOne("q", "", "after", map[string]any{"n": 3})

	pid := before.PartitionID
	if raw := stored(t, b, pid, "before"); string(raw) != `{"n":1}` {
		t.Fatalf("before: stored %s", raw)
	}
	if raw := stored(t, b, pid, "during"); !isEnvelope(raw) {
		t.Fatalf("during: stored %s", raw)
	}
	if raw := stored(t, b, pid, "after"); string(raw) != `{"n":3}` {
		t.Fatalf("after: stored %s", raw)
	}
	p := c.mustPop(popPath("q", "batch=3"))
	var got []string
	for _, m := range p.Messages {
		got = append(got, string(m.Data))
	}
	if want := []string{`{"n":1}`, `{"n":2}`, `{"n":3}`}; !equalStrings(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
	if d := c.detail(pid, "before"); d.IsEncrypted {
		t.Fatalf("a plaintext message flagged isEncrypted: %+v", d)
	}
	if d := c.detail(pid, "during"); !d.IsEncrypted || string(d.Payload) != `{"n":2}` {
		t.Fatalf("detail of the sealed message %+v", d)
	}
}

// Under another key, or none, an envelope is returned exactly as stored,
// never replaced; a restart with the right key reads it again.
func TestEncryption_WrongOrMissingKeyReturnsTheEnvelope(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	writer := newKeyedClient(t, b, testKey)
	writer.configure("q", map[string]any{"encryptionEnabled": true})
	dead := writer.pushOne("q", "", "d", map[string]any{"secret": "DEAD"})
	deadEnvelope := stored(t, b, dead.PartitionID, "d")
	writer.ack(writer.mustPop(popPath("q", "batch=1")).Messages[0], "dlq", "")
	res := writer.pushOne("q", "", "m", map[string]any{"secret": "MARKER"})
	envelope := stored(t, b, res.PartitionID, "m")

	for _, key := range []string{otherKey, ""} {
		c := newKeyedClient(t, b, key)
		p := c.mustPop(popPath("q", "batch=1"))
		if got := p.Messages[0].Data; !bytes.Equal(got, envelope) {
			t.Fatalf("key %q: popped %s, want the stored envelope %s", key, got, envelope)
		}
		c.ack(p.Messages[0], "retry", "")
		if d := c.detail(res.PartitionID, "m"); !bytes.Equal(d.Payload, envelope) || d.IsEncrypted {
			t.Fatalf("key %q: detail %+v", key, d)
		}
		rows := c.dlqRows("queue=q")
		if len(rows) != 1 || !bytes.Equal(rows[0].Data, deadEnvelope) || rows[0].IsEncrypted == nil || *rows[0].IsEncrypted {
			t.Fatalf("key %q: dlq rows %+v", key, rows)
		}
	}
	p := writer.mustPop(popPath("q", "batch=1"))
	if got := string(p.Messages[0].Data); got != `{"secret":"MARKER"}` {
		t.Fatalf("the right key again: popped %s", got)
	}
}

// syncBuffer is a log sink the server's goroutines may write concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A malformed key stops the server from being built (fail closed): the
// error wraps engine.ErrInvalid, names QUEEN_ENCRYPTION_KEY and the format,
// and never quotes the key. Nothing is logged as "enabled" or "disabled".
func TestServer_New_MalformedEncryptionKey(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	for _, key := range []string{malformedKey, "abc", strings.Repeat("zz", 32), testKey + "0", " \n", "é" + testKey[2:]} {
		var logs syncBuffer
		s, err := server.New(b, server.Options{EncryptionKey: key, SpoolDir: t.TempDir(),
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err == nil {
			s.Shutdown(context.Background())
			t.Fatalf("key of %d bytes: New succeeded, want an error", len(key))
		}
		if !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("key of %d bytes: err = %v, want engine.ErrInvalid", len(key), err)
		}
		msg := err.Error()
		if !strings.Contains(msg, "QUEEN_ENCRYPTION_KEY") || !strings.Contains(msg, "64 hex characters") {
			t.Errorf("key of %d bytes: error %q does not name QUEEN_ENCRYPTION_KEY and its format", len(key), msg)
		}
		if k := strings.TrimSpace(key); k != "" && strings.Contains(msg+logs.String(), k[:min(len(k), 8)]) {
			t.Errorf("the error or the log quotes the key: %q\n%s", msg, logs.String())
		}
		if logs.Len() != 0 {
			t.Errorf("key of %d bytes: New logged\n%s", len(key), logs.String())
		}
		if verr := (server.Options{EncryptionKey: key}).Validate(); !errors.Is(verr, engine.ErrInvalid) {
			t.Errorf("key of %d bytes: Validate = %v, want engine.ErrInvalid", len(key), verr)
		}
	}
	// The control: the same key well formed (a key file's newline and all)
	// builds a server that seals.
	c := newKeyedClient(t, b, "  "+testKey+"\n")
	c.configure("q", map[string]any{"encryptionEnabled": true})
	res := c.pushOne("q", "", "m", map[string]any{"plain": true})
	if raw := stored(t, b, res.PartitionID, "m"); !isEnvelope(raw) {
		t.Fatalf("a well-formed key stored %s, want an envelope", raw)
	}
}

// Without a key, encryption is off: configuring encryptionEnabled warns, and
// pushes to the queue succeed in plaintext (docs/semantics.md §11).
func TestEncryption_MissingKeyStoresPlaintextWithAWarning(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	b := newBroker(t)
	c := newClientOptions(t, b, server.Options{
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	c.configure("q", map[string]any{"encryptionEnabled": true})
	if !strings.Contains(logs.String(), "encryptionEnabled but QUEEN_ENCRYPTION_KEY is not set") {
		t.Fatalf("configuring an encrypted queue without a key did not warn:\n%s", logs.String())
	}
	res := c.pushOne("q", "", "m", map[string]any{"plain": true})
	if raw := stored(t, b, res.PartitionID, "m"); string(raw) != `{"plain":true}` {
		t.Fatalf("stored %s, want plaintext", raw)
	}
	if m := c.mustPop(popPath("q", "batch=1")).Messages[0]; string(m.Data) != `{"plain":true}` {
		t.Fatalf("popped %s", m.Data)
	}
}

// newRaftNode starts a single-node Raft cluster (a real log store, engine
// and snapshots on disk, the log synced as in production) and returns it
// with its data directory.
func newRaftNode(t *testing.T) (*rafttest.Cluster, *raft.Node, string) {
	t.Helper()
	var dir string
	cluster := rafttest.MakeClusterWith(t, 1, func(o *raft.Options) {
		dir = o.Dir
		o.RaftLogSync = true
		o.RetentionInterval = 0 // the tests sweep when they mean to
	})
	return cluster, cluster.Leader(), dir
}

// filesContaining lists the files under dir whose raw bytes contain marker.
func filesContaining(t *testing.T, dir, marker string) (hits []string, files int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if os.IsNotExist(err) { // Pebble deleted an obsolete file meanwhile
			return nil
		}
		if err != nil {
			return err
		}
		files++
		if bytes.Contains(data, []byte(marker)) {
			rel, _ := filepath.Rel(dir, path)
			hits = append(hits, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return hits, files
}

// Over a real Raft node: the payload of an encrypted queue reaches the Raft
// log, the engine and the snapshots only as an envelope, so its plaintext is
// in no file of the data directory, while a plain queue's payload is in each
// of them (the check can fail). Reads over the node decrypt what the node
// sealed, the transaction's push and a corrected replay included (their
// commands carry the sealed bit), and only that: a captured envelope pushed
// to the plain queue pops as sent.
func TestEncryption_RaftDataDirHoldsNoPlaintext(t *testing.T) {
	t.Parallel()
	cluster, node, dir := newRaftNode(t)
	c := newKeyedClient(t, node, testKey)
	const (
		secretMarker = "SECRET-MARKER-c9e1f0a7"
		plainMarker  = "PLAIN-MARKER-4b6d2e83"
	)
	c.configure("secret", map[string]any{"encryptionEnabled": true})
	c.configure("open", nil)
	// One item per push, as the control below: a one-frame segment is
	// stored (and logged) uncompressed, so the control shows that an unsealed
	// payload would be visible.
	for i := range 20 {
		c.pushOne("secret", "", "", map[string]any{"card": secretMarker, "i": i})
	}
	p := c.mustPop(popPath("secret", "batch=1"))
	c.ack(p.Messages[0], "dlq", "dead-lettered for the test") // a DLQ snapshot too
	var tx struct {
		Success bool `json:"success"`
	}
	c.do("POST", "/api/v1/transaction", map[string]any{"operations": []map[string]any{
		{"type": "push", "queue": "secret", "payload": map[string]any{"card": secretMarker, "via": "tx"}},
	}}).expect(t, 200).decode(t, &tx)
	if !tx.Success {
		t.Fatal("transaction failed")
	}
	c.pushOne("open", "", "", map[string]any{"card": plainMarker, "i": 0})
	if err := node.Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}

	// Reads over the node decrypt.
	rows := c.dlqRows("queue=secret")
	if len(rows) != 1 || !strings.Contains(string(rows[0].Data), secretMarker) || !*rows[0].IsEncrypted {
		t.Fatalf("dlq rows %+v", rows)
	}
	p = c.mustPop(popPath("secret", "batch=100"))
	if len(p.Messages) != 20 {
		t.Fatalf("popped %d messages, want 19 pushed + 1 by transaction", len(p.Messages))
	}
	for _, m := range p.Messages {
		if !strings.Contains(string(m.Data), secretMarker) {
			t.Fatalf("popped %s", m.Data)
		}
	}
	if d := c.detail(p.Messages[0].PartitionID, p.Messages[0].TransactionID); !d.IsEncrypted ||
		!strings.Contains(string(d.Payload), secretMarker) {
		t.Fatalf("detail %+v", d)
	}

	// A corrected replay is sealed at the edge and carried sealed by the
	// Replay command; a captured envelope in the plain queue is not opened.
	pid := p.Messages[0].PartitionID
	c.ackBatch(p.ConsumerGroup, p.Messages, slices.Repeat([]string{"completed"}, len(p.Messages))...)
	c.do("POST", "/api/v1/messages/"+pid+"/"+rows[0].TransactionID+"/retry",
		`{"data":{"card":"`+secretMarker+`","via":"replay"}}`).expect(t, 200)
	if m := c.mustPop(popPath("secret", "batch=10")).Messages; len(m) != 1 || !strings.Contains(string(m[0].Data), `"replay"`) ||
		!strings.Contains(string(m[0].Data), secretMarker) {
		t.Fatalf("corrected replay popped as %+v", m)
	}
	env := stored(t, node, pid, p.Messages[0].TransactionID)
	c.pushRaw("open", "captured", env)
	if m := c.mustPop(popPath("open", "batch=10")).Messages; len(m) != 2 || !bytes.Equal(m[1].Data, env) {
		t.Fatalf("a captured envelope in the plain queue popped as %+v, want it as sent", m)
	}

	// Closing the node writes out what Pebble still buffers (the engine's
	// WAL is not synced), so every byte the node wrote is in a file.
	cluster.Stop(0)
	hits, files := filesContaining(t, dir, plainMarker)
	t.Logf("plain marker found in %v (of %d files)", hits, files)
	// Snapshots on disk are references to the engine (raft/snapstore.go);
	// the stream a follower installs is the engine's keyspace, checked here
	// as the engine directory.
	for _, sub := range []string{"raft", "engine"} {
		if !slices.ContainsFunc(hits, func(h string) bool { return strings.HasPrefix(h, sub+string(filepath.Separator)) }) {
			t.Errorf("the plain queue's marker is in no file under %s/: the check cannot see payloads there", sub)
		}
	}
	if hits, files := filesContaining(t, dir, secretMarker); len(hits) > 0 {
		t.Fatalf("the encrypted queue's plaintext is on disk in %v (of %d files)", hits, files)
	}
}

// capture pushes plaintext to the encrypted queue "vault" and returns the
// envelope the broker stored for it: what an attacker with read access to
// the store, a backup or the log would hold.
func capture(t *testing.T, c *client, b server.Broker, plaintext string) []byte {
	t.Helper()
	c.configure("vault", map[string]any{"encryptionEnabled": true})
	res := c.pushOne("vault", "", "", json.RawMessage(plaintext))
	env := stored(t, b, res.PartitionID, res.TransactionID)
	if !isEnvelope(env) || bytes.Contains(env, []byte("CAPTURED")) {
		t.Fatalf("captured %s, want an envelope", env)
	}
	return env
}

// respaced is the same envelope as a client might re-serialize it: members
// reordered, whitespace added. Shape-based opening accepted it too.
func respaced(t *testing.T, env []byte) []byte {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(env, &m); err != nil {
		t.Fatal(err)
	}
	return []byte(`{ "iv" : "` + m["iv"] + `", "authTag": "` + m["authTag"] + `", "encrypted": "` + m["encrypted"] + `" }`)
}

// pushRaw pushes one item whose payload is body's bytes exactly, and
// returns its result.
func (c *client) pushRaw(queue, txn string, payload []byte) pushResult {
	c.t.Helper()
	var res []pushResult
	c.do("POST", "/api/v1/push", `{"items":[{"queue":"`+queue+`","transactionId":"`+txn+`","payload":`+string(payload)+`}]}`).
		expect(c.t, 201).decode(c.t, &res)
	if len(res) != 1 || res[0].Status != "queued" {
		c.t.Fatalf("push %s: %+v", txn, res)
	}
	return res[0]
}

// The broker is no decryption oracle: an envelope a client pushes to a
// plain queue, captured from the store or re-serialized, is returned exactly
// as sent by pop, message detail and the DLQ (isEncrypted:false), and by a
// replay and a redrive of its dead letter; a request claiming, by the
// retired relay header or a "sealed" member, that it is already sealed
// changes nothing. The same envelope is a pushed payload like any other.
func TestEncryption_ClientEnvelopeInPlainQueueIsReturnedAsSent(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	c := newKeyedClient(t, b, testKey)
	env := capture(t, c, b, `{"card":"CAPTURED-4111"}`)
	c.configure("open", map[string]any{"retryLimit": 0})
	forged := *c
	forged.header = c.header.Clone()
	forged.header.Set("X-Queen-Sealed", "1")
	forged.header.Set("X-Queen-Forwarded-By", "n2")

	sent := map[string][]byte{"captured": env, "respaced": respaced(t, env), "forged": env, "tx": env}
	c.pushRaw("open", "captured", sent["captured"])
	c.pushRaw("open", "respaced", sent["respaced"])
	var forgedRes []pushResult
	forged.do("POST", "/api/v1/push", `{"items":[{"queue":"open","transactionId":"forged","sealed":true,"payload":`+string(env)+`}]}`).
		expect(t, 201).decode(t, &forgedRes)
	var tx struct {
		Success bool `json:"success"`
	}
	c.do("POST", "/api/v1/transaction", `{"operations":[{"type":"push","queue":"open","transactionId":"tx","payload":`+string(env)+`}]}`).
		expect(t, 200).decode(t, &tx)
	if !tx.Success {
		t.Fatal("transaction failed")
	}

	var pid string
	for range sent {
		m := c.mustPop(popPath("open", "batch=1")).Messages[0]
		want := sent[m.TransactionID]
		pid = m.PartitionID
		if !bytes.Equal(m.Data, want) {
			t.Fatalf("%s: popped %s, want it as sent %s", m.TransactionID, m.Data, want)
		}
		if d := c.detail(m.PartitionID, m.TransactionID); !bytes.Equal(d.Payload, want) || !bytes.Equal(d.Data, want) || d.IsEncrypted {
			t.Fatalf("%s: detail payload %s isEncrypted %v, want it as sent, false", m.TransactionID, d.Payload, d.IsEncrypted)
		}
		if r := c.ack(m, "failed", "boom"); !r.DLQ {
			t.Fatalf("%s: a failed ack with retryLimit 0 did not dead-letter: %+v", m.TransactionID, r)
		}
	}
	rows := c.dlqRows("queue=open")
	if len(rows) != len(sent) {
		t.Fatalf("%d dead letters, want %d", len(rows), len(sent))
	}
	for _, r := range rows {
		if !bytes.Equal(r.Data, sent[r.TransactionID]) || r.IsEncrypted == nil || *r.IsEncrypted {
			t.Fatalf("dead letter %s: data %s isEncrypted %v, want it as sent, false", r.TransactionID, r.Data, r.IsEncrypted)
		}
	}

	// A replay and a redrive re-push what was stored, still unsealed.
	c.do("POST", "/api/v1/messages/"+pid+"/captured/retry", nil).expect(t, 200)
	var redrive map[string]any
	c.do("POST", "/api/v1/dlq/replay?queue=open", nil).expect(t, 200).decode(t, &redrive)
	if redrive["replayed"] != float64(len(sent)-1) {
		t.Fatalf("redrive %v", redrive)
	}
	p := c.mustPop(popPath("open", "batch=10"))
	if len(p.Messages) != len(sent) {
		t.Fatalf("popped %d replayed messages, want %d", len(p.Messages), len(sent))
	}
	for _, m := range p.Messages {
		if !bytes.Equal(m.Data, env) && !bytes.Equal(m.Data, sent["respaced"]) {
			t.Fatalf("a replayed client envelope popped as %s", m.Data)
		}
	}
}

// An envelope a client pushes to an encrypted queue is a payload like any
// other: sealed again, so the store holds an envelope of it, and every read
// opens that one layer and returns the client's envelope, byte for byte.
func TestEncryption_ClientEnvelopeInEncryptedQueueComesBackAsSent(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	c := newKeyedClient(t, b, testKey)
	env := capture(t, c, b, `{"card":"CAPTURED-4111"}`)
	c.configure("secret", map[string]any{"encryptionEnabled": true, "retryLimit": 0})
	res := c.pushRaw("secret", "theirs", env)
	if raw := stored(t, b, res.PartitionID, "theirs"); !isEnvelope(raw) || bytes.Equal(raw, env) {
		t.Fatalf("stored %s, want a new envelope around the client's", raw)
	}
	p := c.mustPop(popPath("secret", "batch=10"))
	if len(p.Messages) != 1 {
		t.Fatalf("popped %d messages, want the client's", len(p.Messages))
	}
	m := p.Messages[0]
	if m.TransactionID != "theirs" || !bytes.Equal(m.Data, env) {
		t.Fatalf("popped %s %s, want the client's envelope %s", m.TransactionID, m.Data, env)
	}
	if d := c.detail(res.PartitionID, "theirs"); !bytes.Equal(d.Payload, env) || !d.IsEncrypted {
		t.Fatalf("detail payload %s isEncrypted %v, want the client's envelope, true", d.Payload, d.IsEncrypted)
	}
	c.ack(m, "failed", "boom")
	rows := c.dlqRows("queue=secret")
	if len(rows) != 1 || !bytes.Equal(rows[0].Data, env) || rows[0].IsEncrypted == nil || !*rows[0].IsEncrypted {
		t.Fatalf("dead letters %+v, want the client's envelope, isEncrypted true", rows)
	}
}

// A payload the broker sealed keeps its sealed bit through a bulk redrive
// and a replay: re-pushed as stored (one envelope, never two), it pops as
// the original JSON. A corrected payload replayed into a plain queue is
// stored as sent.
func TestEncryption_RedriveAndReplayKeepTheSealedBit(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	c := newKeyedClient(t, b, testKey)
	c.configure("q", map[string]any{"encryptionEnabled": true, "retryLimit": 0})
	const payload = `{"orderId":1,"card":"REDRIVE-MARKER"}`
	c.pushOne("q", "", "m", json.RawMessage(payload))
	c.ack(c.mustPop(popPath("q", "batch=1")).Messages[0], "failed", "boom")
	var redrive map[string]any
	c.do("POST", "/api/v1/dlq/replay?queue=q", nil).expect(t, 200).decode(t, &redrive)
	if redrive["replayed"] != float64(1) {
		t.Fatalf("redrive %v", redrive)
	}
	m := c.mustPop(popPath("q", "batch=1")).Messages[0]
	if !sameJSON(t, m.Data, payload) {
		t.Fatalf("redriven message popped as %s", m.Data)
	}
	if raw := stored(t, b, m.PartitionID, m.TransactionID); !isEnvelope(raw) || bytes.Contains(raw, []byte("MARKER")) {
		t.Fatalf("redriven message stored as %s", raw)
	}
	if d := c.detail(m.PartitionID, m.TransactionID); !sameJSON(t, d.Payload, payload) || !d.IsEncrypted {
		t.Fatalf("redriven detail %+v", d)
	}
	c.ack(m, "failed", "again")
	c.do("POST", "/api/v1/messages/"+m.PartitionID+"/"+m.TransactionID+"/retry", nil).expect(t, 200)
	if m := c.mustPop(popPath("q", "batch=1")).Messages[0]; !sameJSON(t, m.Data, payload) {
		t.Fatalf("replayed message popped as %s", m.Data)
	}

	// Into a plain queue a corrected payload goes as sent, even an envelope.
	env := stored(t, b, m.PartitionID, m.TransactionID)
	c.configure("open", map[string]any{"retryLimit": 0})
	c.pushOne("open", "", "o", 1)
	o := c.mustPop(popPath("open", "batch=1")).Messages[0]
	c.ack(o, "failed", "boom")
	c.do("POST", "/api/v1/messages/"+o.PartitionID+"/o/retry", `{"data":`+string(env)+`}`).expect(t, 200)
	if got := c.mustPop(popPath("open", "batch=1")).Messages[0]; !bytes.Equal(got.Data, env) {
		t.Fatalf("a corrected envelope replayed into a plain queue popped as %s", got.Data)
	}
}

// follower is a LocalBroker that says it follows the server at leaderHTTP
// and refuses to push itself, as a Raft follower does: a server over it
// must relay its spool replay to the leader's HTTP. (Both servers share
// one engine, standing in for the replicated state.)
type follower struct {
	*servertest.LocalBroker
	leaderHTTP string
}

func (f follower) Status() raft.Status {
	st := f.LocalBroker.Status()
	st.ID, st.Role, st.Leader, st.LeaderHTTP = "follower", "follower", "leader", f.leaderHTTP
	return st
}

func (f follower) Propose(ctx context.Context, c engine.Command) (engine.Result, error) {
	if _, ok := c.(engine.PushCmd); ok {
		return engine.Result{}, raft.ErrNotLeader
	}
	return f.LocalBroker.Propose(ctx, c)
}

// Pushes spooled during push maintenance are stored sealed, marked so in
// the spool file, with no plaintext on its disk. Replayed on the leader they
// keep their bit; relayed by a follower they are opened there and sealed
// again by the leader (the relay cannot vouch for a sealed bit). Either way
// the encrypted queue's message pops as the original JSON, and a client's
// envelope spooled for a plain queue comes back as sent.
func TestEncryption_SpoolKeepsPayloadsSealed(t *testing.T) {
	t.Parallel()
	for _, relayed := range []bool{false, true} {
		t.Run(map[bool]string{false: "leader", true: "follower"}[relayed], func(t *testing.T) {
			lb := servertest.NewLocalBroker(t)
			leader := newKeyedClient(t, lb, testKey)
			env := capture(t, leader, lb, `{"card":"CAPTURED-4111"}`)
			var b server.Broker = lb
			if relayed {
				b = follower{LocalBroker: lb, leaderHTTP: strings.TrimPrefix(leader.base, "http://")}
			}
			spoolDir := t.TempDir()
			c := newClientOptions(t, b, server.Options{EncryptionKey: testKey, SpoolDir: spoolDir})
			c.configure("secret", map[string]any{"encryptionEnabled": true})
			c.configure("open", nil)
			c.do("POST", "/api/v1/system/maintenance", map[string]any{"enabled": true}).expect(t, 200)
			const payload = `{"card":"SPOOL-MARKER-5500"}`
			var buffered []map[string]any
			c.do("POST", "/api/v1/push", `{"items":[{"queue":"secret","transactionId":"s","payload":`+payload+`},`+
				`{"queue":"open","transactionId":"e","payload":`+string(env)+`}]}`).expect(t, 201).decode(t, &buffered)
			if len(buffered) != 2 || buffered[0]["status"] != "buffered" {
				t.Fatalf("push during maintenance: %v", buffered)
			}
			if hits, files := filesContaining(t, spoolDir, "SPOOL-MARKER"); len(hits) > 0 || files != 1 {
				t.Fatalf("spool: plaintext in %v of %d files", hits, files)
			}
			if hits, _ := filesContaining(t, spoolDir, `"sealed":true`); len(hits) != 1 {
				t.Fatalf("spool: the sealed item is not marked")
			}

			c.do("POST", "/api/v1/system/maintenance", map[string]any{"enabled": false}).expect(t, 200)
			deadline := time.Now().Add(30 * time.Second)
			for c.do("GET", "/api/v1/status/buffers", nil).expect(t, 200).object(t)["pending"] != float64(0) {
				if time.Now().After(deadline) {
					t.Fatal("the spool was not replayed within 30 s")
				}
				time.Sleep(50 * time.Millisecond)
			}
			m := leader.mustPop(popPath("secret", "batch=10")).Messages
			if len(m) != 1 || m[0].TransactionID != "s" || !sameJSON(t, m[0].Data, payload) {
				t.Fatalf("replayed secret popped as %+v", m)
			}
			if raw := stored(t, lb, m[0].PartitionID, "s"); !isEnvelope(raw) || bytes.Contains(raw, []byte("MARKER")) {
				t.Fatalf("replayed secret stored as %s", raw)
			}
			if d := leader.detail(m[0].PartitionID, "s"); !d.IsEncrypted {
				t.Fatalf("replayed secret detail %+v", d)
			}
			m = leader.mustPop(popPath("open", "batch=10")).Messages
			if len(m) != 1 || !bytes.Equal(m[0].Data, env) {
				t.Fatalf("replayed client envelope popped as %+v, want %s", m, env)
			}
			if d := leader.detail(m[0].PartitionID, "e"); d.IsEncrypted {
				t.Fatalf("replayed client envelope detail %+v", d)
			}
		})
	}
}
