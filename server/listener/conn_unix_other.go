//go:build unix && !linux

package listener

// hungUp cannot tell on this platform when bytes are queued: a parked
// long-poll over TLS then ends at its deadline even if the client left.
func hungUp(uintptr) bool { return false }
