package raft

import "github.com/queenmq/queen/raft/command"

// SetCommandVersion makes version the command version every command
// needs, for a test of the cluster-version gate (today every command is
// version 1); the returned func restores it.
func SetCommandVersion(version func(command.Stamped) uint8) (restore func()) {
	old := commandVersion
	commandVersion = version
	return func() { commandVersion = old }
}
