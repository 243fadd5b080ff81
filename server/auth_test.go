package server_test

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"maps"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/auth"
	"github.com/queenmq/queen/server/servertest"
)

const jwtSecret = "an-hs256-secret-of-at-least-32-bytes!"

// token is one credential the access tests present.
type token struct {
	name   string
	header string     // Authorization value ("" sends none)
	level  auth.Level // what it reaches; Unset: nothing (401)
	status int        // the refusal when it does not reach a route
	code   string
	text   string
}

// mint signs claims for sub with role (none when ""), expiring at exp.
func mint(t testing.TB, method jwt.SigningMethod, key any, kid, sub, role string, exp time.Time) string {
	t.Helper()
	c := jwt.MapClaims{"sub": sub, "iat": time.Now().Add(-time.Minute).Unix(), "exp": exp.Unix()}
	if role != "" {
		c["role"] = role
	}
	tok := jwt.NewWithClaims(method, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return "Bearer " + s
}

func hsTokens(t testing.TB) []token {
	later, past := time.Now().Add(time.Hour), time.Now().Add(-time.Hour)
	hs := func(sub, role string, exp time.Time) string {
		return mint(t, jwt.SigningMethodHS256, []byte(jwtSecret), "", sub, role, exp)
	}
	return []token{
		{"none", "", auth.Unset, 401, "unauthorized", "Authentication required"},
		{"expired", hs("u-exp", "admin", past), auth.Unset, 401, "invalid_token", "Token has expired"},
		{"wrong-signature", mint(t, jwt.SigningMethodHS256, []byte("another-secret-another-secret-xx"), "", "u-x", "admin", later),
			auth.Unset, 401, "invalid_token", "Invalid token signature"},
		{"crit", critToken(t, later), auth.Unset, 401, "invalid_token",
			"Token verification failed: critical header extensions (crit) are not supported"},
		{"no-role", hs("u-none", "", later), auth.Public, 403, "forbidden", "Insufficient permissions"},
		{"read-only", hs("u-ro", "read-only", later), auth.ReadOnly, 403, "forbidden", "Insufficient permissions"},
		{"read-write", hs("u-rw", "read-write", later), auth.ReadWrite, 403, "forbidden", "Insufficient permissions"},
		{"admin", hs("u-admin", "admin", later), auth.Admin, 0, "", ""},
	}
}

// critToken is an admin token, validly signed, whose header lists a
// critical extension (RFC 7515 §4.1.11) the broker does not understand.
func critToken(t testing.TB, exp time.Time) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "u-crit", "role": "admin", "exp": exp.Unix()})
	tok.Header["crit"] = []string{"b64"}
	s, err := tok.SignedString([]byte(jwtSecret))
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return "Bearer " + s
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

func hsVerifier(t testing.TB) *auth.Verifier {
	o := auth.DefaultOptions()
	o.Enabled, o.Algorithm, o.Secret, o.Logger = true, auth.HS256, jwtSecret, quietLogger()
	v, err := auth.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v
}

// fixture is the state one token's requests act on: its own queue, a
// dead letter, a live message and a consumer group, so that every route is
// answered 2xx when the token may use it, whatever ran before.
type fixture struct {
	queue, group, partitionID, live, dead string
	queryID                               string // a registered streaming query
}

func seed(t *testing.T, c *client, k string) fixture {
	f := fixture{queue: "q-" + k, group: "g-" + k, live: "live-" + k, dead: "dead-" + k}
	c.configure(f.queue, map[string]any{"retryLimit": 0})
	f.partitionID = c.pushOne(f.queue, "p", f.dead, map[string]any{"k": k}).PartitionID
	m := c.mustPop(popPath(f.queue, "batch=1&consumerGroup="+f.group))
	c.ack(m.Messages[0], "failed", "seeded")
	c.pushOne(f.queue, "p", f.live, map[string]any{"k": k})
	var reg struct {
		QueryID string `json:"query_id"`
	}
	c.do("POST", "/streams/v1/queries", map[string]any{"name": "s-" + k, "source_queue": f.queue, "config_hash": "h"}).
		expect(t, 200).decode(t, &reg)
	f.queryID = reg.QueryID
	return f
}

