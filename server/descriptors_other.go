//go:build !unix

package server

// descriptorLimit cannot tell on this platform: defaultMaxConns then
// assumes a limit.
func descriptorLimit() uint64 { return 0 }
