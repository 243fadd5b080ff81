package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/backup"
)

// restoreQueue copies one queue of a backup into a running cluster under a
// new name, for the queue deleted by mistake (`queen restore --queue Q --as
// NAME --url URL`). It restores the backup's group that holds Q into a
// scratch store, then speaks the public API like any client:
//
//  1. configure NAME with Q's options (and a dedup window of at least a day
//     while it runs);
//  2. push Q's retained messages, partition by partition, oldest first,
//     with their partitions, transaction ids, trace ids and payloads;
//  3. bring each consumer group to where it was: its cursor on the new
//     partition is created at the beginning (a seek), then the messages at
//     or below its old cursor are acknowledged without a lease;
//  4. configure NAME's dedup window back to Q's.
//
// Everything it writes is an ordinary, replicated, acknowledged command
// (the disk guard and the memory budget apply), so nothing is half-applied
// that a rerun cannot finish: the pushes carry the original transaction
// ids, which the broker deduplicates, and acks of consumed messages are
// no-ops. An interrupted restore is finished by running it again with
// --resume. What it does not carry over: message ids and creation times
// (the broker mints new ones: a restored queue is a new queue), leases,
// pending retries, and dead-letter rows (it says how many it left behind).
// Payloads sealed with an encryption key are refused: restore the whole
// backup (queen restore --data) for those.
type restoreQueue struct {
	in, queue, as, base string
	resume              bool
	c                   *apiClient
	out                 io.Writer
}

// restoreDedupWindow is NAME's dedup window while a restore runs: a rerun
// within it finds the pushes of the interrupted run and skips them.
const restoreDedupWindow = 86400

// restorePushBatch bounds one push request of a restore, in messages and
// in payload bytes.
const (
	restorePushBatch = 500
	restorePushBytes = 4 << 20
)

