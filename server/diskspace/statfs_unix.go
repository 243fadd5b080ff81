//go:build unix

package diskspace

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// statfs is the default Options.Statfs.
func statfs(dir string) (Space, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return Space{}, fmt.Errorf("diskspace: stat %s: %w", dir, err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return Space{}, fmt.Errorf("diskspace: statfs %s: %w", dir, err)
	}
	return Space{Filesystem: uint64(st.Dev), Free: uint64(fs.Bavail) * uint64(fs.Bsize)}, nil
}
