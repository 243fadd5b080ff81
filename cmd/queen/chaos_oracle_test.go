package main

// Tests of the fault-schedule test's checker itself: hand-made histories the
// model must accept, and ones breaking each promise it must reject, so that
// a green TestChaos means something.

import (
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// hist builds a one-partition history; times are in milliseconds from 0,
// ret < 0 meaning "unknown" (+infinity).
type hist struct {
	ops []porcupine.Operation
}

const histBaseUS = int64(1_700_000_000_000_000) // an arbitrary wall clock, µs

func (h *hist) add(client int, call, ret int64, in *mInput, out *mOutput) *hist {
	in.part = "p"
	in.callUS = histBaseUS + call*1000
	op := porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call * 1e6, Return: ret * 1e6}
	if ret < 0 {
		op.Return, in.retUS, out.unknown = math.MaxInt64, math.MaxInt64, true
	} else {
		in.retUS = histBaseUS + ret*1000
	}
	h.ops = append(h.ops, op)
	return h
}

func (h *hist) push(client int, call, ret int64, pos []int, statuses ...string) *hist {
	return h.add(client, call, ret, &mInput{kind: opPush, pos: pos}, &mOutput{pushed: statuses})
}

func (h *hist) pop(client int, call, ret int64, batch int, lease string, pos ...int) *hist {
	return h.add(client, call, ret, &mInput{kind: opPop, batch: batch}, &mOutput{lease: lease, pos: pos})
}

// ack acks offsets with statuses (parallel slices) and the answers given.
func (h *hist) ack(client int, call, ret int64, lease string, pos []int, statuses []string, answers ...ackOutcome) *hist {
	out := &mOutput{acks: answers}
	return h.add(client, call, ret, &mInput{kind: opAck, lease: lease, pos: pos, status: statuses}, out)
}

func (h *hist) ackRefused(client int, call, ret int64, lease string, pos []int, statuses []string) *hist {
	return h.add(client, call, ret, &mInput{kind: opAck, lease: lease, pos: pos, status: statuses}, &mOutput{leaseRejected: true})
}

// read reads the message at audited offset pos (-1: one the log never
// held) and what it was told: found, and consumed by the group.
func (h *hist) read(client int, call, ret int64, pos int, found, consumed bool) *hist {
	return h.add(client, call, ret, &mInput{kind: opRead, pos: []int{pos}}, &mOutput{found: found, consumed: consumed})
}

func (h *hist) final(at int64, logLen int) *hist {
	return h.add(0, at, at, &mInput{kind: opFinal, logLen: logLen}, &mOutput{})
}

var (
	okAck   = ackOutcome{success: true}
	dlqAck  = ackOutcome{success: true, dlq: true}
	done    = []string{"completed"}
	twoDone = []string{"completed", "completed"}
	nack    = []string{"failed"}
)

var oracleParams = chaosModelParams{retryLimit: 1, lease: 3 * time.Second, slack: 100 * time.Millisecond}

func checkHist(t *testing.T, h *hist) porcupine.CheckResult {
	t.Helper()
	model := chaosModel(oracleParams)
	v := checkPartitions(model, oracleParams, h.ops, 10*time.Second, 2)
	if len(v) != 1 {
		t.Fatalf("%d partitions, want 1", len(v))
	}
	if v[0].result == porcupine.Illegal && v[0].report == "" {
		t.Errorf("an illegal partition comes without a report")
	}
	return v[0].result
}

