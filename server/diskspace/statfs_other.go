//go:build !unix

package diskspace

import "errors"

// statfs is the default Options.Statfs: without statfs(2) the free space is
// unknown, so nothing is refused.
func statfs(string) (Space, error) {
	return Space{}, errors.New("diskspace: free space is not known on this platform")
}
