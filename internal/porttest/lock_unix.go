//go:build unix

package porttest

import (
	"os"
	"syscall"
)

// tryLock takes an exclusive flock on f without waiting.
func tryLock(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}
