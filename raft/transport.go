package raft

import hraft "github.com/hashicorp/raft"

// NewLocalTransport returns the transport of a node that replicates to no
// one: a single voter needs no network, and this keeps it on the same code
// path as a cluster.
func NewLocalTransport(id string) hraft.Transport {
	_, t := hraft.NewInmemTransport(hraft.ServerAddress(id))
	return t
}
