package memory

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDefaultBudget(t *testing.T) {
	const MiB, GiB = 1 << 20, 1 << 30
	for _, c := range []struct {
		name    string
		mem     int64
		maxBody int
		want    int64
	}{
		{"memory unknown: the floor", 0, 64 * MiB, 128 * MiB},
		{"small container: the floor", 512 * MiB, 64 * MiB, 128 * MiB},
		{"a quarter", 2 * GiB, 64 * MiB, 512 * MiB},
		{"large host: the ceiling", 24 * GiB, 64 * MiB, 1 * GiB},
		{"a floor above the ceiling wins", 64 * GiB, 1 * GiB, 2 * GiB},
	} {
		if got := DefaultBudget(c.mem, c.maxBody); got != c.want {
			t.Errorf("%s: DefaultBudget(%d, %d) = %d, want %d", c.name, c.mem, c.maxBody, got, c.want)
		}
	}
}

// fakeRoot lays out files (path -> contents) under a temporary root.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCgroupMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"no cgroup file", map[string]string{}, 0},
		{"v2, the parent's limit binds", map[string]string{
			"proc/self/cgroup":               "0::/a/b\n",
			"sys/fs/cgroup/a/b/memory.max":   "max\n",
			"sys/fs/cgroup/a/memory.max":     "536870912\n",
			"sys/fs/cgroup/memory.max":       "max\n",
			"sys/fs/cgroup/a/b/memory.other": "1\n",
		}, 512 << 20},
		{"v2, the smallest along the path", map[string]string{
			"proc/self/cgroup":             "0::/a/b\n",
			"sys/fs/cgroup/a/b/memory.max": "268435456\n",
			"sys/fs/cgroup/a/memory.max":   "536870912\n",
		}, 256 << 20},
		{"v2 in a cgroup namespace, unlimited", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n",
		}, 0},
		{"v1, unlimited leaf and a limited root", map[string]string{
			"proc/self/cgroup": "5:cpu,cpuacct:/x\n4:memory:/x\n0::/\n",
			"sys/fs/cgroup/memory/x/memory.limit_in_bytes": "9223372036854771712\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":   "1073741824\n",
		}, 1 << 30},
		{"v1, the group's directory not mounted here", map[string]string{
			"proc/self/cgroup":                           "4:memory:/process_api/abc\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "2147483648\n",
		}, 2 << 30},
	} {
		if got := cgroupMemoryLimit(fakeRoot(t, c.files)); got != c.want {
			t.Errorf("%s: cgroupMemoryLimit = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestAvailable_AtMostPhysical(t *testing.T) {
	got, phys := Available(), physicalMemory()
	if phys > 0 && (got <= 0 || got > phys) {
		t.Fatalf("availableMemory = %d with %d bytes of RAM", got, phys)
	}
}
