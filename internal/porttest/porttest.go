// Package porttest reserves loopback TCP ports for tests that run in
// parallel and start servers (processes or in-process nodes) on ports they
// pick themselves and restart on the same ports. Import it only from
// _test.go files and test helper packages.
//
// listen(127.0.0.1:0) then close, the usual way to pick a port, is not
// enough for those tests: the closed port is free for the next listen(:0)
// of any test, and it lies in the kernel's ephemeral range, which every
// outgoing connection's source port is drawn from, so a node's port may be
// taken between its stop and its restart. Reserve instead:
//
//   - ports come from below the ephemeral range
//     (net.ipv4.ip_local_port_range), where the kernel never picks a
//     port by itself;
//   - a port is a process's while it holds an exclusive flock(2) on
//     <tmp>/queen-test-ports/<port> (the kernel drops the lock when the
//     process dies, so a crashed run leaks nothing), so test binaries run
//     side by side never share one;
//   - a port something else listens on (without the lock) is skipped.
package porttest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	mu    sync.Mutex
	next  int
	held  = map[int]*os.File{} // port -> its lock file, locked
	span  = sync.OnceValues(portSpan)
	locks = filepath.Join(os.TempDir(), "queen-test-ports")
)

// Ports reserves n distinct ports on 127.0.0.1 for the rest of t (its
// cleanup releases them).
func Ports(t testing.TB, n int) []int {
	t.Helper()
	ports, err := reserve(n)
	if err != nil {
		t.Fatalf("reserve %d ports: %v", n, err)
	}
	t.Cleanup(func() { release(ports) })
	return ports
}

// Addrs is Ports as "127.0.0.1:port" addresses.
func Addrs(t testing.TB, n int) []string {
	t.Helper()
	var addrs []string
	for _, p := range Ports(t, n) {
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", p))
	}
	return addrs
}

// portSpan is the range ports come from: the 10 000 ports below the
// ephemeral range's first (32768 unless configured).
func portSpan() (int, int) {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 12000 {
				low = v
			}
		}
	}
	return low - 10000, low
}

func reserve(n int) ([]int, error) {
	mu.Lock()
	defer mu.Unlock()
	lo, hi := span()
	if next == 0 {
		// A random start, so processes side by side rarely probe the same
		// ports (the lock decides when they do).
		next = lo + int(time.Now().UnixNano()%int64(hi-lo))
	}
	if err := os.MkdirAll(locks, 0o777); err != nil {
		return nil, err
	}
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > hi-lo {
			releaseLocked(ports)
			return nil, fmt.Errorf("no free port in [%d, %d)", lo, hi)
		}
		p := next
		if next++; next >= hi {
			next = lo
		}
		if _, ok := held[p]; ok {
			continue
		}
		f, err := os.OpenFile(filepath.Join(locks, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			releaseLocked(ports)
			return nil, err
		}
		if !tryLock(f) {
			f.Close() // another process's
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			f.Close() // in use by something that does not lock
			continue
		}
		l.Close()
		held[p] = f
		ports = append(ports, p)
	}
	return ports, nil
}

func release(ports []int) {
	mu.Lock()
	defer mu.Unlock()
	releaseLocked(ports)
}

func releaseLocked(ports []int) {
	for _, p := range ports {
		if f := held[p]; f != nil {
			f.Close() // drops the lock
			delete(held, p)
		}
	}
}
