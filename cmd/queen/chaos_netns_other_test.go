//go:build !linux

package main

import "testing"

// startNetnsChaos: network namespaces are Linux only.
func startNetnsChaos(t *testing.T, spare bool, extra ...string) (*cluster, partitioner, spawner, string) {
	return nil, nil, nil, "network namespaces are Linux only"
}
