package main

// Process-level test harness: real `queen serve` processes driven over HTTP.
// The binary is built once per test run (on first use) into a directory
// TestMain removes at the end. Every node writes its stderr and stdout to a
// file; a failed test logs the tail of each node's file.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/queenmq/queen/internal/invariants"
	"github.com/queenmq/queen/internal/porttest"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "queen-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "queen tests:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// A built queen binary, once per test run.
type builtBinary struct {
	once sync.Once
	path string
	err  error
}

var nodeBin, shippedBin builtBinary

// queenBinary returns the binary the tests start their nodes and run their
// CLI commands with, built once (into TestMain's directory) as this test
// binary was: with the race detector when `go test -race`, with the
// invariant checks when -tags invariants (make test does both), so the
// cluster tests check the broker's own code and not only the driver's. A
// race build needs cgo (and, to keep Pebble's cgo zstd out, the
// pebblegozstd tag). Otherwise it is the shipped binary (shippedBinary).
// QUEEN_TEST_BINARY names a prebuilt binary to use instead.
func queenBinary(t testing.TB) string {
	t.Helper()
	if !raceBuild && !invariants.Enabled {
		return shippedBinary(t)
	}
	nodeBin.once.Do(func() {
		if p := os.Getenv("QUEEN_TEST_BINARY"); p != "" {
			nodeBin.path = p
			return
		}
		var tags []string
		if invariants.Enabled {
			tags = append(tags, "invariants")
		}
		args, env := []string{"-tags"}, "CGO_ENABLED=0"
		if raceBuild {
			args = append([]string{"-race"}, args...)
			tags = append(tags, "pebblegozstd")
			env = "CGO_ENABLED=1"
		}
		args = append(args, strings.Join(tags, ","))
		nodeBin.path, nodeBin.err = buildQueen(t, "queen-test", env, args...)
	})
	if nodeBin.err != nil {
		t.Fatal(nodeBin.err)
	}
	return nodeBin.path
}

// shippedBinary returns the binary make build ships (no cgo, no race
// detector, no invariant checks), built once: for the tests that measure
// the process (its memory) or follow the README, whose numbers and
// commands are the shipped binary's.
func shippedBinary(t testing.TB) string {
	t.Helper()
	shippedBin.once.Do(func() {
		shippedBin.path, shippedBin.err = buildQueen(t, "queen", "CGO_ENABLED=0")
	})
	if shippedBin.err != nil {
		t.Fatal(shippedBin.err)
	}
	return shippedBin.path
}

func buildQueen(t testing.TB, name, env string, flags ...string) (string, error) {
	goTool, err := exec.LookPath("go") // go test puts GOROOT/bin first on PATH
	if err != nil {
		return "", fmt.Errorf("go tool not found: %v", err)
	}
	path := filepath.Join(binDir, name)
	start := time.Now()
	args := append(append([]string{"build"}, flags...), "-o", path, ".")
	build := exec.Command(goTool, args...)
	build.Env = append(os.Environ(), env)
	out, err := build.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s go %s: %v\n%s", env, strings.Join(args, " "), err, out)
	}
	t.Logf("built %s (%s go %s) in %v", path, env, strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return path, nil
}

// serveHasFlag reports whether `queen serve` knows the flag (so a test can
// use a tuning flag as soon as it exists).
func serveHasFlag(t testing.TB, name string) bool {
	out, _ := exec.Command(queenBinary(t), "serve", "-h").CombinedOutput()
	return bytes.Contains(out, []byte("-"+name+" "))
}

// freePorts returns n distinct TCP ports on 127.0.0.1 reserved for the
// rest of t: tests run in parallel and restart nodes on their ports, so a
// port must stay theirs while no process listens on it (porttest says how).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	return porttest.Ports(t, n)
}