// TestChaosModel_Accepts: histories a correct broker can produce.
func TestChaosModel_Accepts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		h    *hist
	}{
		{"push, pop, ack, drained", new(hist).
			push(1, 0, 10, []int{0, 1}, "queued", "queued").
			pop(2, 20, 30, 5, "L1", 0, 1).
			ack(2, 40, 50, "L1", []int{0, 1}, twoDone, okAck, okAck).
			final(100, 2)},
		{"a push and a concurrent pop that sees it", new(hist).
			push(1, 0, 50, []int{0}, "queued").
			pop(2, 10, 60, 5, "L1", 0).
			ack(2, 70, 80, "L1", []int{0}, done, okAck).
			final(100, 1)},
		{"a lost push that applied, seen by a pop and a duplicate", new(hist).
			push(1, 0, -1, []int{0}).
			push(1, 100, 110, []int{0}, "duplicate").
			pop(2, 120, 130, 1, "L1", 0).
			ack(2, 140, 150, "L1", []int{0}, done, okAck).
			final(200, 1)},
		{"a lost ack that applied: the drain finds nothing", new(hist).
			push(1, 0, 10, []int{0}, "queued").
			pop(2, 20, 30, 1, "L1", 0).
			ack(2, 40, -1, "L1", []int{0}, done).
			final(5000, 1)},
		{"a lost ack that did not apply: redelivered after the lease", new(hist).
			push(1, 0, 10, []int{0}, "queued").
			pop(2, 20, 30, 1, "L1", 0).
			ack(2, 40, -1, "L1", []int{0}, done).
			pop(3, 3100, 3110, 1, "L2", 0).
			ack(3, 3120, 3130, "L2", []int{0}, done, okAck).
			final(5000, 1)},
		{"an expired lease is taken over, its late ack refused", new(hist).
			push(1, 0, 10, []int{0}, "queued").
			pop(2, 20, 30, 1, "L1", 0).
			pop(3, 3100, 3110, 1, "L2", 0).
			ackRefused(2, 3200, 3210, "L1", []int{0}, done).
			ack(3, 3220, 3230, "L2", []int{0}, done, okAck).
			final(5000, 1)},
		{"a nack redelivers, the second dead-letters (retryLimit 1)", new(hist).
			push(1, 0, 10, []int{0, 1}, "queued", "queued").
			pop(2, 20, 30, 1, "L1", 0).
			ack(2, 40, 50, "L1", []int{0}, nack, okAck).
			pop(2, 60, 70, 1, "L2", 0).
			ack(2, 80, 90, "L2", []int{0}, nack, dlqAck).
			pop(2, 100, 110, 5, "L3", 1).
			ack(2, 120, 130, "L3", []int{1}, done, okAck).
			final(200, 2)},
		{"a completed ack above a nack is superseded and redelivers", new(hist).
			push(1, 0, 10, []int{0, 1}, "queued", "queued").
			pop(2, 20, 30, 2, "L1", 0, 1).
			ack(2, 40, 50, "L1", []int{0, 1}, []string{"retry", "completed"}, okAck, okAck).
			pop(2, 60, 70, 2, "L2", 0, 1).
			ack(2, 80, 90, "L2", []int{0, 1}, twoDone, okAck, okAck).
			final(200, 2)},
		{"a partial ack keeps the lease", new(hist).
			push(1, 0, 10, []int{0, 1}, "queued", "queued").
			pop(2, 20, 30, 2, "L1", 0, 1).
			ack(2, 40, 50, "L1", []int{0}, done, okAck).
			ack(2, 60, 70, "L1", []int{1}, done, okAck).
			final(200, 2)},
		{"reads through any node see completed pushes and acks", new(hist).
			read(3, 0, 5, 0, false, false).
			push(1, 0, 10, []int{0, 1}, "queued", "queued").
			read(3, 12, 18, 1, true, false).
			pop(2, 20, 30, 5, "L1", 0, 1).
			read(3, 32, 38, 0, true, false).
			ack(2, 40, 50, "L1", []int{0, 1}, twoDone, okAck, okAck).
			read(3, 55, 60, 0, true, true).
			read(4, 55, 61, -1, false, false).
			final(100, 2)},
		{"a read concurrent with a push or an ack may see it or not", new(hist).
			push(1, 0, 50, []int{0}, "queued").
			read(3, 10, 20, 0, false, false).
			read(4, 30, 40, 0, true, false).
			pop(2, 60, 70, 1, "L1", 0).
			ack(2, 80, 120, "L1", []int{0}, done, okAck).
			read(3, 90, 100, 0, true, false).
			read(4, 105, 110, 0, true, true).
			final(200, 1)},
		{"a read sees a push whose answer was lost", new(hist).
			push(1, 0, -1, []int{0}).
			read(3, 100, 110, 0, true, false).
			pop(2, 120, 130, 1, "L1", 0).
			ack(2, 140, 150, "L1", []int{0}, done, okAck).
			final(200, 1)},
		{"a dead letter reads consumed", new(hist).
			push(1, 0, 10, []int{0}, "queued").
			pop(2, 20, 30, 1, "L1", 0).
			ack(2, 40, 50, "L1", []int{0}, nack, okAck).
			read(3, 55, 58, 0, true, false).
			pop(2, 60, 70, 1, "L2", 0).
			ack(2, 80, 90, "L2", []int{0}, nack, dlqAck).
			read(3, 95, 98, 0, true, true).
			final(200, 1)},
		{"an item answered failed is not stored; its retry is", new(hist).
			push(1, 0, 10, []int{0, -1}, "queued", "failed").
			push(1, 20, 30, []int{1}, "queued").
			pop(2, 40, 50, 2, "L1", 0, 1).
			ack(2, 60, 70, "L1", []int{0, 1}, twoDone, okAck, okAck).
			final(200, 2)},
		{"a push that never applied is left out by the caller; a repush is a duplicate", new(hist).
			push(1, 0, 10, []int{0}, "queued").
			push(1, 20, 30, []int{0}, "duplicate").
			pop(2, 40, 50, 1, "L1", 0).
			ack(2, 60, 70, "L1", []int{0}, done, okAck).
			final(200, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkHist(t, tc.h); got != porcupine.Ok {
				t.Errorf("checker says %v, want Ok", got)
			}
		})
	}
}