// request builds the request that route r answers 2xx for fixture f.
func request(r server.Route, f fixture) (path string, body any) {
	path = r.Pattern
	for name, val := range map[string]string{"{queue}": f.queue, "{partition}": "p", "{partitionId}": f.partitionID,
		"{group}": f.group, "{leaseId}": "0190d1c6-7b1e-7000-8000-000000000001", "{name}": "s-" + f.queue, "{traceName}": "t"} {
		path = strings.ReplaceAll(path, name, val)
	}
	txn := f.live
	switch r.Name {
	case "message_delete", "message_replay":
		txn = f.dead
	}
	path = strings.ReplaceAll(path, "{transactionId}", txn)
	switch r.Name {
	case "configure":
		body = map[string]any{"queue": f.queue, "options": map[string]any{"retryLimit": 0}}
	case "push":
		body = map[string]any{"items": []any{map[string]any{"queue": f.queue, "payload": 1}}}
	case "pop_discovery":
		path += "?namespace=none"
	case "ack":
		body = map[string]any{"transactionId": f.live, "partitionId": f.partitionID, "status": "completed"}
	case "ack_batch":
		body = map[string]any{"acknowledgments": []any{map[string]any{"transactionId": f.live, "partitionId": f.partitionID, "status": "completed"}}}
	case "transaction":
		body = map[string]any{"operations": []any{map[string]any{"type": "push", "items": []any{map[string]any{"queue": f.queue, "payload": 2}}}}}
	case "dlq_replay":
		path += "?queue=" + f.queue
	case "seek", "seek_partition":
		body = map[string]any{"toEnd": true}
	case "subscription":
		body = map[string]any{"subscriptionTimestamp": "2026-01-01T00:00:00Z"}
	case "maintenance_set", "maintenance_pop_set":
		body = map[string]any{"enabled": false}
	case "queue_move":
		body = map[string]any{"group": 2}
	case "trace_add":
		body = map[string]any{"transactionId": f.live, "partitionId": f.partitionID, "data": map[string]any{"step": 1}, "traceNames": "t"}
	case "stream_register":
		body = map[string]any{"name": "s-" + f.queue, "source_queue": f.queue, "config_hash": "h"}
	case "stream_cycle":
		body = map[string]any{"query_id": f.queryID, "partition_id": f.partitionID,
			"state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": map[string]any{"windowEnd": 1}}}}
	case "stream_state":
		body = map[string]any{"query_id": f.queryID, "partition_id": f.partitionID}
	case "cluster_join":
		body = map[string]any{"id": "n9", "addr": "127.0.0.1:1"}
	case "cluster_leave":
		body = map[string]any{"id": "n9"}
	case "cluster_storage":
		body = map[string]any{"id": "n9", "ok": true}
	}
	return path, body
}

// reaches reports whether a token of level have may use a route of level
// need. Cluster routes take an admin token.
func reaches(have, need auth.Level) bool {
	switch {
	case need == auth.Public:
		return true
	case have == auth.Unset:
		return false
	}
	return have >= min(need, auth.Admin)
}

