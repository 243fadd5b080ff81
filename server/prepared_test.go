package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/servertest"
)

// preparedPair is a leader and a follower over one engine that share the
// cluster secret and the encryption key, as the nodes of a cluster do.
func preparedPair(t *testing.T, leaderURL func(leader *client) string) (lb *servertest.LocalBroker, leader, f *client) {
	t.Helper()
	lb = servertest.NewLocalBroker(t)
	opts := server.Options{Logger: quietLogger(), ClusterSecret: testSecret, EncryptionKey: testKey}
	leader = newClientOptions(t, lb, opts)
	opts.SpoolDir = t.TempDir()
	addr := strings.TrimPrefix(leaderURL(leader), "http://")
	f = newClientOptions(t, follower{LocalBroker: lb, leaderHTTP: addr}, opts)
	return lb, leader, f
}

func direct(leader *client) string { return leader.base }

// A follower with the cluster secret decodes, seals and compresses a push
// itself and hands the leader the prepared command: the leader proposes it
// without reading JSON, and the client's answer is the one the leader would
// have given (trace ids, repeats within the request, duplicates of earlier
// pushes, sealed payloads on an encrypted queue).
func TestPrepared_FollowerPreparesPushesForTheLeader(t *testing.T) {
	t.Parallel()
	lb, leader, f := preparedPair(t, direct)
	leader.configure("sealed", map[string]any{"encryptionEnabled": true})
	const trace = "0190a0b0-0000-7000-8000-000000000001"
	var res []pushResult
	f.do("POST", "/api/v1/push", `{"items":[`+
		`{"queue":"p","payload":{"n":1},"traceId":"`+trace+`"},`+
		`{"queue":"p","transactionId":"t1","payload":2},`+
		`{"queue":"p","transactionId":"t1","payload":3},`+
		`{"queue":"sealed","transactionId":"s","payload":{"card":"PREPARED-MARKER"}}]}`).
		expect(t, http.StatusCreated).decode(t, &res)
	if len(res) != 4 {
		t.Fatalf("%d results, want 4: %+v", len(res), res)
	}
	for i, want := range []string{"queued", "queued", "duplicate", "queued"} {
		if res[i].Index != i || res[i].Status != want || res[i].MessageID == "" || res[i].PartitionID == "" {
			t.Errorf("result %d: %+v, want %s with ids", i, res[i], want)
		}
	}
	if res[0].TraceID == nil || *res[0].TraceID != trace || res[1].TraceID != nil {
		t.Errorf("trace ids %v %v, want %s and null", res[0].TraceID, res[1].TraceID, trace)
	}
	if res[2].MessageID != res[1].MessageID || res[2].TransactionID != "t1" || res[3].QueueName != "sealed" {
		t.Errorf("repeat within the request %+v, first %+v, sealed %+v", res[2], res[1], res[3])
	}
	var dup []pushResult
	f.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "p", "transactionId": "t1", "payload": 4}}}).
		expect(t, http.StatusCreated).decode(t, &dup)
	if again := dup[0]; len(dup) != 1 || again.Status != "duplicate" || again.MessageID != res[1].MessageID {
		t.Errorf("t1 pushed again via the follower: %+v, want a duplicate of %s", dup, res[1].MessageID)
	}

	m := leader.mustPop(popPath("p", "batch=10")).Messages
	if len(m) != 2 || !sameJSON(t, m[0].Data, `{"n":1}`) || m[0].TraceID == nil || *m[0].TraceID != trace ||
		m[1].TransactionID != "t1" || !sameJSON(t, m[1].Data, `2`) {
		t.Fatalf("popped %+v", m)
	}
	s := leader.mustPop(popPath("sealed", "batch=10")).Messages
	if len(s) != 1 || !sameJSON(t, s[0].Data, `{"card":"PREPARED-MARKER"}`) {
		t.Fatalf("sealed queue popped %+v", s)
	}
	if raw := stored(t, lb, s[0].PartitionID, "s"); !isEnvelope(raw) || bytes.Contains(raw, []byte("MARKER")) {
		t.Fatalf("the follower's push to an encrypted queue is stored as %s", raw)
	}

	// The leader proposed both pushes from prepared commands, and read
	// no client request: its push route was never called.
	for name, want := range map[string]float64{
		`queen_http_requests_total{route="propose_relayed",status="2xx"}`: 2,
		`queen_http_requests_total{route="push",status="2xx"}`:            0,
		`queen_command_duration_seconds_count{command="push"}`:            2,
	} {
		if got := leader.metric(name); got != want {
			t.Errorf("leader %s = %v, want %v", name, got, want)
		}
	}
	if got := f.metric("queen_forwarded_requests_total"); got != 2 {
		t.Errorf("follower forwarded %v pushes, want 2", got)
	}
	// Bad input is the follower's own 400 now: it reads every push.
	f.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"payload": 1}}}).
		expectError(t, http.StatusBadRequest, "invalid_argument")
	if got := f.metric("queen_forwarded_requests_total"); got != 2 {
		t.Errorf("follower forwarded a malformed push (%v forwards)", got)
	}
}

