package main

// Process-level test of the memory bound: a `queen serve` with a cap on the
// bytes of request bodies held at once, flooded with large bodies, its
// resident memory read from /proc.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// procStatus reads a kB field of /proc/PID/status (VmRSS, VmHWM) in bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, sc.Text())
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

func (n *qnode) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd.Process.Pid
}

// TestServe_LargeBodiesMemoryBounded is the flood of issue 11 against a
// node whose bodies in flight are capped at 128 MiB: 16 concurrent 60 MiB
// bodies that are not JSON. Each is charged the whole cap (4 × 60 MiB is
// more than it: inflight.go), so they are read one at a time; those read
// are answered 400 invalid_json, the others 503 overloaded with Retry-After
// (every client reads an answer: none sees a reset). The process's peak
// resident memory (VmHWM) stays under its resident memory before the burst
// plus the cap plus 64 MiB, and its resident memory falls back to within
// 48 MiB of where it was.
//
// The 64 MiB allowance: bodies held or not yet collected never pass the cap
// (a large body stays charged until a collection after it), so what is left
// is per-connection buffers (16 × ~20 KiB), the JSON error path, goroutine
// stacks and the runtime's slack between collections for everything else,
// a few MiB in all; 64 MiB leaves room for a busy machine without letting a
// third 60 MiB body through unnoticed. Before the cap, the same flood took
// this process to 1.9 GB and it stayed there.
func TestServe_LargeBodiesMemoryBounded(t *testing.T) {
	t.Parallel()
	const (
		capBytes  = 128 << 20
		bodyBytes = 60 << 20
		clients   = 16
		allowance = 64 << 20
		settled   = 48 << 20
	)
	c := newCluster(t)
	c.useShipped() // the memory bound is the shipped binary's (a race build takes several times the memory)
	port := freePorts(t, 1)[0]
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	n := c.addNode("n1", addr, nil, "--http", addr, "--retention-interval", "0",
		"--max-inflight-body-bytes", strconv.Itoa(capBytes))
	n.start()
	c.waitLeader([]*qnode{n}, 30*time.Second)
	for i := range 20 {
		c.mustPush([]*qnode{n}, 10*time.Second, []pushItem{{Queue: "warm", TransactionID: fmt.Sprint("w", i), Payload: i}})
	}
	time.Sleep(500 * time.Millisecond)
	pid := n.pid()
	before := procStatus(t, pid, "VmRSS")

	body := bytes.Repeat([]byte("x"), bodyBytes)
	body[0] = '{'
	type answer struct {
		status     int
		code       string
		retryAfter string
		err        error
	}
	answers := make([]answer, clients)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr, Timeout: 60 * time.Second}
			resp, err := hc.Post(n.url("/api/v1/push"), "application/json", bytes.NewReader(body))
			if err != nil {
				answers[i].err = err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			e, _ := c2(b)
			answers[i] = answer{status: resp.StatusCode, code: e.Code, retryAfter: resp.Header.Get("Retry-After"), err: err}
		})
	}
	wg.Wait()
	burst := time.Since(start)
	peak := procStatus(t, pid, "VmHWM")

	var invalid, overloaded int
	for i, a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("client %d: %v", i, a.err)
		case a.status == 400 && a.code == "invalid_json":
			invalid++
		case a.status == 503 && a.code == "overloaded" && a.retryAfter != "":
			overloaded++
		default:
			t.Errorf("client %d: %d %q (Retry-After %q), want 400 invalid_json or 503 overloaded with Retry-After", i, a.status, a.code, a.retryAfter)
		}
	}
	t.Logf("%d × %d MiB in %v: %d answered 400 invalid_json, %d 503 overloaded; resident memory before %d MiB, peak %d MiB",
		clients, bodyBytes>>20, burst.Round(time.Millisecond), invalid, overloaded, before>>20, peak>>20)
	if invalid == 0 || overloaded == 0 {
		t.Errorf("want both answers under a cap that holds one body: %d invalid_json, %d overloaded", invalid, overloaded)
	}
	if limit := before + capBytes + allowance; peak > limit {
		t.Errorf("peak resident memory %d MiB, over the %d MiB before + %d MiB cap + %d MiB", peak>>20, before>>20, capBytes>>20, allowance>>20)
	}
	waitFor(t, 30*time.Second, "resident memory to fall back after the burst", func() (bool, string) {
		rss := procStatus(t, pid, "VmRSS")
		return rss < before+settled, fmt.Sprintf("VmRSS %d MiB, want under %d MiB", rss>>20, (before+settled)>>20)
	})
	t.Logf("resident memory %d MiB %v after the burst", procStatus(t, pid, "VmRSS")>>20, time.Since(start.Add(burst)).Round(time.Millisecond))
}

