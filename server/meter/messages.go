package meter

import (
	"github.com/VictoriaMetrics/metrics"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
)

// Messages count what the broker's answers say happened to messages:
// pushed, delivered and acked, and the failure path (docs/decisions.md B8).
// Each answer is counted once in the cluster, by the node that answers its
// client (ARCHITECTURE.md, "Counting once"): the caller decides which
// answers to count, these methods only add them up.
type Messages struct {
	PushQueued, PushDuplicate, PushFailed *metrics.Counter
	PopMessages, PopEmpty, PopRedelivered *metrics.Counter
	AckSuccess, AckFailed                 *metrics.Counter
	NackFailed, NackRetry, NackDLQ        *metrics.Counter
	RetryCharges                          *metrics.Counter
	DeadLettersAck, DeadLettersMaxDeliv   *metrics.Counter
	DeadLettersAdmin, Drops               *metrics.Counter
	Replays, DLQDeletes                   *metrics.Counter
	TxSuccess, TxFailed                   *metrics.Counter
}

// NewMessages registers the message counters in set.
func NewMessages(set *metrics.Set) *Messages {
	return &Messages{
		PushQueued:          set.GetOrCreateCounter(`queen_push_messages_total{status="queued"}`),
		PushDuplicate:       set.GetOrCreateCounter(`queen_push_messages_total{status="duplicate"}`),
		PushFailed:          set.GetOrCreateCounter(`queen_push_messages_total{status="failed"}`),
		PopMessages:         set.GetOrCreateCounter(`queen_pop_messages_total`),
		PopEmpty:            set.GetOrCreateCounter(`queen_pop_empty_total`),
		PopRedelivered:      set.GetOrCreateCounter(`queen_redeliveries_total`),
		AckSuccess:          set.GetOrCreateCounter(`queen_ack_messages_total{result="success"}`),
		AckFailed:           set.GetOrCreateCounter(`queen_ack_messages_total{result="failed"}`),
		NackFailed:          set.GetOrCreateCounter(`queen_nacks_total{status="failed"}`),
		NackRetry:           set.GetOrCreateCounter(`queen_nacks_total{status="retry"}`),
		NackDLQ:             set.GetOrCreateCounter(`queen_nacks_total{status="dlq"}`),
		RetryCharges:        set.GetOrCreateCounter(`queen_retry_budget_charges_total`),
		DeadLettersAck:      set.GetOrCreateCounter(`queen_dead_letters_total{reason="ack"}`),
		DeadLettersMaxDeliv: set.GetOrCreateCounter(`queen_dead_letters_total{reason="max_deliveries"}`),
		DeadLettersAdmin:    set.GetOrCreateCounter(`queen_dead_letters_total{reason="admin"}`),
		Drops:               set.GetOrCreateCounter(`queen_drops_total`),
		Replays:             set.GetOrCreateCounter(`queen_dlq_replays_total`),
		DLQDeletes:          set.GetOrCreateCounter(`queen_dlq_deletes_total`),
		TxSuccess:           set.GetOrCreateCounter(`queen_transactions_total{result="success"}`),
		TxFailed:            set.GetOrCreateCounter(`queen_transactions_total{result="failed"}`),
	}
}

// Pushed counts push results.
func (m *Messages) Pushed(res []engine.PushResult) {
	for i := range res {
		switch res[i].Status {
		case engine.Queued, engine.Pending: // pending: committed, stored by the outbox
			m.PushQueued.Inc()
		case engine.Duplicate:
			m.PushDuplicate.Inc()
		default:
			m.PushFailed.Inc()
		}
	}
}

// Popped counts a pop's deliveries; a message whose batch was delivered
// before (attempt > 1) is a redelivery.
func (m *Messages) Popped(res *engine.PopResult) {
	m.PopMessages.Add(len(res.Messages))
	if len(res.Messages) == 0 {
		m.PopEmpty.Inc()
	}
	for i := range res.Messages {
		if res.Messages[i].Attempt > 1 {
			m.PopRedelivered.Inc()
		}
	}
	m.DeadLettersMaxDeliv.Add(res.DeadLettered)
}

// Acked counts ack results. The retry budget is charged once per
// (partition, group) whose call carried an applied "failed" and ended in
// neither a dead-letter nor a drop (docs/semantics.md §6.3); the edge sees
// exactly that from the per-item flags.
func (m *Messages) Acked(items []engine.AckItem, res []engine.AckResult) {
	type key struct {
		part  engine.ID
		group string
	}
	var charged, terminal map[key]bool
	for i := range res {
		r, it := &res[i], &items[i]
		if r.Success {
			m.AckSuccess.Inc()
		} else {
			m.AckFailed.Inc()
		}
		if r.DLQ {
			m.DeadLettersAck.Inc()
		}
		if r.Dropped {
			m.Drops.Inc()
		}
		if !r.Success || r.Noop {
			continue
		}
		k := key{it.PartitionID, it.Group}
		switch it.Status {
		case cursor.Failed:
			m.NackFailed.Inc()
			if charged == nil {
				charged = map[key]bool{}
			}
			charged[k] = true
		case cursor.Retry:
			m.NackRetry.Inc()
		case cursor.DeadLetter:
			m.NackDLQ.Inc()
		}
		if r.DLQ || r.Dropped {
			if terminal == nil {
				terminal = map[key]bool{}
			}
			terminal[k] = true
		}
	}
	for k := range charged {
		if !terminal[k] {
			m.RetryCharges.Inc()
		}
	}
}
