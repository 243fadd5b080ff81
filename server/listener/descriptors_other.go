//go:build !unix

package listener

// DescriptorLimit cannot tell on this platform: DefaultMaxConns then
// assumes a limit.
func DescriptorLimit() uint64 { return 0 }
