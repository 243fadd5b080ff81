//go:build !unix

package server

import "net"

// peerClosed cannot tell on this platform: a parked long-poll then ends at
// its deadline even if the client left.
func peerClosed(net.Conn) bool { return false }
