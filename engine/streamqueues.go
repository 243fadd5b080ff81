package engine

import "github.com/queenmq/queen/engine/keyspace"

// StreamQueues returns the queues a streaming query reads or writes: they
// stay in group 1 with their streams (refuseStreams), so a balancer that
// moves queues between groups leaves them out before it freezes one.
func (e *Engine) StreamQueues() (map[string]bool, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	err := scanPrefix(e.db, keyspace.FamilyPrefix(keyspace.FamilyStreamQuery), func(_, v []byte) error {
		q, err := keyspace.DecodeStreamQuery(v)
		if err != nil {
			return err
		}
		out[q.SourceQueue] = true
		if q.HasSink {
			out[q.SinkQueue] = true
		}
		return nil
	})
	return out, err
}