// TestServe_LargePushesMemoryBounded floods a node capped at 128 MiB with
// valid pushes: 6 clients at once, each with a 16 MiB push of 1 KiB items,
// retrying on 503 overloaded. A push costs far more than its body once
// decoded (frames, the Raft entry, Pebble's batches, an answer per item),
// and the cap charges that cost (4 × the body plus 1 KiB an item: 80 MiB
// here), so one push runs at a time instead of all six. Every push is
// queued in the end, and the peak resident memory stays under what it was
// before plus twice the cap (the heap may grow to twice what is live
// before a collection) plus 64 MiB. Charged by length, the six ran at once
// and took the process to 476 MiB (170 MiB charged by cost).
func TestServe_LargePushesMemoryBounded(t *testing.T) {
	t.Parallel()
	const (
		capBytes  = 128 << 20
		bodyBytes = 16 << 20
		clients   = 6
		allowance = 64 << 20
	)
	c := newCluster(t)
	c.useShipped() // the memory bound is the shipped binary's (a race build takes several times the memory)
	port := freePorts(t, 1)[0]
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	n := c.addNode("n1", addr, nil, "--http", addr, "--retention-interval", "0",
		"--max-inflight-body-bytes", strconv.Itoa(capBytes))
	n.start()
	c.waitLeader([]*qnode{n}, 30*time.Second)
	c.mustPush([]*qnode{n}, 10*time.Second, []pushItem{{Queue: "warm", TransactionID: "w", Payload: 1}})
	time.Sleep(500 * time.Millisecond)
	pid := n.pid()
	before := procStatus(t, pid, "VmRSS")

	item := `{"queue":"flood","payload":"` + strings.Repeat("x", 1000) + `"}`
	body := []byte(`{"items":[` + strings.TrimSuffix(strings.Repeat(item+",", bodyBytes/(len(item)+1)), ",") + `]}`)
	queued := make([]bool, clients)
	refused := make([]int, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr, Timeout: 60 * time.Second}
			for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
				resp, err := hc.Post(n.url("/api/v1/push"), "application/json", bytes.NewReader(body))
				if err != nil {
					t.Errorf("client %d: %v", i, err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 201:
					queued[i] = true
					return
				case 503:
					refused[i]++
					time.Sleep(100 * time.Millisecond)
				default:
					t.Errorf("client %d: %d %s", i, resp.StatusCode, b[:min(len(b), 200)])
					return
				}
			}
		})
	}
	wg.Wait()
	peak := procStatus(t, pid, "VmHWM")
	t.Logf("%d × %d MiB pushes of 1 KiB items, refused %v times before queued; resident memory before %d MiB, peak %d MiB",
		clients, bodyBytes>>20, refused, before>>20, peak>>20)
	for i, ok := range queued {
		if !ok {
			t.Errorf("client %d: push never queued", i)
		}
	}
	if limit := before + 2*capBytes + allowance; peak > limit {
		t.Errorf("peak resident memory %d MiB, over the %d MiB before + 2 × %d MiB cap + %d MiB", peak>>20, before>>20, capBytes>>20, allowance>>20)
	}
}