// checkAccess sends every route's request with each token and checks the
// answer against the route's level: 401 or 403 with Queen's text and our
// code when the token does not reach it, 2xx when it does (the cluster
// routes' handler answers 501 over a broker without membership: it ran).
func checkAccess(t *testing.T, v *auth.Verifier, tokens []token, only map[string]bool) {
	probe, err := server.New(servertest.NewLocalBroker(t), server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range probe.Routes() {
		if only != nil && !only[r.Name] {
			continue
		}
		t.Run(r.Name, func(t *testing.T) {
			t.Parallel() // each route has its own broker and server
			c := newClientOptions(t, newBroker(t), server.Options{Auth: v, Logger: quietLogger()})
			admin := c.header.Clone()
			admin.Set("Authorization", tokens[len(tokens)-1].header)
			c.header = admin
			fixtures := map[string]fixture{}
			for _, tk := range tokens {
				fixtures[tk.name] = seed(t, c, tk.name)
			}
			for _, tk := range tokens {
				c.header = admin.Clone()
				c.header.Del("Authorization")
				if tk.header != "" {
					c.header.Set("Authorization", tk.header)
				}
				path, body := request(r, fixtures[tk.name])
				resp := c.do(r.Method, path, body)
				switch {
				case !reaches(tk.level, r.Level):
					var e struct{ Error, Code string }
					json.Unmarshal(resp.body, &e)
					if resp.status != tk.status || e.Code != tk.code || e.Error != tk.text {
						t.Errorf("%s %s with %s (route needs %v): %d %s, want %d {%q, %q}",
							r.Method, path, tk.name, r.Level, resp.status, resp.body, tk.status, tk.text, tk.code)
					}
					if tk.status == 401 && resp.header.Get("WWW-Authenticate") == "" {
						t.Errorf("%s %s with %s: 401 without WWW-Authenticate", r.Method, path, tk.name)
					}
				case r.Name == "propose_relayed":
					// The secret alone vouches for a prepared push's frames
					// and for a relayed command.
					resp.expectError(t, http.StatusForbidden, "cluster_secret_invalid")
				case r.Level == auth.Cluster, migrationAction(r), groupsOnly(r):
					if resp.status != http.StatusNotImplemented {
						t.Errorf("%s %s with %s: %d %s, want the handler's 501", r.Method, path, tk.name, resp.status, resp.body)
					}
				case resp.status < 200 || resp.status > 299:
					t.Errorf("%s %s with %s (route needs %v): %d %s, want 2xx", r.Method, path, tk.name, r.Level, resp.status, resp.body)
				}
			}
		})
	}
}

// Every route of the table × {no token, expired, wrong signature, no role,
// read-only, read-write, admin}, HS256.
func TestAuth_RouteLevels_HS256(t *testing.T) {
	t.Parallel()
	checkAccess(t, hsVerifier(t), hsTokens(t), nil)
}

// The table is the spec's: spot-check the levels docs/api.md gives by name, and
// that no route is left without one.
func TestAuth_RouteTableLevels(t *testing.T) {
	t.Parallel()
	s, err := server.New(servertest.NewLocalBroker(t), server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]auth.Level{
		"health": auth.Public, "metrics": auth.Public, "metrics_prometheus": auth.Public,
		"push": auth.ReadWrite, "pop": auth.ReadWrite, "ack": auth.ReadWrite, "configure": auth.ReadWrite,
		"transaction": auth.ReadWrite, "lease_extend": auth.ReadWrite, "message_delete": auth.ReadWrite,
		"dlq": auth.ReadOnly, "messages": auth.ReadOnly, "resources_queues": auth.ReadOnly, "status": auth.ReadOnly,
		"groups": auth.ReadOnly, "resources_queue_delete": auth.Admin, "group_delete": auth.Admin,
		"stats_refresh": auth.Admin, "maintenance": auth.Admin, "maintenance_set": auth.Admin,
		"cluster_join": auth.Cluster, "cluster_leave": auth.Cluster, "cluster_storage": auth.Cluster,
		"analytics_queue_ops": auth.ReadOnly, "analytics_postgres": auth.ReadOnly, "status_queue_messages": auth.ReadOnly,
		"shared_state": auth.Admin, "cluster_analytics": auth.Cluster,
		"migration_status": auth.Admin, "migration_start": auth.Admin,
	}
	for _, r := range s.Routes() {
		if w, ok := want[r.Name]; ok && r.Level != w {
			t.Errorf("%s %s: level %v, want %v", r.Method, r.Pattern, r.Level, w)
		}
		if strings.HasPrefix(r.Pattern, "/internal/") && r.Level != auth.Cluster {
			t.Errorf("%s %s is node-to-node but needs only %v", r.Method, r.Pattern, r.Level)
		}
	}
}

// jwksServer serves a JSON Web Key Set that a test can change.
type jwksServer struct {
	*httptest.Server
	mu   sync.Mutex
	keys []map[string]any
}

func newJWKSServer(t *testing.T) *jwksServer {
	j := &jwksServer{}
	j.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		j.mu.Lock()
		defer j.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"keys": j.keys})
	}))
	t.Cleanup(j.Close)
	return j
}

