package engine

import (
	"slices"
	"strings"

	"github.com/queenmq/queen/engine/keyspace"
)

// The replication layer keeps a few values of its own in the replicated
// state (the leader's HTTP address, for forwarding). The engine stores them
// under meta keys "cluster/<name>" without interpreting them.

// setClusterValue stores a replication-layer value.
func (b *Batch) setClusterValue(name, value string) {
	b.e.cluster[name] = value
	b.set(keyspace.Meta(clusterPrefix+name), []byte(value))
}

// ClusterValue returns a replication-layer value ("" when unset).
func (e *Engine) ClusterValue(name string) string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.cluster[name]
}

const clusterPrefix = "cluster/"

func (e *Engine) loadCluster() error {
	e.cluster = map[string]string{}
	prefix := keyspace.Meta(clusterPrefix)
	return scanPrefix(e.db, prefix, func(k, v []byte) error {
		e.cluster[string(k[len(prefix):])] = string(v)
		return nil
	})
}

// ClusterNames lists the names of the replication-layer values that begin
// with prefix and are set, in name order (the directory's moves under way).
func (e *Engine) ClusterNames(prefix string) []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	var names []string
	for k, v := range e.cluster {
		if v != "" && strings.HasPrefix(k, prefix) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}