// qnode is one `queen serve` process (possibly restarted several times on
// the same data directory).
type qnode struct {
	t       testing.TB
	id      string
	dir     string   // --data
	http    string   // host:port the test driver reaches the node at
	scheme  string   // http, or https when the cluster serves TLS
	args    []string // serve flags
	wrap    []string // command prefix, e.g. ip netns exec NS
	bin     string   // the binary; "" is queenBinary's
	env     []string // added to the test's environment
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	starts int
	// logStart is the log's size once the harness wrote its line for the
	// last start: what the process writes comes after it.
	logStart int64
}

func (n *qnode) url(path string) string { return n.scheme + "://" + n.http + path }

// start launches the process; its output is appended to n.logPath.
func (n *qnode) start() {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && !isClosed(n.exited) {
		n.t.Fatalf("%s: start while running", n.id)
	}
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.t.Fatal(err)
	}
	defer f.Close() // the child holds its own descriptor
	n.starts++
	bin := n.bin
	if bin == "" {
		bin = queenBinary(n.t)
	}
	argv := append(append(append([]string{}, n.wrap...), bin, "serve"), n.args...)
	fmt.Fprintf(f, "=== test: start #%d at %s: %s\n", n.starts, time.Now().Format(time.RFC3339Nano), strings.Join(argv, " "))
	if st, err := f.Stat(); err == nil {
		n.logStart = st.Size()
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), n.env...)
	cmd.Stdout, cmd.Stderr = f, f
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("%s: start: %v", n.id, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	n.cmd, n.exited = cmd, exited
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (n *qnode) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && !isClosed(n.exited)
}

// kill sends SIGKILL and waits for the process to be gone.
func (n *qnode) kill() {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil || isClosed(exited) {
		return
	}
	cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		n.t.Errorf("%s: still running 10s after SIGKILL", n.id)
	}
}

// waitStarting waits, up to 10 s, for the process started last to write to
// its log (serve's "starting" line, logged once its signal handler is in
// place): a SIGTERM in the milliseconds before the Go program reaches serve
// meets the default action, which no program can change. A node run with
// --log-level above info writes nothing then; the wait ends at the timeout.
func (n *qnode) waitStarting(exited chan struct{}) {
	n.mu.Lock()
	start := n.logStart
	n.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && !isClosed(exited) {
		if st, err := os.Stat(n.logPath); err == nil && st.Size() > start {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for a clean exit (status 0); after 20 s it
// sends SIGQUIT, so the Go runtime writes every goroutine's stack to the
// node's log, then kills the process and reports an error. Safe from any
// goroutine.
func (n *qnode) stop() {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil || isClosed(exited) {
		return
	}
	n.waitStarting(exited)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if !cmd.ProcessState.Success() {
			n.t.Errorf("%s: exit after SIGTERM: %v (want status 0)", n.id, cmd.ProcessState)
		}
	case <-time.After(20 * time.Second):
		n.t.Errorf("%s: did not exit within 20s of SIGTERM; its goroutines are in %s (SIGQUIT); killing it", n.id, n.logPath)
		cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
		n.kill()
	}
}

// logTail returns the last max bytes of the node's output.
func (n *qnode) logTail(max int) string {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(b) > max {
		b = b[len(b)-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// cluster is a set of nodes and the test's HTTP client.
type cluster struct {
	t     testing.TB
	base  string // the nodes' data directories and logs
	nodes []*qnode
	hc    *http.Client
	// header is sent with every request of do (a cluster secret, a token).
	header http.Header
	scheme string // of the nodes' URLs: http unless useTLS
	bin    string // the nodes' binary; "" is queenBinary's (useShipped)
	// env is added to the environment of the nodes added after it is
	// set (not t.Setenv, which would keep the test from running in
	// parallel).
	env   []string
	allMu sync.Mutex
	all   []*qnode // every node made, for checkReports
}

// useShipped runs the nodes added after it on the shipped binary
// (shippedBinary), not on the race and invariants build.
func (c *cluster) useShipped() {
	c.bin = shippedBinary(c.t)
}

// useTLS makes the driver reach the nodes over HTTPS, trusting roots. Call
// it before adding nodes.
func (c *cluster) useTLS(roots *tls.Config) {
	c.scheme = "https"
	c.hc.Transport.(*http.Transport).TLSClientConfig = roots
}

func newCluster(t testing.TB) *cluster {
	// The temp dir is made before the cleanup below is registered, so it is
	// removed after the cleanup has killed the nodes and logged their tails.
	c := &cluster{t: t, base: t.TempDir(), header: http.Header{}, scheme: "http", hc: &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     30 * time.Second,
		DialContext:         (&net.Dialer{Timeout: 3 * time.Second}).DialContext,
	}}}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.kill()
		}
		c.checkReports()
		if t.Failed() {
			for _, n := range c.nodes {
				t.Logf("---- tail of %s (%s) ----\n%s", n.id, n.logPath, n.logTail(6000))
			}
		}
		c.hc.CloseIdleConnections()
	})
	return c
}