// The one path between nodes takes the cluster secret and nothing else: an
// admin token does not vouch for producer subjects and sealed bits. A body
// that is not one command is a 400, and nothing is written.
func TestPrepared_RouteIsTheNodesOnly(t *testing.T) {
	t.Parallel()
	_, leader, _ := preparedPair(t, direct)
	leader.header = leader.header.Clone()
	leader.header.Set("X-Queen-Group", "1")
	leader.do("POST", "/internal/v1/propose", "x").expectError(t, http.StatusForbidden, "cluster_secret_invalid")
	leader.header.Set("X-Queen-Cluster-Secret", "wrong")
	leader.do("POST", "/internal/v1/propose", "x").expectError(t, http.StatusForbidden, "cluster_secret_invalid")
	leader.header.Set("X-Queen-Cluster-Secret", testSecret)
	sweep := string(command.AppendEntry(nil, []command.Stamped{{Cmd: engine.SweepCmd{}}}))
	for _, body := range []string{"", "x", "\x51\x01\x01\x00", `{"items":[{"queue":"q","payload":1}]}`, sweep} {
		r := leader.do("POST", "/internal/v1/propose", body)
		if r.status/100 != 4 {
			t.Errorf("proposed %q: %d %s, want a 4xx", body, r.status, r.body)
		}
	}
	leader.header.Del("X-Queen-Cluster-Secret")
	leader.mustBeEmpty(popPath("q", "batch=1"))
}

// lagging is a follower whose applied state has not seen push maintenance
// switched on yet.
type lagging struct{ follower }

func (lagging) Maintenance() (push, pop bool) { return false, false }

// A prepared push that reaches a leader in push maintenance is buffered by
// the follower that prepared it, as it would have been had the follower
// seen the switch: the leader cannot buffer a push it never read.
func TestPrepared_LeaderInMaintenanceLeavesThePushToTheFollowersSpool(t *testing.T) {
	t.Parallel()
	lb := servertest.NewLocalBroker(t)
	opts := server.Options{Logger: quietLogger(), ClusterSecret: testSecret, SpoolDir: t.TempDir()}
	leader := newClientOptions(t, lb, opts)
	opts.SpoolDir = t.TempDir()
	f := newClientOptions(t, lagging{follower{LocalBroker: lb, leaderHTTP: strings.TrimPrefix(leader.base, "http://")}}, opts)
	leader.do("POST", "/api/v1/system/maintenance", map[string]any{"enabled": true}).expect(t, 200)
	var res []map[string]any
	f.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "m", "transactionId": "b", "payload": 1}}}).
		expect(t, http.StatusCreated).decode(t, &res)
	if len(res) != 1 || res[0]["status"] != "buffered" {
		t.Fatalf("prepared push during the leader's maintenance: %v, want it buffered", res)
	}
	var buffers map[string]any
	f.do("GET", "/api/v1/status/buffers", nil).expect(t, 200).decode(t, &buffers)
	if buffers["pending"] != float64(1) {
		t.Fatalf("follower's spool %v, want 1 pending", buffers)
	}
	leader.do("POST", "/api/v1/system/maintenance", map[string]any{"enabled": false}).expect(t, 200)
	leader.mustBeEmpty(popPath("m", "batch=1")) // in the spool, not written
}

