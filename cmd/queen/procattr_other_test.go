//go:build !linux

package main

import "os/exec"

// setDeathSignal: only Linux can tie a child's life to its parent; elsewhere
// the tests' cleanups kill the nodes.
func setDeathSignal(*exec.Cmd) {}