func (r *restoreQueue) run() error {
	scratch, err := os.MkdirTemp("", "queen-restore-queue-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	e, q, err := r.open(scratch)
	if err != nil {
		return err
	}
	defer e.Close()
	total, dead, err := r.check(e, q)
	if err != nil {
		return err
	}
	if err := r.target(); err != nil {
		return err
	}
	window := q.Config.Get(engine.OptDedupWindowSeconds)
	if err := r.configure(q, max(window, restoreDedupWindow)); err != nil {
		return err
	}
	start := time.Now()
	pushed, dup, acked := 0, 0, 0
	for i := range q.Partitions {
		p := &q.Partitions[i]
		newID, n, d, err := r.pushPartition(e, p)
		if err != nil {
			return fmt.Errorf("%w\n%d of %d messages were pushed; run the same command with --resume to finish", err, pushed+dup+n+d, total)
		}
		pushed, dup = pushed+n, dup+d
		a, err := r.ackGroups(e, p, newID)
		if err != nil {
			return fmt.Errorf("%w\nall messages of partition %q were pushed; run the same command with --resume to finish", err, p.Name)
		}
		acked += a
	}
	if err := r.configure(q, window); err != nil {
		return err
	}
	fmt.Fprintf(r.out, "restored queue %s as %s in %.1fs: %d messages pushed (%d already there), %d acknowledged for consumer groups\n",
		r.queue, r.as, time.Since(start).Seconds(), pushed, dup, acked)
	if dead > 0 {
		fmt.Fprintf(r.out, "not restored: %d dead-letter rows of %s (queen dlq shows them in the backup's cluster; the messages themselves are restored)\n", dead, r.queue)
	}
	return nil
}

// open restores, into scratch, the backup's group that holds the queue.
func (r *restoreQueue) open(scratch string) (*engine.Engine, engine.QueueInfo, error) {
	f, err := os.Open(r.in)
	if err != nil {
		return nil, engine.QueueInfo{}, err
	}
	defer f.Close()
	br, err := backup.NewReader(f)
	if err != nil {
		return nil, engine.QueueInfo{}, fmt.Errorf("%s: %w", r.in, err)
	}
	defer br.Close()
	var names []string
	for {
		g, stream, err := br.Next()
		if errors.Is(err, io.EOF) {
			slices.Sort(names)
			return nil, engine.QueueInfo{}, fmt.Errorf("queue %q is not in %s (its queues: %s)", r.queue, r.in, strings.Join(names, ", "))
		}
		if err != nil {
			return nil, engine.QueueInfo{}, fmt.Errorf("%s: %w", r.in, err)
		}
		e, err := engine.Open(filepath.Join(scratch, fmt.Sprint(g.ID)), engine.DefaultOptions())
		if err != nil {
			return nil, engine.QueueInfo{}, err
		}
		if err := e.Restore(stream); err != nil {
			e.Close()
			if ferr := br.Err(); ferr != nil {
				err = ferr
			}
			return nil, engine.QueueInfo{}, fmt.Errorf("%s: group %d: %w", r.in, g.ID, err)
		}
		if q, err := e.Queue(r.queue); err == nil {
			return e, q, nil
		}
		qs, err := e.Queues()
		e.Close()
		if err != nil {
			return nil, engine.QueueInfo{}, err
		}
		for _, q := range qs {
			names = append(names, q.Name)
		}
	}
}

// check counts the queue's retained messages and dead-letter rows, and
// refuses sealed payloads before anything is written.
func (r *restoreQueue) check(e *engine.Engine, q engine.QueueInfo) (total, dead int, err error) {
	for i := range q.Partitions {
		for from := engine.Offset(0); from >= 0; {
			var msgs []engine.Message
			if msgs, from, err = e.Messages(q.Partitions[i].ID, from, 1000); err != nil {
				return 0, 0, err
			}
			for _, m := range msgs {
				if m.Sealed {
					return 0, 0, fmt.Errorf("queue %q holds payloads encrypted at rest: one queue of those cannot be restored into a running cluster; restore the whole backup with queen restore --data", r.queue)
				}
			}
			total += len(msgs)
		}
	}
	_, dead, err = e.ListDLQ(engine.DLQFilter{Queue: r.queue, Limit: 1})
	return total, dead, err
}

// target refuses an existing NAME unless the restore resumes.
func (r *restoreQueue) target() error {
	err := r.c.call(http.MethodGet, r.base+"/api/v1/resources/queues/"+url.PathEscape(r.as), nil, nil)
	var se *statusError
	switch {
	case err == nil && !r.resume:
		return fmt.Errorf("queue %q exists: pick another --as, or pass --resume to finish an interrupted restore into it", r.as)
	case err == nil:
		return nil
	case errors.As(err, &se) && se.Status == http.StatusNotFound:
		return nil
	}
	return err
}

// configure gives NAME the queue's options, its dedup window set to window.
func (r *restoreQueue) configure(q engine.QueueInfo, window int64) error {
	opts := map[string]any{}
	for _, o := range engine.AllOptions() {
		switch {
		case o == engine.OptDedupWindowSeconds:
			opts[o.Name()] = window
		case o.Kind() == engine.KindBool:
			opts[o.Name()] = q.Config.Bool(o)
		default:
			opts[o.Name()] = q.Config.Get(o)
		}
	}
	body, _ := json.Marshal(map[string]any{"queue": r.as, "namespace": q.Namespace, "task": q.Task, "options": opts})
	return r.retry(func() error { return r.c.call(http.MethodPost, r.base+"/api/v1/configure", bytes.NewReader(body), nil) })
}

// restoreItem is one message as the push route takes it.
type restoreItem struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	TransactionID string          `json:"transactionId"`
	TraceID       string          `json:"traceId,omitempty"`
	Payload       json.RawMessage `json:"payload"`
}

