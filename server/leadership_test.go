package server_test

import (
	"slices"
	"testing"
	"time"

	"github.com/queenmq/queen/raft/rafttest"
	"github.com/queenmq/queen/server"
)

const transferPath = "/api/v1/system/leadership/transfer"

// A follower transfers nothing (and does not forward the request); the
// leader hands its group over and another voter leads.
func TestServer_TransferLeadership(t *testing.T) {
	t.Parallel()
	cluster := rafttest.MakeCluster(t, 3)
	leader := cluster.Leader()
	follower := cluster.Followers()[0]
	var got struct {
		Transferred []uint32 `json:"transferred"`
	}

	newClientOptions(t, follower, server.Options{}).do("POST", transferPath, nil).expect(t, 200).decode(t, &got)
	if got.Transferred == nil || len(got.Transferred) != 0 {
		t.Fatalf("a follower answered transferred %v, want []", got.Transferred)
	}
	if role := leader.Status().Role; role != "leader" {
		t.Fatalf("after a follower's transfer the leader is %s, want still leader", role)
	}

	newClientOptions(t, leader, server.Options{}).do("POST", transferPath, nil).expect(t, 200).decode(t, &got)
	if !slices.Equal(got.Transferred, []uint32{1}) {
		t.Fatalf("the leader answered transferred %v, want [1]", got.Transferred)
	}
	deadline := time.Now().Add(10 * time.Second)
	for cluster.Leader() == leader {
		if time.Now().After(deadline) {
			t.Fatalf("the old leader still leads 10 s after the transfer")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A voter alone keeps its leadership (there is nobody to take it), and a
// broker without Raft has nobody to hand over to.
func TestServer_TransferLeadership_NothingToTransfer(t *testing.T) {
	t.Parallel()
	_, node, _ := newRaftNode(t)
	var got struct {
		Transferred []uint32 `json:"transferred"`
	}
	newClientOptions(t, node, server.Options{}).do("POST", transferPath, nil).expect(t, 200).decode(t, &got)
	if got.Transferred == nil || len(got.Transferred) != 0 {
		t.Fatalf("a single voter answered transferred %v, want []", got.Transferred)
	}
	if role := node.Status().Role; role != "leader" {
		t.Fatalf("a single voter is %s after the transfer, want leader", role)
	}
	newClient(t).do("POST", transferPath, nil).expect(t, 200).decode(t, &got)
	if got.Transferred == nil || len(got.Transferred) != 0 {
		t.Fatalf("a broker without Raft answered transferred %v, want []", got.Transferred)
	}
}