func (j *jwksServer) set(keys ...map[string]any) {
	j.mu.Lock()
	j.keys = keys
	j.mu.Unlock()
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func rsaJWK(kid string, pub *rsa.PublicKey) map[string]any {
	return map[string]any{"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
		"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes())}
}

func edJWK(kid string, pub ed25519.PublicKey) map[string]any {
	return map[string]any{"kty": "OKP", "crv": "Ed25519", "kid": kid, "alg": "EdDSA", "use": "sig", "x": b64(pub)}
}

func jwksVerifier(t *testing.T, alg, url string) *auth.Verifier {
	o := auth.DefaultOptions()
	o.Enabled, o.Algorithm, o.JWKSURL, o.Logger = true, alg, url, quietLogger()
	o.JWKSUnknownKIDInterval = 10 * time.Millisecond
	v, err := auth.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v
}

// asymTokens are the credentials for an asymmetric algorithm: signed by
// key (kid), by a key the set does not hold, expired, and by role.
func asymTokens(t *testing.T, method jwt.SigningMethod, key, stranger crypto.Signer, kid string) []token {
	later := time.Now().Add(time.Hour)
	sig := func(sub, role string, exp time.Time) string { return mint(t, method, key, kid, sub, role, exp) }
	return []token{
		{"none", "", auth.Unset, 401, "unauthorized", "Authentication required"},
		{"expired", sig("u-exp", "admin", time.Now().Add(-time.Hour)), auth.Unset, 401, "invalid_token", "Token has expired"},
		{"wrong-signature", mint(t, method, stranger, kid, "u-x", "admin", later), auth.Unset, 401, "invalid_token", "Invalid token signature"},
		{"read-only", sig("u-ro", "read-only", later), auth.ReadOnly, 403, "forbidden", "Insufficient permissions"},
		{"read-write", sig("u-rw", "read-write", later), auth.ReadWrite, 403, "forbidden", "Insufficient permissions"},
		{"admin", sig("u-admin", "admin", later), auth.Admin, 0, "", ""},
	}
}

// RS256 and EdDSA with keys from a JWKS endpoint, on one route of each
// level; then the identity provider rotates its key.
func TestAuth_RouteLevels_JWKS(t *testing.T) {
	t.Parallel()
	some := map[string]bool{"push": true, "dlq": true, "resources_queue_delete": true, "health": true}
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsaStranger, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	_, edStranger, _ := ed25519.GenerateKey(rand.Reader)

	t.Run("RS256", func(t *testing.T) {
		j := newJWKSServer(t)
		j.set(rsaJWK("r1", &rsaKey.PublicKey))
		checkAccess(t, jwksVerifier(t, auth.RS256, j.URL), asymTokens(t, jwt.SigningMethodRS256, rsaKey, rsaStranger, "r1"), some)
	})
	t.Run("EdDSA", func(t *testing.T) {
		j := newJWKSServer(t)
		j.set(edJWK("e1", edKey.Public().(ed25519.PublicKey)))
		checkAccess(t, jwksVerifier(t, auth.EdDSA, j.URL), asymTokens(t, jwt.SigningMethodEdDSA, edKey, edStranger, "e1"), some)
	})
	t.Run("rotation", func(t *testing.T) {
		j := newJWKSServer(t)
		j.set(rsaJWK("old", &rsaKey.PublicKey))
		v := jwksVerifier(t, auth.RS256, j.URL)
		c := newClientOptions(t, newBroker(t), server.Options{Auth: v, Logger: quietLogger()})
		later := time.Now().Add(time.Hour)
		as := func(h string) *client {
			cc := *c
			cc.header = c.header.Clone()
			cc.header.Set("Authorization", h)
			return &cc
		}
		oldTok := mint(t, jwt.SigningMethodRS256, rsaKey, "old", "u", "read-only", later)
		newTok := mint(t, jwt.SigningMethodRS256, rsaStranger, "new", "u", "read-only", later)
		as(oldTok).do("GET", "/api/v1/dlq", nil).expect(t, 200)
		as(newTok).do("GET", "/api/v1/dlq", nil).expectError(t, 401, "invalid_token")

		j.set(rsaJWK("new", &rsaStranger.PublicKey)) // the IdP rotates: old is gone
		waitFor(t, 10*time.Second, "the new key to be accepted", func() bool {
			return as(newTok).do("GET", "/api/v1/dlq", nil).status == 200
		})
		waitFor(t, 10*time.Second, "the old key to be refused", func() bool {
			return as(oldTok).do("GET", "/api/v1/dlq", nil).status == 401
		})
	})
}

// JWT_SKIP_PATHS is matched against the path the router matched, not the
// decoded and normalised one: a queue named with ".." segments that
// normalises to a skipped path ("/health", "/") still needs a token.
func TestAuth_SkipPathsMatchTheRoutedPath(t *testing.T) {
	t.Parallel()
	c := newClientOptions(t, newBroker(t), server.Options{Auth: hsVerifier(t), Logger: quietLogger()})
	admin := *c
	admin.header = c.header.Clone()
	admin.header.Set("Authorization", mint(t, jwt.SigningMethodHS256, []byte(jwtSecret), "", "ops", "admin", time.Now().Add(time.Hour)))
	const dotted = "a%2F..%2F..%2F..%2F..%2F..%2F..%2Fhealth"
	admin.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "a/../../../../../../health", "payload": 1}}}).expect(t, 201)
	for _, r := range []struct{ method, path string }{
		{"GET", "/api/v1/resources/queues/" + dotted},
		{"GET", "/api/v1/pop/queue/" + dotted},
		{"DELETE", "/api/v1/resources/queues/" + dotted},
		{"GET", "/api/v1/resources/queues/a%2F..%2F..%2F..%2F..%2F..%2F.."}, // normalises to "/"
	} {
		c.do(r.method, r.path, nil).expectError(t, 401, "unauthorized")
	}
	// The queue is still there, and its message was never leased.
	admin.do("GET", "/api/v1/resources/queues/"+dotted, nil).expect(t, 200)
	if got := admin.mustPop(popPath(dotted, "batch=1")).Messages; len(got) != 1 {
		t.Fatalf("popped %d messages with a token, want the 1 pushed", len(got))
	}
	// The skipped paths themselves stay open.
	c.do("GET", "/health", nil).expect(t, 200)
}

