//go:build unix

package listener

import "golang.org/x/sys/unix"

// DescriptorLimit is RLIMIT_NOFILE's soft limit, 0 when unknown.
func DescriptorLimit() uint64 {
	var r unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &r) != nil {
		return 0
	}
	return uint64(r.Cur)
}
