package server

import (
	"context"
	"errors"

	"github.com/queenmq/queen/engine"
)

// Encryption at rest (docs/semantics.md §11). The edge seals a payload into Queen's
// envelope (package envelope) before the push is proposed and marks the item
// sealed; on the way out it opens only payloads so marked. envelope/doc.go
// describes the envelope, the sealed bit, and why the work happens here and
// not in the state machine.

// queueConfigs is the optional, cheap way to read one queue's configuration
// (engine.Engine.QueueConfig). A Broker without it is asked for the whole
// QueueInfo, which copies every partition and cursor row of the queue.
type queueConfigs interface {
	QueueConfig(name string) (engine.Config, bool)
}

// encrypted reports whether pushes to queue are sealed now: a key is
// configured and the queue exists with encryptionEnabled. The flag is read
// from this node's applied state at push time; a queue a push will create is
// not encrypted. A node whose state may trail (mayLag) confirms a queue it
// sees as plain with the queue's leader first: a configure answered on
// another node a moment ago may not have reached it, and a payload left
// unsealed then would be stored in plaintext in a queue its client was told
// is encrypted. A queue it sees as encrypted needs no confirming: sealing a
// payload the queue no longer asks to seal loses nothing (reads open it).
func (s *Server) encrypted(queue string) (bool, error) {
	if s.crypt == nil {
		return false, nil
	}
	on, err := s.encryptedHere(queue)
	if err != nil || on || !s.mayLag(queue) {
		return on, err
	}
	if err := s.confirmConfig(queue); err != nil {
		return false, err
	}
	return s.encryptedHere(queue)
}

// checkedQueueConfigs is queueConfigs that can fail: a broker that reads
// some queues from another node (cluster.Host, for a group it does not host)
// says so rather than answering "not found", which would leave a payload
// unsealed.
type checkedQueueConfigs interface {
	CheckedQueueConfig(name string) (engine.Config, bool, error)
}

// encryptedHere is encrypted as this node's applied state has it (or, for
// a group this node does not host, as the group's leader has it).
func (s *Server) encryptedHere(queue string) (bool, error) {
	if qc, ok := s.broker.(checkedQueueConfigs); ok {
		cfg, found, err := qc.CheckedQueueConfig(queue)
		return found && cfg.Bool(engine.OptEncryptionEnabled), err
	}
	if qc, ok := s.broker.(queueConfigs); ok {
		cfg, found := qc.QueueConfig(queue)
		return found && cfg.Bool(engine.OptEncryptionEnabled), nil
	}
	info, err := s.broker.Queue(queue)
	switch {
	case err == nil:
		return info.Config.Bool(engine.OptEncryptionEnabled), nil
	case errors.Is(err, engine.ErrQueueNotFound):
		return false, nil
	}
	return false, err
}

// mayLag reports whether this node's state of queue's configuration may
// trail a configure answered elsewhere: it holds replicas and does not lead
// the queue's group (a leader has applied every configure that was
// answered), or it does not know the queue's group yet.
func (s *Server) mayLag(queue string) bool {
	if s.reads == nil {
		return false
	}
	g := s.groups.holder(queue)
	return g == 0 || s.groups.status(g).Role != "leader"
}

// confirmConfig catches this node's replica of queue's group up with the
// group's leader (a read index, shared by concurrent pushes), or, when this
// node holds no replica of it, the directory's (which may trail too), then
// the queue's group as the directory places it then: not every replica,
// so that a group without a leader does not hold the pushes of a queue in
// another (as readBarrier for a read of one queue).
func (s *Server) confirmConfig(queue string) error {
	n := s.reads.Replica(s.groups.holder(queue))
	if n == nil {
		return s.queueBarrier(false, queue)
	}
	ctx, cancel := context.WithTimeout(s.ctx, readIndexTimeout)
	defer cancel()
	return s.reads.CatchUp(ctx, n)
}

// sealer seals the payloads of one request's push items, looking a queue's
// flag up once per run of items naming it.
type sealer struct {
	s      *Server
	queue  string
	on     bool
	looked bool
}

// item replaces the item's payload by its envelope, and marks the item
// sealed, if its queue is encrypted. Without a key it does nothing and looks
// nothing up. Nothing else sets PushItem.Sealed: an item decoded from a
// request never has it, whatever its payload looks like.
func (z *sealer) item(it *engine.PushItem) error {
	if z.s.crypt == nil {
		return nil
	}
	if !z.looked || it.Queue != z.queue {
		on, err := z.s.encrypted(it.Queue)
		if err != nil {
			return err
		}
		z.queue, z.on, z.looked = it.Queue, on, true
	}
	if z.on {
		it.Payload, it.Sealed = z.s.crypt.Seal(it.Payload), true
		z.s.m.payloadsSealed.Inc()
	}
	return nil
}
