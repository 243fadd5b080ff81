//go:build !unix

package porttest

import "os"

// tryLock: no flock here; the listen check alone keeps ports apart.
func tryLock(*os.File) bool { return true }
