package raft

import (
	"fmt"
	"io"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/raft/command"
)

// SetCommandVersion makes version the command version every command
// needs, for a test of the cluster-version gate (today every command is
// version 1); the returned func restores it.
func SetCommandVersion(version func(command.Stamped) uint8) (restore func()) {
	old := commandVersion
	commandVersion = version
	return func() { commandVersion = old }
}

// OpenLatestSnapshot opens n's newest snapshot as raft would to send it to
// a follower: its meta and its stream.
func (n *Node) OpenLatestSnapshot() (*hraft.SnapshotMeta, io.ReadCloser, error) {
	metas, err := n.disk.snaps.List()
	if err != nil || len(metas) == 0 {
		return nil, nil, fmt.Errorf("no snapshot: %v", err)
	}
	return n.disk.snaps.Open(metas[0].ID)
}