// nodeReports are what a node of the race and invariants build
// (queenBinary) writes when it finds a bug: the race detector's report
// (printed when the race happens; the process goes on, and exits 66 only
// if it is let exit) and an invariant's panic. Most tests end their nodes
// with kill -9, so their logs are read.
var nodeReports = []string{"WARNING: DATA RACE", "engine: invariant:"}

// checkReports fails the test for each node whose log holds a nodeReports
// line, quoting the report.
func (c *cluster) checkReports() {
	c.allMu.Lock()
	defer c.allMu.Unlock()
	for _, n := range c.all {
		b, err := os.ReadFile(n.logPath)
		if err != nil {
			continue
		}
		for _, r := range nodeReports {
			if i := bytes.Index(b, []byte(r)); i >= 0 {
				c.t.Errorf("%s: %q in its log %s:\n%s", n.id, r, n.logPath, b[i:min(len(b), i+6000)])
				break
			}
		}
	}
}

// addNode registers a node; its data directory and log are in c.base.
func (c *cluster) addNode(id, httpAddr string, wrap []string, args ...string) *qnode {
	n := c.newNode(id, httpAddr, wrap, args...)
	c.nodes = append(c.nodes, n)
	return n
}

// newNode makes a node as addNode does without adding it to c.nodes: the
// caller keeps it (a chaos run's joiners, whose membership changes while
// clients read c.nodes) and kills it at the test's end.
func (c *cluster) newNode(id, httpAddr string, wrap []string, args ...string) *qnode {
	dir := filepath.Join(c.base, id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	n := &qnode{t: c.t, id: id, dir: dir, http: httpAddr, scheme: c.scheme, wrap: wrap, bin: c.bin, env: c.env, logPath: filepath.Join(c.base, id+".log")}
	n.args = append([]string{"--data", dir, "--node-id", id}, args...)
	c.allMu.Lock()
	c.all = append(c.all, n)
	c.allMu.Unlock()
	return n
}

// startLoopback starts n nodes on 127.0.0.1 with static peers. Retention
// sweeps are off (--retention-interval 0) so that a quiet cluster proposes
// nothing and replicas can be compared at one applied index.
func startLoopback(t testing.TB, n int, extra ...string) *cluster {
	c := newCluster(t)
	c.startLoopback(n, extra...)
	return c
}

// startLoopback adds and starts n nodes as the function startLoopback does,
// on a cluster the caller has set up (useTLS, header).
func (c *cluster) startLoopback(n int, extra ...string) {
	t := c.t
	ports := freePorts(t, 2*n)
	var peers []string
	for i := range n {
		peers = append(peers, fmt.Sprintf("n%d@127.0.0.1:%d", i+1, ports[n+i]))
	}
	for i := range n {
		httpAddr := fmt.Sprintf("127.0.0.1:%d", ports[i])
		args := append([]string{"--http", httpAddr, "--raft", fmt.Sprintf("127.0.0.1:%d", ports[n+i]),
			"--peers", strings.Join(peers, ","), "--retention-interval", "0"}, extra...)
		c.addNode(fmt.Sprintf("n%d", i+1), httpAddr, nil, args...)
	}
	for _, nd := range c.nodes {
		nd.start()
	}
}

func (c *cluster) byID(id string) *qnode {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

func (c *cluster) others(n *qnode) []*qnode {
	var out []*qnode
	for _, o := range c.nodes {
		if o != n {
			out = append(out, o)
		}
	}
	return out
}

// do sends one request with a timeout and returns the status and body.
func (c *cluster) do(timeout time.Duration, method, url string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// health is the part of GET /health the tests read.
type health struct {
	Code       int      `json:"-"`
	ID         string   `json:"id"`
	Role       string   `json:"role"`
	Leader     string   `json:"leader"`
	LeaderHTTP string   `json:"leaderHttp"`
	Applied    uint64   `json:"applied"`
	Term       uint64   `json:"term"`
	Voters     int      `json:"voters"`
	Members    []string `json:"members"` // the voters of its configuration (every group's with groups)
}

func (h health) String() string {
	return fmt.Sprintf("{%d %s role=%s leader=%q applied=%d term=%d voters=%d}",
		h.Code, h.ID, h.Role, h.Leader, h.Applied, h.Term, h.Voters)
}

func (c *cluster) health(n *qnode) (health, error) {
	code, b, err := c.do(2*time.Second, "GET", n.url("/health"), nil)
	if err != nil {
		return health{}, err
	}
	var h health
	if err := json.Unmarshal(b, &h); err != nil {
		return health{}, fmt.Errorf("health %d: %v: %s", code, err, b)
	}
	h.Code = code
	return h, nil
}

// waitFor polls cond every 50 ms until it holds or timeout passes; then it
// fails the test with what and cond's last description of the state.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last state: %s", timeout, what, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// healths reads /health from every node of nodes; the description lists
// them (or their errors).
func (c *cluster) healths(nodes []*qnode) ([]health, []error, string) {
	hs := make([]health, len(nodes))
	errs := make([]error, len(nodes))
	var desc []string
	for i, n := range nodes {
		hs[i], errs[i] = c.health(n)
		if errs[i] != nil {
			desc = append(desc, fmt.Sprintf("%s: %v", n.id, errs[i]))
		} else {
			desc = append(desc, hs[i].String())
		}
	}
	return hs, errs, strings.Join(desc, ", ")
}

// waitLeader waits until every node of nodes answers 200 and names the same
// leader, which is one of them and reports role leader.
func (c *cluster) waitLeader(nodes []*qnode, timeout time.Duration) *qnode {
	c.t.Helper()
	var leader *qnode
	waitFor(c.t, timeout, "one leader that all of "+ids(nodes)+" agree on", func() (bool, string) {
		hs, errs, desc := c.healths(nodes)
		id := ""
		for i, h := range hs {
			if errs[i] != nil || h.Code != 200 || h.Leader == "" || (id != "" && h.Leader != id) {
				return false, desc
			}
			id = h.Leader
		}
		for i, n := range nodes {
			if n.id == id && hs[i].Role == "leader" {
				leader = n
				return true, desc
			}
		}
		return false, desc
	})
	return leader
}

// waitConverged waits until every node of nodes answers 200 with the same
// leader and the same applied index, twice in a row 200 ms apart. It
// returns the leader and the index.
func (c *cluster) waitConverged(nodes []*qnode, timeout time.Duration) (*qnode, uint64) {
	c.t.Helper()
	var (
		leader *qnode
		last   string
		idx    uint64
	)
	waitFor(c.t, timeout, "nodes "+ids(nodes)+" to agree on a leader and an applied index", func() (bool, string) {
		hs, errs, desc := c.healths(nodes)
		for i, h := range hs {
			if errs[i] != nil || h.Code != 200 || h.Leader == "" || h.Leader != hs[0].Leader || h.Applied != hs[0].Applied {
				last = ""
				return false, desc
			}
		}
		key := fmt.Sprintf("%s@%d", hs[0].Leader, hs[0].Applied)
		if key != last {
			last = key
			time.Sleep(150 * time.Millisecond)
			return false, desc
		}
		leader, idx = c.byID(hs[0].Leader), hs[0].Applied
		return true, desc
	})
	return leader, idx
}

func ids(nodes []*qnode) string {
	var s []string
	for _, n := range nodes {
		s = append(s, n.id)
	}
	return strings.Join(s, ",")
}

// checkResult is `queen check` on one stopped node.
type checkResult struct {
	applied uint64
	digest  string
}

var checkLine = regexp.MustCompile(`(?m)^ok: applied index (\d+), digest ([0-9a-f]+)\s*$`)

func runCheck(t testing.TB, dir string) (checkResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, queenBinary(t), "check", "--data", dir).CombinedOutput()
	if err != nil {
		return checkResult{}, fmt.Errorf("queen check --data %s: %v: %s", dir, err, out)
	}
	m := checkLine.FindSubmatch(out)
	if m == nil {
		return checkResult{}, fmt.Errorf("queen check --data %s: no ok line in %q", dir, out)
	}
	a, _ := strconv.ParseUint(string(m[1]), 10, 64)
	return checkResult{applied: a, digest: string(m[2])}, nil
}

// stopAndCompare waits for nodes to converge, stops them (followers first),
// runs `queen check` on each and requires ok with identical applied indexes
// and digests, at the index /health showed before the stop.
func (c *cluster) stopAndCompare(nodes []*qnode, timeout time.Duration) {
	c.t.Helper()
	const attempts = 3
	for attempt := 1; ; attempt++ {
		leader, idx := c.waitConverged(nodes, timeout)
		var wg sync.WaitGroup
		for _, n := range nodes {
			if n != leader {
				wg.Go(n.stop)
			}
		}
		wg.Wait()
		leader.stop()
		var results []checkResult
		var lines []string
		for _, n := range nodes {
			r, err := runCheck(c.t, n.dir)
			if err != nil {
				c.t.Errorf("%s: %v", n.id, err)
				return
			}
			results = append(results, r)
			lines = append(lines, fmt.Sprintf("%s: applied %d digest %s", n.id, r.applied, r.digest))
		}
		// An entry proposed after the nodes converged (a node's own
		// housekeeping, a released lease) can commit while they stop: the
		// leader applies it, a follower that appended it stops before it
		// learns the commit. That is Raft, not divergence: started again,
		// every replica applies its log, and they are compared again.
		lags := func(r checkResult) bool { return r.applied != results[0].applied }
		if (slices.ContainsFunc(results, lags) || results[0].applied != idx) && attempt < attempts {
			c.t.Logf("attempt %d: an entry committed while the nodes stopped (/health said %d before; %s): starting them again",
				attempt, idx, strings.Join(lines, "; "))
			for _, n := range nodes {
				n.start()
			}
			continue
		}
		for i, r := range results[1:] {
			if r != results[0] {
				c.t.Errorf("replicas differ: %s has applied %d digest %s, %s has applied %d digest %s",
					nodes[0].id, results[0].applied, results[0].digest, nodes[i+1].id, r.applied, r.digest)
			}
		}
		if results[0].applied != idx {
			c.t.Errorf("queen check reports applied %d, /health reported %d before the stop", results[0].applied, idx)
		}
		c.t.Logf("queen check: %s", strings.Join(lines, "; "))
		return
	}
}

// Wire shapes (docs/api.md §5-§7).

type pushItem struct {
	Queue         string `json:"queue"`
	Partition     string `json:"partition,omitempty"`
	TransactionID string `json:"transactionId"`
	Payload       any    `json:"payload"`
}

type pushResult struct {
	Index         int    `json:"index"`
	TransactionID string `json:"transaction_id"`
	Status        string `json:"status"`
	MessageID     string `json:"message_id"`
	PartitionID   string `json:"partition_id"`
	Error         string `json:"error"`
}

type popMessage struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	LeaseID       string          `json:"leaseId"`
	Data          json.RawMessage `json:"data"`
}

type popResponse struct {
	LeaseID  string       `json:"leaseId"`
	Messages []popMessage `json:"messages"`
}

type ackItem struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId,omitempty"`
	Status        string `json:"status"`
}

