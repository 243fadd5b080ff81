//go:build unix

package server

import "golang.org/x/sys/unix"

// descriptorLimit is RLIMIT_NOFILE's soft limit, 0 when unknown.
func descriptorLimit() uint64 {
	var r unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &r) != nil {
		return 0
	}
	return uint64(r.Cur)
}
