//go:build !linux

package main

import "testing"

// startNetnsChaos: network namespaces are Linux only.
func startNetnsChaos(t *testing.T, extra ...string) (*cluster, partitioner, string) {
	return nil, nil, "network namespaces are Linux only"
}
