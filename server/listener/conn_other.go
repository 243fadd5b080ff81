//go:build !unix

package listener

import "net"

// PeerClosed cannot tell on this platform: a parked long-poll then ends at
// its deadline even if the client left.
func PeerClosed(net.Conn) bool { return false }