// A leader of an older version takes prepared pushes on a route of its own
// and answers the one path 501 on a single group: the follower then relays
// the client's request as it is, so a rolling upgrade that
// starts with the followers keeps every push working.
func TestPrepared_OlderLeaderGetsTheRequestRelayed(t *testing.T) {
	t.Parallel()
	_, leader, f := preparedPair(t, func(leader *client) string {
		return olderLeader(t, leader, http.StatusNotImplemented, "not_implemented", "this broker runs one Raft group")
	})
	if r := f.pushOne("up", "", "u", map[string]any{"v": 1}); r.Status != "queued" {
		t.Fatalf("push via a follower of an older leader: %+v", r)
	}
	if m := leader.mustPop(popPath("up", "batch=1")).Messages; len(m) != 1 || !sameJSON(t, m[0].Data, `{"v":1}`) {
		t.Fatalf("popped %+v", m)
	}
	if got := leader.metric(`queen_http_requests_total{route="push",status="2xx"}`); got != 1 {
		t.Errorf("the leader's push route answered %v relayed pushes, want 1", got)
	}
}

// A leader below its disk reserve refuses a prepared push as it refuses a
// client's, and the follower hands its 507 to the client.
func TestPrepared_LeaderBelowReserveRefusesIt(t *testing.T) {
	t.Parallel()
	lb := servertest.NewLocalBroker(t)
	opts := server.Options{Logger: quietLogger(), ClusterSecret: testSecret}
	leader, space := newDiskClient(t, lb, opts)
	f := newClientOptions(t, follower{LocalBroker: lb, leaderHTTP: strings.TrimPrefix(leader.base, "http://")}, opts)
	f.pushOne("d", "", "before", 1)
	space.SetFree(63 * mib)
	f.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "d", "payload": 2}}}).
		expectInsufficientStorage(t, "local")
	if got := leader.metric(`queen_http_requests_total{route="propose_relayed",status="5xx"}`); got != 1 {
		t.Errorf("leader refused %v prepared pushes, want 1", got)
	}
	if m := leader.mustPop(popPath("d", "batch=10")).Messages; len(m) != 1 || m[0].TransactionID != "before" {
		t.Fatalf("popped %+v, want only the push from before", m)
	}
}

// A push of many tiny items prepares into an entry larger than its JSON;
// past the body limit the follower relays the request as it came, which the
// leader takes under the same limit.
func TestPrepared_EntryPastTheBodyLimitIsRelayedAsSent(t *testing.T) {
	t.Parallel()
	lb := servertest.NewLocalBroker(t)
	opts := server.Options{Logger: quietLogger(), ClusterSecret: testSecret, MaxBodyBytes: 8 << 10}
	leader := newClientOptions(t, lb, opts)
	f := newClientOptions(t, follower{LocalBroker: lb, leaderHTTP: strings.TrimPrefix(leader.base, "http://")}, opts)
	var items []engine.PushItem
	var body strings.Builder
	body.WriteString(`{"items":[`)
	for i := range 200 {
		if i > 0 {
			body.WriteString(",")
		}
		body.WriteString(`{"queue":"tiny","payload":1}`)
		items = append(items, engine.PushItem{Queue: "tiny", Payload: []byte("1")})
	}
	body.WriteString(`]}`)
	entry, err := raft.PrepareEntry(engine.PushCmd{Items: items})
	if err != nil {
		t.Fatal(err)
	}
	if body.Len() > opts.MaxBodyBytes || len(entry) <= opts.MaxBodyBytes {
		t.Fatalf("body %d B, entry %d B: the test needs a body under the %d B limit and an entry over it",
			body.Len(), len(entry), opts.MaxBodyBytes)
	}
	var res []pushResult
	f.do("POST", "/api/v1/push", body.String()).expect(t, http.StatusCreated).decode(t, &res)
	if len(res) != 200 || res[199].Status != "queued" {
		t.Fatalf("%d results, last %+v", len(res), res[len(res)-1])
	}
	if got := leader.metric(`queen_http_requests_total{route="push",status="2xx"}`); got != 1 {
		t.Errorf("the leader's push route answered %v relayed pushes, want 1", got)
	}
	if got := leader.metric(`queen_http_requests_total{route="propose_relayed",status="4xx"}`); got != 0 {
		t.Errorf("the leader refused %v prepared pushes", got)
	}
}

// olderLeader serves leader's routes but the cluster path, which it
// answers status with the error code and message an older version gives
// (501 not_implemented: a version without the path; 400 not_preparable:
// one whose command table does not send the command); its base URL.
func olderLeader(t *testing.T, leader *client, status int, code, msg string) string {
	t.Helper()
	target, err := url.Parse(leader.base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/internal/v1/propose" {
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": msg, "code": code})
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(old.Close)
	return old.URL
}
