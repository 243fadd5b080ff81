//go:build !unix

package raft

import "errors"

// diskSpace returns spaceOps that do nothing where statfs and block counts
// are not at hand: the free space is unknown, and no wait happens.
func diskSpace() spaceOps {
	return spaceOps{
		free:    func(string) (uint64, error) { return 0, errors.New("raft: free space unknown on this platform") },
		release: func(string) (int64, error) { return 0, nil },
	}
}