// pushPartition pushes p's messages to NAME in order and returns NAME's
// partition id and how many were queued and already there.
func (r *restoreQueue) pushPartition(e *engine.Engine, p *engine.PartitionInfo) (id string, queued, dup int, err error) {
	for from := engine.Offset(0); from >= 0; {
		var msgs []engine.Message
		if msgs, from, err = e.Messages(p.ID, from, restorePushBatch); err != nil {
			return "", queued, dup, err
		}
		for len(msgs) > 0 {
			n, size := 0, 0
			for n < len(msgs) && (n == 0 || size+len(msgs[n].Payload) <= restorePushBytes) {
				size += len(msgs[n].Payload)
				n++
			}
			items := make([]restoreItem, n)
			for i, m := range msgs[:n] {
				items[i] = restoreItem{Queue: r.as, Partition: m.Partition, TransactionID: m.TransactionID, Payload: m.Payload}
				if m.HasTrace {
					items[i].TraceID = engine.FormatID(m.TraceID)
				}
			}
			body, _ := json.Marshal(map[string]any{"items": items})
			var res []struct {
				Status      string `json:"status"`
				PartitionID string `json:"partition_id"`
				Error       string `json:"error"`
				Txn         string `json:"transaction_id"`
			}
			if err := r.retry(func() error {
				return r.c.call(http.MethodPost, r.base+"/api/v1/push", bytes.NewReader(body), &res)
			}); err != nil {
				return "", queued, dup, err
			}
			for _, x := range res {
				switch x.Status {
				case "queued":
					queued++
				case "duplicate":
					dup++
				default:
					return "", queued, dup, fmt.Errorf("push of %s/%s answered %s: %s", p.Name, x.Txn, x.Status, x.Error)
				}
				id = x.PartitionID
			}
			msgs = msgs[n:]
		}
	}
	return id, queued, dup, nil
}

// ackGroups acknowledges, for every consumer group with a cursor on p, the
// messages of NAME's partition id at or below the group's cursor.
func (r *restoreQueue) ackGroups(e *engine.Engine, p *engine.PartitionInfo, id string) (acked int, err error) {
	for _, c := range p.Cursors {
		if c.Committed < p.Start || id == "" {
			continue
		}
		// The group's cursor on NAME's partition, at its beginning (a seek
		// creates a missing row): lease-less acks need one.
		seek := fmt.Sprintf("%s/api/v1/consumer-groups/%s/queues/%s/partitions/%s/seek", r.base,
			url.PathEscape(c.Group), url.PathEscape(r.as), url.PathEscape(p.Name))
		if err := r.retry(func() error {
			return r.c.call(http.MethodPost, seek, strings.NewReader(`{"timestamp":"1970-01-01T00:00:00Z"}`), nil)
		}); err != nil {
			return acked, err
		}
		for from := engine.Offset(0); from >= 0 && from <= engine.Offset(c.Committed); {
			var msgs []engine.Message
			if msgs, from, err = e.Messages(p.ID, from, restorePushBatch); err != nil {
				return acked, err
			}
			var acks []map[string]string
			for _, m := range msgs {
				if m.Offset <= engine.Offset(c.Committed) {
					acks = append(acks, map[string]string{"transactionId": m.TransactionID, "partitionId": id, "status": "completed"})
				}
			}
			body, _ := json.Marshal(map[string]any{"acknowledgments": acks, "consumerGroup": c.Group})
			var res []struct {
				Success bool   `json:"success"`
				Error   string `json:"error"`
			}
			if err := r.retry(func() error {
				return r.c.call(http.MethodPost, r.base+"/api/v1/ack/batch", bytes.NewReader(body), &res)
			}); err != nil {
				return acked, err
			}
			for i, x := range res {
				if !x.Success {
					return acked, fmt.Errorf("ack of %s for group %s: %s", acks[i]["transactionId"], c.Group, x.Error)
				}
			}
			acked += len(acks)
		}
	}
	return acked, nil
}

// retry runs call until it succeeds, retrying a 503 or a network error (the
// cluster electing a leader, a node restarting) for up to a minute: every
// call here is safe to repeat.
func (r *restoreQueue) retry(call func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := call()
		var se *statusError
		if err == nil || (errors.As(err, &se) && se.Status != http.StatusServiceUnavailable) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}