// With auth on, producerSub is the pushing token's sub, on push and on a
// transaction's pushes, and a producerSub in the body is ignored; it shows
// in pop, message detail, the message list and the DLQ row.
func TestAuth_ProducerSub(t *testing.T) {
	t.Parallel()
	c := newClientOptions(t, newBroker(t), server.Options{Auth: hsVerifier(t), Logger: quietLogger()})
	c.header.Set("Authorization", mint(t, jwt.SigningMethodHS256, []byte(jwtSecret), "", "svc-orders", "read-write", time.Now().Add(time.Hour)))
	c.configure("ps", map[string]any{"retryLimit": 0})
	c.do("POST", "/api/v1/push", map[string]any{"items": []any{
		map[string]any{"queue": "ps", "transactionId": "a", "payload": 1, "producerSub": "forged"}}}).expect(t, 201)
	c.do("POST", "/api/v1/transaction", map[string]any{"operations": []any{map[string]any{"type": "push",
		"items": []any{map[string]any{"queue": "ps", "transactionId": "b", "payload": 2, "producerSub": "forged"}}}}}).expect(t, 200)

	sub := func(where string, got *string) {
		t.Helper()
		if got == nil || *got != "svc-orders" {
			t.Errorf("%s: producerSub %v, want svc-orders", where, got)
		}
	}
	p := c.mustPop(popPath("ps", "batch=2"))
	if len(p.Messages) != 2 {
		t.Fatalf("popped %d, want 2", len(p.Messages))
	}
	for _, m := range p.Messages {
		sub("pop "+m.TransactionID, m.ProducerSub)
	}
	pid := p.Messages[0].PartitionID
	var detail struct{ ProducerSub *string }
	c.do("GET", "/api/v1/messages/"+pid+"/a", nil).expect(t, 200).decode(t, &detail)
	sub("message detail", detail.ProducerSub)
	var list struct {
		Messages []struct{ ProducerSub *string }
	}
	c.do("GET", "/api/v1/messages?queue=ps", nil).expect(t, 200).decode(t, &list)
	if len(list.Messages) != 2 {
		t.Fatalf("listed %d, want 2", len(list.Messages))
	}
	for i := range list.Messages {
		sub("message list", list.Messages[i].ProducerSub)
	}
	c.ack(p.Messages[0], "failed", "to the DLQ")
	var page struct {
		Messages []struct{ ProducerSub *string }
	}
	c.do("GET", "/api/v1/dlq?queue=ps", nil).expect(t, 200).decode(t, &page)
	if len(page.Messages) != 1 {
		t.Fatalf("DLQ rows %d, want 1", len(page.Messages))
	}
	sub("DLQ row", page.Messages[0].ProducerSub)
}

