package main

import (
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// The connection flood of the issue against the real process: a node with
// 256 descriptors (prlimit) gets 300 idle connections from one client
// address. It holds the first --max-conns-per-ip of them (the default:
// half of half the descriptors) and closes the others at once, counting
// them; /health still answers another client, the node stays up, and it
// stops with status 0 on SIGTERM. Before, accept failed with EMFILE and the
// node exited, with status 0.
func TestServe_SurvivesConnectionFlood(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("needs prlimit (util-linux)")
	}
	const fds, flood = 256, 300
	const perIP = fds / 4
	c := newCluster(t)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	n := c.addNode("n1", httpAddr, []string{"prlimit", fmt.Sprintf("--nofile=%d:%d", fds, fds), "--"},
		"--http", httpAddr, "--retention-interval", "0")
	n.start()
	defer n.stop()
	waitFor(t, 30*time.Second, "the node serves", func() (bool, string) {
		h, err := c.health(n)
		return err == nil && h.Code == 200, fmt.Sprint(h, err)
	})

	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
	var held []net.Conn
	defer func() {
		for _, conn := range held {
			conn.Close()
		}
	}()
	for range flood {
		conn, err := d.Dial("tcp", httpAddr)
		if err == nil {
			held = append(held, conn)
		}
	}
	refused := regexp.MustCompile(`(?m)^queen_http_conns_refused_total\{reason="max_conns_per_ip"\} (\d+)$`)
	waitFor(t, 30*time.Second, "every connection past the cap refused and counted", func() (bool, string) {
		code, body, err := c.do(5*time.Second, "GET", n.url("/metrics/prometheus"), nil)
		if err != nil || code != 200 {
			return false, fmt.Sprint(code, err)
		}
		m := refused.FindSubmatch(body)
		if m == nil {
			return false, "no refusals counted"
		}
		got, _ := strconv.Atoi(string(m[1]))
		return got == flood-perIP, fmt.Sprintf("refused %d, want %d", got, flood-perIP)
	})
	if h, err := c.health(n); err != nil || h.Code != 200 {
		t.Fatalf("/health during the flood: %v, %v; want 200", h, err)
	}
	if !n.running() {
		t.Fatalf("the node exited during the flood:\n%s", n.logTail(2000))
	}
}
