package command

import "github.com/queenmq/queen/engine"

// The replication layer's own commands: values it keeps in the replicated
// state (engine.Batch.SetClusterValue), which every node reads locally.

// Announce publishes a node's HTTP address: a leader's, so followers can
// forward to it, and every node's, so the others can read its version
// (raft/version.go). A leader proposes its own; a follower relays its own
// to the leader (its row relays, answering nothing).
type Announce struct {
	NodeID string
	HTTP   string
}

// Apply stores the address. Value: struct{}.
func (c Announce) Apply(b *engine.Batch, _ engine.Stamp) engine.Result {
	b.SetClusterValue(HTTPKey(c.NodeID), c.HTTP)
	return engine.Result{Value: struct{}{}}
}

// Maintenance switches push (Pop false) or pop (Pop true) maintenance for
// the whole cluster.
type Maintenance struct {
	Pop     bool
	Enabled bool
}

// Apply flips the switch. Value: struct{}. Turning one off wakes every
// parked pop.
func (c Maintenance) Apply(b *engine.Batch, _ engine.Stamp) engine.Result {
	v := ""
	if c.Enabled {
		v = "on"
	}
	b.SetClusterValue(MaintenanceKey(c.Pop), v)
	return engine.Result{Value: struct{}{}, WakeAll: !c.Enabled}
}

// HTTPKey is the cluster value holding a node's HTTP address.
func HTTPKey(nodeID string) string { return "http/" + nodeID }

// MaintenanceKey is the cluster value of a maintenance switch ("on" or
// unset).
func MaintenanceKey(pop bool) string {
	if pop {
		return "maintenance/pop"
	}
	return "maintenance/push"
}