// A replay's producer (docs/semantics.md §9.2): alice pushes; mallory, a
// read-write caller, dead-letters alice's messages and replays one with a
// payload she wrote, which consumers must see as hers, not alice's. A
// replay of the snapshot, by her or an admin's bulk redrive, keeps alice.
func TestAuth_ProducerSub_Replay(t *testing.T) {
	t.Parallel()
	c := newClientOptions(t, newBroker(t), server.Options{Auth: hsVerifier(t), Logger: quietLogger()})
	as := func(sub, role string) {
		c.header.Set("Authorization", mint(t, jwt.SigningMethodHS256, []byte(jwtSecret), "", sub, role, time.Now().Add(time.Hour)))
	}
	as("alice", "read-write")
	var pid string
	for _, txn := range []string{"corrected", "snapshot", "redriven"} {
		pid = c.pushOne("forge", "", txn, map[string]any{"from": "alice"}).PartitionID
	}
	as("mallory", "read-write")
	for _, txn := range []string{"corrected", "snapshot", "redriven"} {
		c.do("POST", "/api/v1/messages/"+pid+"/"+txn+"/dlq", nil).expect(t, 200)
	}
	var rows struct {
		Messages []struct {
			TransactionID string
			ProducerSub   *string
		}
	}
	c.do("GET", "/api/v1/dlq?queue=forge", nil).expect(t, 200).decode(t, &rows)
	if len(rows.Messages) != 3 {
		t.Fatalf("DLQ rows %d, want 3", len(rows.Messages))
	}
	for _, m := range rows.Messages {
		if m.ProducerSub == nil || *m.ProducerSub != "alice" {
			t.Fatalf("DLQ row %s: producerSub %v, want alice", m.TransactionID, m.ProducerSub)
		}
	}
	c.do("POST", "/api/v1/messages/"+pid+"/corrected/retry", map[string]any{"data": map[string]any{"from": "mallory"}}).expect(t, 200)
	c.do("POST", "/api/v1/messages/"+pid+"/snapshot/retry", nil).expect(t, 200)
	as("root", "admin")
	var redrive struct{ Replayed int }
	c.do("POST", "/api/v1/dlq/replay?queue=forge", nil).expect(t, 200).decode(t, &redrive)
	if redrive.Replayed != 1 {
		t.Fatalf("redrive replayed %d, want 1", redrive.Replayed)
	}

	as("consumer", "read-write")
	p := c.mustPop(popPath("forge", "batch=10"))
	want := map[string]string{`{"from":"mallory"}`: "mallory", `{"from":"alice"}`: "alice"}
	if len(p.Messages) != 3 {
		t.Fatalf("popped %d, want 3", len(p.Messages))
	}
	byProducer := map[string]int{}
	for _, m := range p.Messages {
		got := "null"
		if m.ProducerSub != nil {
			got = *m.ProducerSub
		}
		if w, ok := want[string(m.Data)]; !ok || got != w {
			t.Errorf("popped %s: producerSub %s, want %q", m.Data, got, w)
		}
		byProducer[got]++
	}
	if byProducer["mallory"] != 1 || byProducer["alice"] != 2 {
		t.Errorf("producers %v, want mallory 1, alice 2", byProducer)
	}
}

// With auth off producerSub is null, whatever the body says.
func TestAuth_ProducerSub_Off(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.do("POST", "/api/v1/push", map[string]any{"items": []any{
		map[string]any{"queue": "ps", "transactionId": "a", "payload": 1, "producerSub": "forged"}}}).expect(t, 201)
	if m := c.mustPop(popPath("ps", "batch=1")).Messages[0]; m.ProducerSub != nil {
		t.Fatalf("producerSub %q with auth off, want null", *m.ProducerSub)
	}
}