type ackResult struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
}

// apiError is the docs/decisions.md C2 error body {"error","code"}.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// c2 parses an error body and reports whether it has the docs/decisions.md C2 shape.
func c2(body []byte) (apiError, bool) {
	var e apiError
	if json.Unmarshal(body, &e) != nil || e.Error == "" || e.Code == "" {
		return e, false
	}
	return e, true
}

// push posts items to node n. On 201 it decodes the per-item results.
func (c *cluster) push(n *qnode, timeout time.Duration, items []pushItem) (int, []pushResult, []byte, error) {
	body, err := json.Marshal(map[string]any{"items": items})
	if err != nil {
		return 0, nil, nil, err
	}
	return c.pushRaw(n, timeout, body)
}

func (c *cluster) pushRaw(n *qnode, timeout time.Duration, body []byte) (int, []pushResult, []byte, error) {
	code, b, err := c.do(timeout, "POST", n.url("/api/v1/push"), body)
	if err != nil || code != http.StatusCreated {
		return code, nil, b, err
	}
	var res []pushResult
	if err := json.Unmarshal(b, &res); err != nil {
		return code, nil, b, fmt.Errorf("decode push reply: %v: %s", err, b)
	}
	return code, res, b, nil
}

// mustPush pushes items through the nodes (round robin from the first),
// retrying network errors and 5xx with the same items until the deadline,
// and requires every item answered queued or duplicate. It returns the
// results of the answered attempt. Test goroutine only.
func (c *cluster) mustPush(nodes []*qnode, timeout time.Duration, items []pushItem) []pushResult {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for attempt := 0; ; attempt++ {
		n := nodes[attempt%len(nodes)]
		code, res, b, err := c.push(n, 10*time.Second, items)
		switch {
		case err == nil && code == http.StatusCreated:
			for _, r := range res {
				if r.Status != "queued" && r.Status != "duplicate" {
					c.t.Fatalf("push via %s: item %d (%s) answered %q: %s", n.id, r.Index, r.TransactionID, r.Status, b)
				}
			}
			if len(res) != len(items) {
				c.t.Fatalf("push via %s: %d results for %d items", n.id, len(res), len(items))
			}
			return res
		case err == nil && code < 500:
			c.t.Fatalf("push via %s: %d %s", n.id, code, b)
		}
		last = fmt.Sprintf("via %s: %d %v %s", n.id, code, err, b)
		if time.Now().After(deadline) {
			c.t.Fatalf("push of %d items not accepted within %v; last attempt %s", len(items), timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// latestSnapshot reads the newest raft snapshot's index in a node's data
// directory, 0 when there is none. Raft's file snapshot store keeps
// <term>-<index>-<ms>/meta.json in a "snapshots" directory of its own under
// the node's snapshots/.
func latestSnapshot(dir string) uint64 {
	var metas []string
	filepath.WalkDir(filepath.Join(dir, "snapshots"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "meta.json" {
			metas = append(metas, p)
		}
		return nil
	})
	var best uint64
	for _, m := range metas {
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		var meta struct{ Index uint64 }
		if json.Unmarshal(b, &meta) == nil && meta.Index > best {
			best = meta.Index
		}
	}
	return best
}

// writeSecret writes a cluster secret file (with the trailing newline an
// editor leaves) and returns its path.
func writeSecret(t testing.TB, secret string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cluster-secret")
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
