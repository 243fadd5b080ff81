package main

// Process-level tests of a full disk: `queen serve` with its data directory
// on a tmpfs of its own (mount(2), so root), filled by pushes or by a
// ballast file standing in for whatever else fills a disk.

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// diskSize is each node's tmpfs. It is larger than a few tens of MiB
	// because Pebble preallocates every WAL file to 110% of a memtable
	// (35 MiB for the engine's) and, after each start, holds up to eight
	// of them before its first flush: the disk must hold that, the reserve
	// and some data.
	diskSize = 768 << 20
	// diskReserve is the nodes' --min-free-bytes: what a node keeps for
	// the WAL ramp after a restart, flushes and compactions while it
	// refuses data (diskspace.DefaultMinFreeBytes explains the sum).
	diskReserve = 420 << 20
)

// onTmpfs mounts a tmpfs of size bytes on n's data directory (n must not
// be running) and, at cleanup, kills n and unmounts it. It skips the test
// where mounting is not permitted.
func onTmpfs(t *testing.T, n *qnode, size int64) {
	t.Helper()
	if err := unix.Mount("tmpfs", n.dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			t.Skipf("cannot mount a tmpfs on %s (%v): the full-disk tests need root or CAP_SYS_ADMIN", n.dir, err)
		}
		t.Fatalf("mount tmpfs on %s: %v", n.dir, err)
	}
	t.Cleanup(func() {
		n.kill()
		for i := 0; ; i++ {
			err := unix.Unmount(n.dir, 0)
			if err == nil {
				return
			}
			if i == 50 {
				t.Errorf("unmount %s: %v; detaching it", n.dir, err)
				unix.Unmount(n.dir, unix.MNT_DETACH)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// freeOn returns the bytes available on the filesystem holding dir.
func freeOn(t testing.TB, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatalf("statfs %s: %v", dir, err)
	}
	return int64(st.Bavail) * st.Bsize
}

// ballast allocates a file in dir that leaves about leave bytes free (none
// when the disk holds less), and returns its path (remove it to give the
// space back). It allocates in steps, so a node writing meanwhile, or a
// filesystem that cannot hand out its very last block, still gets filled.
func ballast(t testing.TB, dir string, leave int64) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("ballast-%d", time.Now().UnixNano()))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const step = 4 << 20
	var size int64
	for {
		want := freeOn(t, dir) - leave
		if want <= 0 {
			return path
		}
		n := min(want, step)
		err := unix.Fallocate(int(f.Fd()), 0, size, n)
		for errors.Is(err, unix.ENOSPC) && n > 4096 {
			n /= 2
			err = unix.Fallocate(int(f.Fd()), 0, size, n)
		}
		switch {
		case errors.Is(err, unix.ENOSPC):
			return path // full to the last block
		case err != nil:
			t.Fatalf("fallocate %d bytes in %s: %v", n, dir, err)
		}
		size += n
	}
}

// diskNode adds a node whose data directory is a tmpfs of diskSize,
// guarded by diskReserve, with Raft log truncation and retention frequent
// enough that acks give space back within seconds.
func diskNode(t *testing.T, c *cluster, id, httpAddr string, extra ...string) *qnode {
	args := append([]string{"--http", httpAddr, "--min-free-bytes", fmt.Sprint(diskReserve), "--retention-interval", "500ms",
		"--snapshot-threshold", "64", "--trailing-logs", "64", "--snapshot-interval", "500ms"}, extra...)
	n := c.addNode(id, httpAddr, nil, args...)
	onTmpfs(t, n, diskSize)
	return n
}

// storageHealth is /health's "storage".
type storageHealth struct {
	OK     bool   `json:"ok"`
	Reason string `json:"reason"`
}

func (c *cluster) storage(n *qnode) (storageHealth, error) {
	code, b, err := c.do(2*time.Second, "GET", n.url("/health"), nil)
	if err != nil {
		return storageHealth{}, err
	}
	var h struct{ Storage storageHealth }
	if err := json.Unmarshal(b, &h); err != nil || code != http.StatusOK {
		return storageHealth{}, fmt.Errorf("health %d %v: %s", code, err, b)
	}
	return h.Storage, nil
}

// pushBatch pushes count items of about 8 KiB of random (incompressible)
// text, transaction ids prefix-0..., and returns the status, the
// Retry-After header and the body; on 201 it adds the items answered
// queued to queued.
func (c *cluster) pushBatch(n *qnode, queue, prefix string, count int, queued map[string]bool) (int, string, []byte) {
	c.t.Helper()
	items := make([]pushItem, count)
	for i := range items {
		b := make([]byte, 6<<10)
		rand.Read(b)
		items[i] = pushItem{Queue: queue, TransactionID: fmt.Sprintf("%s-%d", prefix, i), Payload: base64.StdEncoding.EncodeToString(b)}
	}
	body, _ := json.Marshal(map[string]any{"items": items})
	req, _ := http.NewRequest("POST", n.url("/api/v1/push"), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, "", []byte(err.Error())
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	if resp.StatusCode == http.StatusCreated {
		var res []pushResult
		if err := json.Unmarshal(buf.Bytes(), &res); err != nil {
			c.t.Fatalf("push reply: %v: %s", err, buf.Bytes())
		}
		for _, r := range res {
			if r.Status == "queued" {
				queued[r.TransactionID] = true
			}
		}
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), buf.Bytes()
}

// expect507 checks a refusal: 507, Retry-After, docs/decisions.md C2 body with the code
// insufficient_storage and a message naming the node and the shortage.
func expect507(t testing.TB, code int, retryAfter string, body []byte, node string) {
	t.Helper()
	e, ok := c2(body)
	if code != http.StatusInsufficientStorage || retryAfter == "" || !ok || e.Code != "insufficient_storage" ||
		!strings.HasPrefix(e.Error, "node "+node+": free space below reserve on ") {
		t.Fatalf("got %d Retry-After %q %s, want 507 with Retry-After and insufficient_storage naming node %s", code, retryAfter, body, node)
	}
}

// fillUntilRefused pushes through n until the disk stays full: 507 for
// every push over a second. Pebble's WAL files come and go, so one 507
// can be followed by room again; filling goes on until it is not.
func (c *cluster) fillUntilRefused(n *qnode, queue string, queued map[string]bool, refusedBy string) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var since time.Time
	for batch := 0; ; batch++ {
		code, retry, body := c.pushBatch(n, queue, fmt.Sprintf("fill%d", batch), 20, queued)
		switch code {
		case http.StatusCreated:
			since = time.Time{}
		case http.StatusInsufficientStorage:
			expect507(c.t, code, retry, body, refusedBy)
			if since.IsZero() {
				since = time.Now()
			} else if time.Since(since) > time.Second {
				return
			}
			time.Sleep(100 * time.Millisecond)
		default:
			c.t.Fatalf("push %d via %s: %d %s", batch, n.id, code, body)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the disk did not fill within 60 s (%d messages queued)", len(queued))
		}
	}
}

// drain pops everything from queue through n, acking each batch, and
// returns the transaction ids delivered.
func (c *cluster) drain(n *qnode, queue string) []string {
	c.t.Helper()
	var got []string
	deadline := time.Now().Add(60 * time.Second)
	for empty := 0; empty < 2; {
		if time.Now().After(deadline) {
			c.t.Fatalf("draining %s: still popping after 60 s (%d delivered)", queue, len(got))
		}
		code, b, err := c.do(10*time.Second, "GET", n.url("/api/v1/pop/queue/"+queue+"?batch=200"), nil)
		if err != nil || code >= 500 {
			c.t.Logf("pop via %s: %d %v %s", n.id, code, err, b)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if code == http.StatusNoContent {
			empty++
			continue
		}
		var pr popResponse
		if code != http.StatusOK || json.Unmarshal(b, &pr) != nil {
			c.t.Fatalf("pop via %s: %d %s", n.id, code, b)
		}
		acks := make([]ackItem, len(pr.Messages))
		for i, m := range pr.Messages {
			got = append(got, m.TransactionID)
			acks[i] = ackItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: "completed"}
		}
		body, _ := json.Marshal(map[string]any{"acknowledgments": acks})
		code, b, err = c.do(10*time.Second, "POST", n.url("/api/v1/ack/batch"), body)
		var res []ackResult
		if err != nil || code != http.StatusOK || json.Unmarshal(b, &res) != nil || len(res) != len(acks) {
			c.t.Fatalf("ack via %s below the reserve: %d %v %s", n.id, code, err, b)
		}
		for _, r := range res {
			if !r.Success {
				c.t.Fatalf("ack of %s below the reserve failed: %s", r.TransactionID, b)
			}
		}
	}
	return got
}

// sameSet fails unless got holds exactly the keys of want, once each.
func sameSet(t testing.TB, what string, got []string, want map[string]bool) {
	t.Helper()
	seen := map[string]bool{}
	var extra, dup []string
	for _, id := range got {
		if seen[id] {
			dup = append(dup, id)
		}
		seen[id] = true
		if !want[id] {
			extra = append(extra, id)
		}
	}
	var lost []string
	for id := range want {
		if !seen[id] {
			lost = append(lost, id)
		}
	}
	slices.Sort(lost)
	if len(lost)+len(extra)+len(dup) > 0 {
		t.Fatalf("%s: %d lost %v, %d never queued %v, %d twice %v", what, len(lost), head(lost, 5), len(extra), head(extra, 5), len(dup), head(dup, 5))
	}
}

// lowWater samples the free space of dir every 20 ms until the test ends
// and returns a function that reports the lowest seen so far: how much of
// the reserve the node used while it refused data.
func lowWater(t *testing.T, dir string) func() int64 {
	var mu sync.Mutex
	low := freeOn(t, dir)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var st unix.Statfs_t
			if unix.Statfs(dir, &st) == nil {
				mu.Lock()
				low = min(low, int64(st.Bavail)*st.Bsize)
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return func() int64 {
		mu.Lock()
		defer mu.Unlock()
		return low
	}
}

func (c *cluster) mustConfigure(n *qnode, queue string) {
	c.t.Helper()
	body := fmt.Sprintf(`{"queue":%q,"options":{"retentionEnabled":true,"completedRetentionSeconds":1}}`, queue)
	waitFor(c.t, 30*time.Second, "configure "+queue, func() (bool, string) {
		code, b, err := c.do(5*time.Second, "POST", n.url("/api/v1/configure"), []byte(body))
		return err == nil && code == http.StatusOK, fmt.Sprintf("%d %v %s", code, err, b)
	})
}

// One node on a small disk: pushes until the disk is full are refused with
// 507 before Pebble meets ENOSPC; a restart on the full disk serves HTTP,
// reads and 507; pops and acks go on, and give the space back; pushes are
// accepted again without a restart, and every push answered queued is
// delivered exactly once.
func TestServe_DiskFull_RefusesDataKeepsConsumersRecovers(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.useShipped() // filling the disk is pushing hundreds of MB: 20 times as long through race-built nodes
	addr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	n := diskNode(t, c, "n1", addr)
	n.start()
	c.waitLeader([]*qnode{n}, 30*time.Second)
	c.mustConfigure(n, "q")
	low := lowWater(t, n.dir)

	queued := map[string]bool{}
	start := time.Now()
	c.fillUntilRefused(n, "q", queued, "n1")
	t.Logf("disk full after %d messages in %v; %d MiB free, lowest seen %d MiB (reserve %d MiB)",
		len(queued), time.Since(start).Round(time.Millisecond), freeOn(t, n.dir)>>20, low()>>20, diskReserve>>20)
	// /health says why pushes are refused. A flush or a log truncation can
	// give space back at any moment, and the node's own writes take it
	// again, so the two are read until they are seen together; a push
	// that is taken means the disk is filled again first.
	probe := 0
	waitFor(t, 60*time.Second, "/health to name the shortage while pushes are refused", func() (bool, string) {
		probe++
		code, retry, body := c.pushBatch(n, "q", fmt.Sprintf("probe%d", probe), 20, queued)
		if code == http.StatusCreated {
			c.fillUntilRefused(n, "q", queued, "n1")
			return false, "space came back; filled again"
		}
		expect507(t, code, retry, body, "n1")
		st, err := c.storage(n)
		return err == nil && !st.OK && strings.Contains(st.Reason, "free space below reserve on "+n.dir),
			fmt.Sprintf("push refused, health storage %+v %v, want not ok naming %s", st, err, n.dir)
	})
	if free := freeOn(t, n.dir); free < 64<<20 {
		t.Fatalf("only %d MiB free when the guard held: the reserve did not hold", free>>20)
	}

	// Restart on the full disk, after a crash. The ballast keeps the disk
	// below the reserve whatever the restart gives back (the WALs'
	// preallocation, raft/space.go).
	n.kill()
	ballast(t, n.dir, diskReserve/2)
	n.start()
	c.waitLeader([]*qnode{n}, 30*time.Second)
	if code, b, err := c.do(5*time.Second, "GET", n.url("/api/v1/resources/queues/q"), nil); err != nil || code != http.StatusOK {
		t.Fatalf("read after a restart on a full disk: %d %v %s", code, err, b)
	}
	code, retry, body := c.pushBatch(n, "q", "after-restart", 1, queued)
	expect507(t, code, retry, body, "n1")
	t.Logf("restarted on the full disk: %d MiB free", freeOn(t, n.dir)>>20)
	low = lowWater(t, n.dir)

	// Consumers go on below the reserve, and get everything.
	drained := time.Now()
	sameSet(t, "delivered after the disk filled", c.drain(n, "q"), queued)
	t.Logf("%d messages popped and acked below the reserve in %v", len(queued), time.Since(drained).Round(time.Millisecond))

	// Acked segments go at the next sweeps and the Raft log is truncated
	// after snapshots: pushes are taken again, with no restart.
	var recovered bool
	waitFor(t, 30*time.Second, "pushes to be accepted again", func() (bool, string) {
		code, _, body := c.pushBatch(n, "q", "again", 1, queued)
		recovered = code == http.StatusCreated
		return recovered, fmt.Sprintf("%d %s; %d MiB free", code, body, freeOn(t, n.dir)>>20)
	})
	if st, err := c.storage(n); err != nil || !st.OK {
		t.Fatalf("health storage after recovery %+v %v", st, err)
	}
	t.Logf("pushes accepted again %v after the drain began; lowest free space meanwhile %d MiB (reserve %d MiB)",
		time.Since(drained).Round(time.Millisecond), low()>>20, diskReserve>>20)
	sameSet(t, "the push after recovery", c.drain(n, "q"), map[string]bool{"again-0": true})
	if out := n.logTail(1 << 20); strings.Contains(out, "no space left on device") || strings.Contains(out, "panic") {
		t.Fatalf("the node met ENOSPC or panicked:\n%s", out)
	}
	n.stop()
}

// Issue 11's restart: a node killed with its disk at 0 bytes free starts
// again, serves HTTP and reads, answers 507 to writes, and delivers every
// message it had queued. Before raft/space.go it never opened HTTP:
// pebble.Open retried the flush of the replayed WALs on ENOSPC for ever.
func TestServe_DiskFull_RestartsOnAFullDisk(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.useShipped() // filling the disk is pushing hundreds of MB: 20 times as long through race-built nodes
	addr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	// Unguarded at first, so the disk can be filled to the last byte.
	n := diskNode(t, c, "n1", addr, "--min-free-bytes", "0")
	n.start()
	c.waitLeader([]*qnode{n}, 30*time.Second)
	c.mustConfigure(n, "q")
	queued := map[string]bool{}
	for i := range 20 {
		if code, _, b := c.pushBatch(n, "q", fmt.Sprintf("b%d", i), 20, queued); code != http.StatusCreated {
			t.Fatalf("push %d: %d %s", i, code, b)
		}
	}
	n.kill()
	ballast(t, n.dir, 0)
	if free := freeOn(t, n.dir); free > 1<<20 {
		t.Fatalf("%d bytes free after the ballast, want none", free)
	}

	n.args = append(n.args, "--min-free-bytes", fmt.Sprint(diskReserve))
	started := time.Now()
	n.start()
	c.waitLeader([]*qnode{n}, 30*time.Second)
	t.Logf("serving %v after a restart at 0 bytes free; %d MiB free now", time.Since(started).Round(time.Millisecond), freeOn(t, n.dir)>>20)
	if code, b, err := c.do(5*time.Second, "GET", n.url("/api/v1/resources/queues/q"), nil); err != nil || code != http.StatusOK {
		t.Fatalf("read: %d %v %s", code, err, b)
	}
	code, retry, body := c.pushBatch(n, "q", "refused", 1, queued)
	expect507(t, code, retry, body, "n1")
	sameSet(t, "delivered after the restart", c.drain(n, "q"), queued)
	if out := n.logTail(1 << 20); strings.Contains(out, "panic") {
		t.Fatalf("the node panicked:\n%s", out)
	}
	n.stop()
}

// Three nodes, each on a disk of its own. A follower below its reserve
// reports it to the leader, which refuses data for the whole cluster,
// naming the follower, while pops and acks go on through any node; when
// the follower's disk has room again the cluster takes data again. The
// same with two followers below the reserve. Nothing queued is lost, and
// the replicas end identical.
func TestCluster_DiskFull_FollowersBelowReserve(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.useShipped() // filling the disk is pushing hundreds of MB: 20 times as long through race-built nodes
	secret := writeSecret(t, "disk-full-test-secret-disk-full-test")
	ports := freePorts(t, 6)
	var peers []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("n%d@127.0.0.1:%d", i+1, ports[3+i]))
	}
	for i := range 3 {
		addr := fmt.Sprintf("127.0.0.1:%d", ports[i])
		diskNode(t, c, fmt.Sprintf("n%d", i+1), addr, "--raft", fmt.Sprintf("127.0.0.1:%d", ports[3+i]),
			"--peers", strings.Join(peers, ","), "--cluster-secret-file", secret, "--retention-interval", "0")
	}
	for _, n := range c.nodes {
		n.start()
	}
	leader := c.waitLeader(c.nodes, 30*time.Second)
	followers := c.others(leader)
	c.mustConfigure(leader, "q")
	queued := map[string]bool{}
	refusedVia := func(via *qnode, low ...*qnode) {
		t.Helper()
		code, retry, body := c.pushBatch(via, "q", "refused", 1, queued)
		e, _ := c2(body)
		for _, n := range low {
			if strings.HasPrefix(e.Error, "node "+n.id+":") {
				expect507(t, code, retry, body, n.id)
				return
			}
		}
		t.Fatalf("push via %s: %d %s, want 507 naming one of %s", via.id, code, body, ids(low))
	}

	for round, low := range [][]*qnode{followers[:1], followers} {
		for i := range 5 {
			if code, _, b := c.pushBatch(leader, "q", fmt.Sprintf("r%d-%d", round, i), 20, queued); code != http.StatusCreated {
				t.Fatalf("round %d push %d: %d %s", round, i, code, b)
			}
		}
		var ballasts []string
		filled := time.Now()
		for _, n := range low {
			ballasts = append(ballasts, ballast(t, n.dir, diskReserve-64<<20))
		}
		waitFor(t, 15*time.Second, "the leader to refuse data for "+ids(low), func() (bool, string) {
			code, _, body := c.pushBatch(leader, "q", fmt.Sprintf("probe%d", round), 1, queued)
			return code == http.StatusInsufficientStorage, fmt.Sprintf("%d %s", code, body)
		})
		refusing := time.Since(filled)
		for _, via := range c.nodes {
			refusedVia(via, low...)
		}
		if st, err := c.storage(leader); err != nil || st.OK || !strings.Contains(st.Reason, "free space below reserve") {
			t.Fatalf("leader's health storage %+v %v", st, err)
		}
		// Consumers go on through a node below its reserve.
		sameSet(t, fmt.Sprintf("round %d: delivered with %s below the reserve", round, ids(low)), c.drain(low[0], "q"), queued)
		clear(queued)

		freed := time.Now()
		for _, b := range ballasts {
			os.Remove(b)
		}
		waitFor(t, 15*time.Second, "the cluster to take data again", func() (bool, string) {
			code, _, body := c.pushBatch(followers[len(followers)-1], "q", fmt.Sprintf("back%d", round), 1, queued)
			return code == http.StatusCreated, fmt.Sprintf("%d %s", code, body)
		})
		t.Logf("%s below the reserve: the leader refused data after %v; took it again %v after space returned",
			ids(low), refusing.Round(time.Millisecond), time.Since(freed).Round(time.Millisecond))
	}
	sameSet(t, "delivered at the end", c.drain(leader, "q"), queued)
	for _, n := range c.nodes {
		if out := n.logTail(1 << 20); strings.Contains(out, "no space left on device") || strings.Contains(out, "panic") {
			t.Fatalf("%s met ENOSPC or panicked:\n%s", n.id, out)
		}
	}
	c.stopAndCompare(c.nodes, 30*time.Second)
}