// The cluster secret: a node (or operator) holding it is admitted; a wrong
// one is refused even where no token would be needed; without a secret
// configured the membership routes are closed.
func TestAuth_ClusterSecret(t *testing.T) {
	t.Parallel()
	join := map[string]any{"id": "n9", "addr": "127.0.0.1:1"}
	closed := newClient(t)
	closed.do("POST", "/internal/v1/cluster/join", join).expectError(t, 403, "cluster_closed")
	closed.header.Set("X-Queen-Cluster-Secret", "guess")
	closed.do("POST", "/internal/v1/cluster/join", join).expectError(t, 403, "cluster_secret_invalid")

	c := newClientOptions(t, newBroker(t), server.Options{ClusterSecret: "s3cret-s3cret", Auth: hsVerifier(t), Logger: quietLogger()})
	c.do("POST", "/internal/v1/cluster/leave", map[string]any{"id": "n9"}).expectError(t, 401, "unauthorized")
	c.header.Set("X-Queen-Cluster-Secret", "s3cret-s3cre")
	c.do("POST", "/internal/v1/cluster/leave", map[string]any{"id": "n9"}).expectError(t, 403, "cluster_secret_invalid")
	c.do("GET", "/api/v1/resources/queues", nil).expectError(t, 403, "cluster_secret_invalid")
	c.header.Set("X-Queen-Cluster-Secret", "s3cret-s3cret")
	// Admitted: the handler runs (this broker has no membership: 501).
	c.do("POST", "/internal/v1/cluster/leave", map[string]any{"id": "n9"}).expectError(t, 501, "not_implemented")
	c.do("GET", "/api/v1/resources/queues", nil).expect(t, 200)
}

// A client cannot pass for a relaying follower: the leader checks the
// token of a request marked as relayed like any other.
func TestAuth_RelayHeadersGrantNothing(t *testing.T) {
	t.Parallel()
	c := newClientOptions(t, newBroker(t), server.Options{Auth: hsVerifier(t), Logger: quietLogger()})
	c.header.Set("X-Queen-Forwarded-By", "n2")
	c.header.Set("X-Queen-Sealed", "1")
	c.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "r", "payload": 1}}}).
		expectError(t, 401, "unauthorized")
}

// Through a follower: a client's push is relayed with the client's own
// token and the leader stamps that token's sub; a follower's spool replay
// proves the cluster secret and keeps the sub each item was spooled with.
func TestAuth_FollowerRelaysKeepTheCallersIdentity(t *testing.T) {
	t.Parallel()
	lb := servertest.NewLocalBroker(t)
	const secret = "cluster-secret-for-tests"
	opts := func() server.Options {
		return server.Options{Auth: hsVerifier(t), ClusterSecret: secret, Logger: quietLogger(), SpoolDir: t.TempDir()}
	}
	leader := newClientOptions(t, lb, opts())
	f := newClientOptions(t, follower{LocalBroker: lb, leaderHTTP: strings.TrimPrefix(leader.base, "http://")}, opts())
	later := time.Now().Add(time.Hour)
	as := func(c *client, sub, role string) *client {
		cc := *c
		cc.header = c.header.Clone()
		cc.header.Set("Authorization", mint(t, jwt.SigningMethodHS256, []byte(jwtSecret), "", sub, role, later))
		return &cc
	}
	push := func(txn string) map[string]any {
		return map[string]any{"items": []any{map[string]any{"queue": "rel", "transactionId": txn, "payload": 1, "producerSub": "forged"}}}
	}
	f.do("POST", "/api/v1/push", push("anon")).expectError(t, 401, "unauthorized")
	as(f, "svc-relayed", "read-write").do("POST", "/api/v1/push", push("relayed")).expect(t, 201)

	admin := as(f, "ops", "admin")
	admin.do("POST", "/api/v1/system/maintenance", map[string]any{"enabled": true}).expect(t, 200)
	var buffered []map[string]any
	as(f, "svc-spooled", "read-write").do("POST", "/api/v1/push", push("spooled")).expect(t, 201).decode(t, &buffered)
	if len(buffered) != 1 || buffered[0]["status"] != "buffered" {
		t.Fatalf("push during maintenance: %v", buffered)
	}
	admin.do("POST", "/api/v1/system/maintenance", map[string]any{"enabled": false}).expect(t, 200)
	waitFor(t, 30*time.Second, "the follower's spool to be replayed", func() bool {
		return admin.do("GET", "/api/v1/status/buffers", nil).expect(t, 200).object(t)["pending"] == float64(0)
	})
	got := map[string]string{}
	for _, m := range as(leader, "reader", "read-write").mustPop(popPath("rel", "batch=10")).Messages {
		if m.ProducerSub != nil {
			got[m.TransactionID] = *m.ProducerSub
		}
	}
	if want := map[string]string{"relayed": "svc-relayed", "spooled": "svc-spooled"}; !maps.Equal(got, want) {
		t.Fatalf("producerSub by transaction %v, want %v", got, want)
	}
}