// TestChaosModel_Rejects: each history breaks one promise of the API.
func TestChaosModel_Rejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		h    *hist
	}{
		{"FIFO: the second message first", new(hist).
			push(1, 0, 10, []int{0, 1}, "queued", "queued").
			pop(2, 20, 30, 1, "L1", 1).
			final(200, 2)},
		{"a pop misses a push that completed before it", new(hist).
			push(1, 0, 10, []int{0, 1}, "queued", "queued").
			pop(2, 20, 30, 5, "L1", 0).
			ack(2, 40, 50, "L1", []int{0}, done, okAck).
			pop(2, 60, 70, 5, "L2", 1).
			ack(2, 80, 90, "L2", []int{1}, done, okAck).
			final(200, 2)},
		{"delivered again after a completed ack", new(hist).
			push(1, 0, 10, []int{0}, "queued").
			pop(2, 20, 30, 1, "L1", 0).
			ack(2, 40, 50, "L1", []int{0}, done, okAck).
			pop(3, 3100, 3110, 1, "L2", 0).
			final(5000, 1)},
		{"a queued push is not in the log", new(hist).
			push(1, 0, 10, []int{-1}, "queued").
			final(200, 0)},
		{"a message in the log nobody pushed", new(hist).
			final(200, 1)},
		{"dedup: a duplicate of an id never pushed", new(hist).
			push(1, 0, 10, []int{-1}, "duplicate").
			final(200, 0)},
		{"dedup: one id queued twice", new(hist).
			push(1, 0, 10, []int{0}, "queued").
			push(1, 20, 30, []int{0}, "queued").
			pop(2, 40, 50, 1, "L1", 0).
			ack(2, 60, 70, "L1", []int{0}, done, okAck).
			final(200, 1)},
		{"a lease taken while another was surely live", new(hist).
			push(1, 0, 10, []int{0}, "queued").
			pop(2, 20, 30, 1, "L1", 0).
			pop(3, 1000, 1010, 1, "L2", 0).
			ack(3, 1020, 1030, "L2", []int{0}, done, okAck).
			final(5000, 1)},
		{"an ack succeeds after its lease expired", new(hist).
			push(1, 0, 10, []int{0}, "queued").
			pop(2, 20, 30, 1, "L1", 0).
			ack(2, 3500, 3510, "L1", []int{0}, done, okAck).
			final(5000, 1)},
		{"an ack refused for a lease that is current and live", new(hist).
			push(1, 0, 10, []int{0}, "queued").
			pop(2, 20, 30, 1, "L1", 0).
			ackRefused(2, 40, 50, "L1", []int{0}, done).
			pop(2, 3100, 3110, 1, "L2", 0).
			ack(2, 3120, 3130, "L2", []int{0}, done, okAck).
			final(5000, 1)},
		{"an ack succeeds with a lease that was released", new(hist).
			push(1, 0, 10, []int{0, 1}, "queued", "queued").
			pop(2, 20, 30, 1, "L1", 0).
			ack(2, 40, 50, "L1", []int{0}, done, okAck).
			ack(2, 60, 70, "L1", []int{1}, done, okAck).
			final(200, 2)},
		{"the budget is ignored: the second nack is not dead-lettered", new(hist).
			push(1, 0, 10, []int{0}, "queued").
			pop(2, 20, 30, 1, "L1", 0).
			ack(2, 40, 50, "L1", []int{0}, nack, okAck).
			pop(2, 60, 70, 1, "L2", 0).
			ack(2, 80, 90, "L2", []int{0}, nack, okAck).
			final(200, 1)},
		{"a message left unconsumed after the drain", new(hist).
			push(1, 0, 10, []int{0, 1}, "queued", "queued").
			pop(2, 20, 30, 1, "L1", 0).
			ack(2, 40, 50, "L1", []int{0}, done, okAck).
			final(200, 2)},
		{"a refused ack yet the drain found nothing left", new(hist).
			push(1, 0, 10, []int{0}, "queued").
			pop(2, 20, 30, 1, "L1", 0).
			ackRefused(2, 3200, 3210, "L1", []int{0}, done).
			final(5000, 1)},
		{"stale read: a completed push not found", new(hist).
			push(1, 0, 10, []int{0}, "queued").
			read(3, 20, 30, 0, false, false).
			pop(2, 40, 50, 1, "L1", 0).
			ack(2, 60, 70, "L1", []int{0}, done, okAck).
			final(200, 1)},
		{"stale read: a completed ack reads unconsumed", new(hist).
			push(1, 0, 10, []int{0}, "queued").
			pop(2, 20, 30, 1, "L1", 0).
			ack(2, 40, 50, "L1", []int{0}, done, okAck).
			read(3, 60, 70, 0, true, false).
			final(200, 1)},
		{"a read goes back: found, then not found", new(hist).
			push(1, 0, -1, []int{0}).
			read(3, 100, 110, 0, true, false).
			read(4, 120, 130, 0, false, false).
			pop(2, 140, 150, 1, "L1", 0).
			ack(2, 160, 170, "L1", []int{0}, done, okAck).
			final(300, 1)},
		{"a read finds a message never stored", new(hist).
			read(3, 0, 10, -1, true, false).
			final(200, 0)},
		{"an item answered failed is in the log", new(hist).
			push(1, 0, 10, []int{0}, "failed").
			pop(2, 20, 30, 1, "L1", 0).
			ack(2, 40, 50, "L1", []int{0}, done, okAck).
			final(200, 1)},
		{"a lost push split across the log", new(hist).
			push(1, 0, -1, []int{0, -1}).
			final(200, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkHist(t, tc.h); got != porcupine.Illegal {
				t.Errorf("checker says %v, want Illegal", got)
			}
		})
	}
}

// TestChaosModel_Inconclusive: a partition porcupine cannot decide in its
// budget is reported as Unknown, not as Ok.
func TestChaosModel_Inconclusive(t *testing.T) {
	t.Parallel()
	model := chaosModel(oracleParams)
	step := model.Step
	model.Step = func(state, input, output any) (bool, any) {
		time.Sleep(time.Millisecond)
		return step(state, input, output)
	}
	h := new(hist)
	// Forty lost pushes of one id each, none of which can be told apart
	// from applying or not before the final operation: a wide search.
	var pos int
	for i := range 40 {
		h.push(i+1, 0, -1, []int{pos})
		pos++
	}
	h.pop(50, 100, 110, 1, "L1", 5)
	h.final(200, pos)
	v := checkPartitions(model, oracleParams, h.ops, 50*time.Millisecond, 1)
	if len(v) != 1 || v[0].result != porcupine.Unknown {
		t.Fatalf("verdicts %+v, want one Unknown", v)
	}
}
