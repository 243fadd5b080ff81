package memory

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Bounds of the default budget (DefaultBudget).
const (
	// inflightShare: the default cap is this fraction of memory (1/4). The
	// cap counts what requests cost once decoded (bodyCost, pushItemCost),
	// and the garbage collector lets the heap reach about twice what is
	// live before it collects, so requests at the cap take about half of
	// memory at the worst moment, which leaves the rest to Pebble's caches
	// and memtables and the in-memory model. (It was 1/8 when the cap
	// counted raw body bytes, which cost 6–10 times as much once decoded.)
	inflightShare = 4
	// inflightCeiling: more requests in flight than this buy no throughput
	// (a node commits a few hundred MB of pushes a second at most), only
	// memory and queueing.
	inflightCeiling = 1 << 30
)

// DefaultBudget is the server's default MaxInflightBodyBytes for a process
// that may use mem bytes (0: unknown) and accepts bodies of up to maxBody
// bytes: mem/4, at least two of the largest bodies accepted (the server's
// Options.Validate wants one; a request that costs more than the cap runs
// alone: Budget.Charge) and at most 1 GiB (or that floor, if larger).
func DefaultBudget(mem int64, maxBody int) int64 {
	floor := 2 * int64(maxBody)
	return max(floor, min(mem/inflightShare, inflightCeiling))
}

// Available returns the bytes of memory this process may use: the
// smallest of its cgroup's memory limit and physical memory; 0 when
// neither is known.
func Available() int64 {
	phys := physicalMemory()
	if limit := cgroupMemoryLimit("/"); limit > 0 && (phys == 0 || limit < phys) {
		return limit
	}
	return phys
}

// cgroupMemoryLimit reads the memory limit of this process's cgroup under
// root ("/" but in tests): cgroup v2's memory.max, or v1's
// memory.limit_in_bytes, the smallest along the path from the process's
// group up to the hierarchy's root (a parent's limit binds its children).
// It returns 0 when there is none.
func cgroupMemoryLimit(root string) int64 {
	b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0
	}
	var limit int64
	for _, line := range strings.Split(string(b), "\n") {
		// v2: "0::/path"; v1: "4:memory:/path" (controllers may be joined
		// by commas).
		fields := strings.SplitN(line, ":", 3)
		if len(fields) != 3 {
			continue
		}
		var dir, file string
		switch {
		case fields[0] == "0" && fields[1] == "":
			dir, file = filepath.Join(root, "sys/fs/cgroup"), "memory.max"
		case slices.Contains(strings.Split(fields[1], ","), "memory"):
			dir, file = filepath.Join(root, "sys/fs/cgroup/memory"), "memory.limit_in_bytes"
		default:
			continue
		}
		for p := path.Clean("/" + fields[2]); ; p = path.Dir(p) {
			if v := readLimit(filepath.Join(dir, p, file)); v > 0 && (limit == 0 || v < limit) {
				limit = v
			}
			if p == "/" {
				break
			}
		}
	}
	return limit
}

// readLimit reads one cgroup limit file: 0 for "max", v1's "unlimited"
// (a value near 2^63) or a file that is not there.
func readLimit(name string) int64 {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 || v >= 1<<60 {
		return 0
	}
	return v
}
