package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
)

// Moving a queue between groups, live (ARCHITECTURE.md "Step 2, moving a
// queue"). The protocol, each step a replicated command that is a no-op
// when it lands twice:
//
//  1. BeginMove records the move in the directory (from, to, the epoch E
//     of the placement); a second move of the queue is refused.
//  2. FreezeQueue with epoch E+1 in the target, then in the source: from
//     the source's freeze on, every command that would change the queue
//     there is refused ErrQueueMoving before it writes anything, and the
//     Host retries it (Propose, below), routed afresh each time.
//  3. Once this node's replica of the source has applied the freeze, a
//     snapshot of it holds the queue's final state in the source; its
//     export is proposed chunk by chunk (ImportQueueCmd) to the target.
//  4. EndMove flips the placement to the target with epoch E+1.
//  5. The target is thawed and the source copy dropped; the source's mark
//     stays, a tombstone that refuses what a stale placement still routes
//     there.
//
// Nothing acknowledged is lost: a write the source accepted was applied
// before its freeze, so it is in the snapshot, hence in the target; a
// write refused was not applied anywhere and is retried in the target once
// the placement flips. Nothing is delivered twice: leases, cursors and
// dedup ids are copied verbatim, so a lease held during the move acks in
// the target, and a pop that ran in the source before the freeze moved the
// cursor the target now starts from.
//
// A failure before EndMove undoes the move: the record cleared (AbortMove),
// then, unless EndMove landed after all, the target's partial copy
// dropped and both groups thawed (abortMove). A failure
// whose outcome is unknown at EndMove leaves things for moveLoop, which
// the directory's leader runs.

// MoveProgress reports a move's progress to MoveQueue's caller.
type MoveProgress struct {
	Queue    string
	From, To uint32
	// Epoch is the placement epoch the move flips to.
	Epoch uint64
	// Phase is "begin", "freeze", "copy", "flip", "drop", "done" or
	// "abort".
	Phase string
	// Chunks and Bytes count what was copied so far.
	Chunks int
	Bytes  int64
}

// MoveOutcome is how a move ended on the node that ran it
// (HostOptions.OnMove).
type MoveOutcome struct {
	Queue    string
	From, To uint32
	// Result is "done" (MoveQueue returned nil), "failed" (it returned an
	// error once this node's directory replica showed its move: undone,
	// or left for the directory's leader to finish or undo) or "aborted"
	// (moveLoop undid a move left part way).
	Result string
	// Took is from the move's BeginMove to its end (MoveQueue only).
	Took time.Duration
	// Bytes are those of the chunks imported into the target.
	Bytes int64
}

// MoveQueue moves queue to group to (see the top of this file), calling
// progress (when not nil) as it goes. It returns once the queue lives in
// to and the source copy is dropped, or with the error that undid the
// move. ErrInvalid for a queue not placed, a group it lives in or that
// does not exist, a queue moving already, or a queue of a stream. A move
// refused so is not one: only a move BeginMove recorded, and this node's
// directory replica shows, reaches HostOptions.OnMove.
func (h *Host) MoveQueue(ctx context.Context, queue string, to uint32, progress func(MoveProgress)) error {
	if progress == nil {
		progress = func(MoveProgress) {}
	}
	ctx, stop, err := h.track(ctx)
	if err != nil {
		return err
	}
	defer stop()
	from, err := h.find(ctx, queue)
	if err != nil {
		return err
	}
	if from != 0 && !h.hosts(from) {
		// The copy reads this node's replica of the source: with groups on
		// R of N nodes, a node that is not a voter of it sends the move to
		// the group's leader (the edge forwards on NotLeaderError).
		return h.groupError(from, raft.ErrNotLeader)
	}
	start := time.Now()
	r, err := h.moveStep(ctx, raft.Directory, command.BeginMove{Queue: queue, To: to})
	if err != nil {
		return err
	}
	ep, _ := r.Value.(uint64)
	m, err := h.moveRecord(ctx, queue, ep)
	if err != nil {
		return err
	}
	p := MoveProgress{Queue: queue, From: m.From, To: m.To, Epoch: ep + 1, Phase: "begin"}
	h.moveLog(&p, start, "raft: move: begin")
	err = h.runMove(ctx, m, &p, start, progress)
	result := "done"
	if err != nil {
		result = "failed"
	}
	h.moved(MoveOutcome{Queue: queue, From: m.From, To: m.To, Result: result, Took: time.Since(start), Bytes: p.Bytes})
	return err
}

// StartMove runs MoveQueue in the background and returns once the move is
// recorded (BeginMove applied), or with the error that refused it: how the
// balancer starts a move, here or, through Forwarder.StartMove, on a voter
// of the queue's group, since the copy reads a replica of the source. The
// move goes on after the caller's ctx ends, until the Host closes (a move
// cut short so is the directory's leader's to undo); how it ends is
// logged, and reaches HostOptions.OnMove as MoveQueue's does.
func (h *Host) StartMove(ctx context.Context, queue string, to uint32) error {
	bg, stop, err := h.track(context.Background())
	if err != nil {
		return err
	}
	began := make(chan error, 1)
	go func() {
		defer stop()
		start := time.Now()
		var once sync.Once
		err := h.MoveQueue(bg, queue, to, func(MoveProgress) {
			once.Do(func() { began <- nil })
		})
		once.Do(func() { began <- err })
		log := h.directory().Logger()
		if err != nil {
			log.Warn("raft: move started in the background failed", "queue", queue, "to", to, "err", err)
			return
		}
		log.Info("raft: move started in the background done", "queue", queue, "to", to, "took", time.Since(start))
	}()
	select {
	case err := <-began:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: %s to group %d: %w", raft.ErrOutcomeUnknown, queue, to, ctx.Err())
	}
}

// track registers a move this node runs, until stop: its context ends
// when the Host closes, and Close waits for it to return before it closes
// the groups, whose stores it reads (a snapshot of the source left open
// while the store closes is a leak Pebble refuses, and a read after it a
// use of a closed store). A move cut short so is left for the directory's
// leader to undo or finish (abortMove).
func (h *Host) track(ctx context.Context) (_ context.Context, stop func(), _ error) {
	h.doneMu.Lock()
	defer h.doneMu.Unlock()
	if h.stopping() {
		return nil, nil, raft.ErrShutdown
	}
	h.wg.Add(1)
	ctx, cancel := h.untilClose(ctx)
	return ctx, func() { cancel(); h.wg.Done() }, nil
}

// untilClose is ctx ended also when the Host closes.
func (h *Host) untilClose(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-h.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// stopping reports whether the Host's Close has begun.
func (h *Host) stopping() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// moveLog logs a phase of the move p reports, with the time since the
// move began (start), so that an operator sees where a slow move spent it.
func (h *Host) moveLog(p *MoveProgress, start time.Time, msg string, args ...any) {
	args = append([]any{"queue", p.Queue, "from", p.From, "to", p.To, "epoch", p.Epoch,
		"elapsed", time.Since(start).Round(time.Millisecond)}, args...)
	h.directory().Logger().Info(msg, args...)
}

// moved tells HostOptions.OnMove, when set, how a move ended.
func (h *Host) moved(o MoveOutcome) {
	if h.opts.OnMove != nil {
		h.opts.OnMove(o)
	}
}

// moveAttempt is what names m's attempt on its EndMove and AbortMove (its
// BeginMove's stamp; raft/command/dirmove.go): 0, any attempt at its
// epoch, while the cluster runs a command version below 4, whose nodes
// could not apply a step that names one.
func (h *Host) moveAttempt(m command.Move) int64 {
	if h.directory().ClusterVersion() < 4 {
		return 0
	}
	return m.StartedAt
}

// runMove runs the move m recorded by BeginMove, from the freeze on.
func (h *Host) runMove(ctx context.Context, m command.Move, p *MoveProgress, start time.Time, progress func(MoveProgress)) error {
	queue, to, ep := m.Queue, m.To, m.Epoch
	progress(*p)
	id, err := h.copyQueue(ctx, m, p, start, progress)
	if err != nil {
		p.Phase = "abort"
		progress(*p)
		_, aerr := h.abortMove(m, id) // no flip: this node proposes EndMove, below
		return errors.Join(err, aerr)
	}
	p.Phase = "flip"
	progress(*p)
	if _, err := h.moveStep(ctx, raft.Directory, command.EndMove{Queue: queue, To: to, Epoch: ep, StartedAt: h.moveAttempt(m)}); err != nil {
		if !raft.NotApplied(err) {
			return fmt.Errorf("raft: move of %s: the placement flip's outcome is unknown; the directory's leader finishes or undoes it: %w", queue, err)
		}
		// Refused: moveLoop undid the move meanwhile, or the directory had
		// no leader for as long as moveStep tries. An earlier try, whose
		// answer was lost, may have flipped it all the same: the abort
		// finds out, and the move is then finished.
		flipped, aerr := h.abortMove(m, id)
		if !flipped {
			return errors.Join(err, aerr)
		}
	}
	h.moveLog(p, start, "raft: move: flipped")
	p.Phase = "drop"
	progress(*p)
	if err := h.finishMove(ctx, queue, m.From, m.To, ep+1, id); err != nil {
		return fmt.Errorf("raft: move of %s: placed in group %d; the source copy is left for the directory's leader to drop: %w", queue, to, err)
	}
	h.moveLog(p, start, "raft: move: dropped the source copy")
	p.Phase = "done"
	progress(*p)
	return nil
}

// moveRecord waits until this node's directory replica shows the move
// BeginMove recorded at epoch ep (forward waits for it as a rule; a
// lagging replica catches up within moments).
func (h *Host) moveRecord(ctx context.Context, queue string, ep uint64) (command.Move, error) {
	deadline := time.Now().Add(h.opts.PartWait)
	for {
		if m, ok := command.MoveOf(h.directory().Engine().ClusterValue, queue); ok && m.Epoch == ep {
			return m, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return command.Move{}, fmt.Errorf("%w: the move of %s at epoch %d is not in this node's directory replica", raft.ErrTimeout, queue, ep)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// copyQueue freezes the queue in both groups and copies it from this
// node's replica of the source into the target, chunk by chunk. It
// returns the queue's id (zero when the source holds no queue of that
// name: a placement without a queue moves without a copy).
func (h *Host) copyQueue(ctx context.Context, m command.Move, p *MoveProgress, start time.Time, progress func(MoveProgress)) (engine.ID, error) {
	ep := m.Epoch + 1
	p.Phase = "freeze"
	progress(*p)
	var took []any // each step's time, for the log
	for _, g := range []uint32{m.To, m.From} {
		t := time.Now()
		if _, err := h.moveStep(ctx, g, engine.FreezeQueueCmd{Group: g, Queue: m.Queue, Epoch: ep}); err != nil {
			return engine.ID{}, err
		}
		took = append(took, fmt.Sprintf("freeze_g%d", g), time.Since(t).Round(time.Millisecond))
	}
	src := h.replica(m.From)
	if src == nil {
		return engine.ID{}, h.groupError(m.From, raft.ErrNotLeader) // retired since the move began here
	}
	t := time.Now()
	deadline := time.Now().Add(h.opts.PartWait)
	for {
		if got, ok := src.Engine().Frozen(m.Queue); ok && got == ep {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return engine.ID{}, fmt.Errorf("%w: this node's replica of group %d has not applied the freeze of %s", raft.ErrTimeout, m.From, m.Queue)
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.moveLog(p, start, "raft: move: frozen", append(took, "applied_here", time.Since(t).Round(time.Millisecond))...)
	snap, err := src.Engine().Snapshot()
	if err != nil {
		return engine.ID{}, err
	}
	defer snap.Close()
	p.Phase = "copy"
	t = time.Now()
	// Nothing here reads the chunks this node's replica of the target
	// applies (the thaw after the flip waits for them all): a relayed
	// chunk need not wait for it, which cost each one the target leader's
	// next heartbeat (bench/move.sh: 93 chunks in 9 s, against 1.5 s on
	// the target's leader).
	ictx := WithoutApplyWait(ctx)
	var (
		pos []byte
		id  engine.ID
	)
	for seq := uint32(0); ; seq++ {
		chunk, err := snap.ExportQueue(m.Queue, pos, engine.ExportChunkBytes)
		if seq == 0 && errors.Is(err, engine.ErrQueueNotFound) {
			return engine.ID{}, nil
		}
		if err != nil {
			return id, err
		}
		id = chunk.ID
		if h.moveHook != nil {
			if err := h.moveHook(m.Queue, seq); err != nil {
				return id, err
			}
		}
		cmd := engine.ImportQueueCmd{Group: m.To, Queue: m.Queue, ID: chunk.ID, Epoch: ep, Seq: seq, Last: chunk.Last, KVs: chunk.KVs}
		if _, err := h.moveStep(ictx, m.To, cmd); err != nil {
			return id, err
		}
		p.Chunks++
		for _, kv := range chunk.KVs {
			p.Bytes += int64(len(kv.Key) + len(kv.Value))
		}
		progress(*p)
		if chunk.Last {
			h.moveLog(p, start, "raft: move: copied", "bytes", p.Bytes, "chunks", p.Chunks, "took", time.Since(t).Round(time.Millisecond))
			return id, nil
		}
		pos = chunk.Next
	}
}

// finishMove ends a move whose placement flipped: the target thawed, the
// source copy dropped (its mark stays, a tombstone).
func (h *Host) finishMove(ctx context.Context, queue string, from, to uint32, ep uint64, id engine.ID) error {
	if _, err := h.moveStep(ctx, to, engine.FreezeQueueCmd{Group: to, Queue: queue, Epoch: ep, Thaw: true}); err != nil {
		return err
	}
	if id == (engine.ID{}) {
		return nil
	}
	if h.dropHook != nil {
		h.dropHook(queue)
	}
	_, err := h.moveStep(ctx, from, engine.DropQueueCmd{Group: from, Queue: queue, ID: id})
	return err
}

// abortMove undoes the move m unless it flipped. The record is cleared
// first (AbortMove): at the directory that settles the race with the
// move's EndMove, one of the two applying and the other changing nothing.
// Unless EndMove won (flipped: the move is to be finished, not undone),
// the target's copy (id) is then dropped and both groups thawed; a failure
// there leaves freeze marks with no move recorded, which moveLoop undoes
// as strays. It runs on its own deadline: the caller's context may be
// what failed.
//
// A node that is stopping leaves the undo to the directory's leader
// (moveLoop), as a node killed would: Close waits for the moves it runs.
func (h *Host) abortMove(m command.Move, id engine.ID) (flipped bool, err error) {
	if h.stopping() {
		return false, fmt.Errorf("%w: the directory's leader undoes the move of %s", raft.ErrShutdown, m.Queue)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*h.opts.PartWait)
	defer cancel()
	ctx, stop := h.untilClose(ctx)
	defer stop()
	if _, err := h.moveStep(ctx, raft.Directory, command.AbortMove{Queue: m.Queue, Epoch: m.Epoch, StartedAt: h.moveAttempt(m)}); err != nil {
		return false, fmt.Errorf("raft: undo the move of %s: %w", m.Queue, err)
	}
	if flipped, err := h.flipped(ctx, m); err != nil || flipped {
		return flipped, err
	}
	ep := m.Epoch + 1
	var steps []engine.Command
	if id != (engine.ID{}) {
		steps = append(steps, engine.DropQueueCmd{Group: m.To, Queue: m.Queue, ID: id})
	}
	steps = append(steps, engine.FreezeQueueCmd{Group: m.To, Queue: m.Queue, Epoch: ep, Thaw: true},
		engine.FreezeQueueCmd{Group: m.From, Queue: m.Queue, Epoch: ep, Thaw: true})
	for _, c := range steps {
		g := m.To
		if f, ok := c.(engine.FreezeQueueCmd); ok {
			g = f.Group
		}
		if _, err := h.moveStep(ctx, g, c); err != nil {
			return false, fmt.Errorf("raft: undo the move of %s: %T: %w", m.Queue, c, err)
		}
	}
	h.directory().Logger().Info("raft: move undone", "queue", m.Queue, "from", m.From, "to", m.To, "epoch", ep)
	return false, nil
}

// flipped waits until this node's directory replica no longer records the
// move m (the caller saw AbortMove applied: the record is gone, by it or
// by the EndMove before it) and reports whether the placement flipped.
func (h *Host) flipped(ctx context.Context, m command.Move) (bool, error) {
	v := h.directory().Engine().ClusterValue
	deadline := time.Now().Add(h.opts.PartWait)
	for {
		if cur, ok := command.MoveOf(v, m.Queue); !ok || cur.Epoch != m.Epoch || cur.StartedAt != m.StartedAt {
			return command.Placement(v, m.Queue) == m.To && command.Epoch(v, m.Queue) == m.Epoch+1, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false, fmt.Errorf("%w: this node's directory replica still records the move of %s", raft.ErrTimeout, m.Queue)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// moveStep proposes one of a move's commands on group g, here or relayed,
// and retries what a retry may cure for up to 2 × PartWait: every one of
// them is a no-op when it lands twice, so an unknown outcome is retried
// too. The command's own refusal is the error.
func (h *Host) moveStep(ctx context.Context, g uint32, c engine.Command) (engine.Result, error) {
	deadline := time.Now().Add(2 * h.opts.PartWait)
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 400*time.Millisecond) {
		r, err := h.run(ctx, g, c)
		if err == nil {
			err = r.Err
		}
		if err == nil {
			return r, nil
		}
		if !raft.Transient(err) || errors.Is(err, engine.ErrQueueMoving) || ctx.Err() != nil || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(wait)
	}
}

// Moves lists the moves under way, as this node's directory replica has
// them, in queue order.
func (h *Host) Moves() []Move {
	d := h.directory().Engine()
	var out []Move
	for _, name := range d.ClusterNames(command.MovePrefix) {
		if m, ok := command.MoveOf(d.ClusterValue, name[len(command.MovePrefix):]); ok {
			out = append(out, m)
		}
	}
	return out
}

// PlacementEpoch is the epoch of queue's placement in this node's
// directory replica (1 until it first moves).
func (h *Host) PlacementEpoch(queue string) uint64 {
	return command.Epoch(h.directory().Engine().ClusterValue, queue)
}

// moving reports whether a command's answer is a refusal by a queue frozen
// for a move.
func moving(r engine.Result, err error) bool {
	return errors.Is(err, engine.ErrQueueMoving) || errors.Is(r.Err, engine.ErrQueueMoving)
}

// retryMoving runs route until its answer is not a move's refusal, up to
// HostOptions.MoveWait: a command for a queue being moved waits for the
// placement to flip, then route finds the queue in its new group.
func (h *Host) retryMoving(ctx context.Context, route func() (engine.Result, error)) (engine.Result, error) {
	deadline := time.Now().Add(h.opts.MoveWait)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		r, err := route()
		if !moving(r, err) || ctx.Err() != nil || time.Now().After(deadline) {
			return r, err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return r, err
		case <-h.waitsStopped:
			return r, err
		}
	}
}

// StopWaiting ends the waits of commands refused by a queue frozen for a
// move (retryMoving, retryMovingItems), now and from now on: each answers
// that refusal at once, which says for certain that nothing was applied
// (503 queue_moving, to retry elsewhere). The server calls it as it begins
// to shut down: a wait of up to MoveWait (30 s) outlasted queen serve's
// 10 s deadline for in-flight requests, and a SIGTERM while a queue was
// frozen made the node exit 1 (the chaos suite's seed 2222).
func (h *Host) StopWaiting() { h.stopWait.Do(func() { close(h.waitsStopped) }) }

// stoppingWaits reports whether StopWaiting was called.
func (h *Host) stoppingWaits() bool {
	select {
	case <-h.waitsStopped:
		return true
	default:
		return false
	}
}

// moveLoop finishes or undoes, every MoveInterval, what a node that
// stopped part way through a move left. On the directory's leader, the
// moves recorded: one recorded longer ago than MoveTimeout is aborted (its
// source was frozen, so undoing it loses nothing, where resuming would
// need the exact chunk boundaries of a copy made by another node). On
// every node, the freeze marks in the groups it leads: a move that flipped
// but was not finished (its target still frozen, its source copy still
// there) is finished, a stray mark undone. The marks are the groups'
// leaders' to look at, not the directory leader's: with groups on R of N
// nodes it may hold no replica of a group (issue 30).
func (h *Host) moveLoop() {
	defer h.wg.Done()
	for {
		select {
		case <-time.After(h.opts.MoveInterval):
		case <-h.done:
			return
		}
		if h.directory().IsLeader() {
			h.recoverMoves()
		}
		h.recoverMarks()
	}
}

// recoverMoves aborts, on the directory's leader, the moves recorded
// longer ago than MoveTimeout (moveLoop).
func (h *Host) recoverMoves() {
	d := h.directory()
	oldest := time.Now().Add(-h.opts.MoveTimeout).UnixMicro()
	for _, m := range h.Moves() {
		if m.StartedAt > oldest {
			continue
		}
		// The target's copy is dropped by its id: an abort that knew none
		// would thaw the target and leave a part copy there that nothing
		// then finds (no mark, no move). So a target that cannot be asked
		// now is asked again next round.
		id, _, err := h.copyID(m.To, m.Queue)
		if err != nil {
			d.Logger().Warn("raft: move: undo: what the target holds is not known; next round", "queue", m.Queue, "to", m.To, "err", err)
			continue
		}
		d.Logger().Warn("raft: move: undoing a move left part way", "queue", m.Queue, "from", m.From, "to", m.To, "epoch", m.Epoch)
		if flipped, err := h.abortMove(m, id); err != nil {
			d.Logger().Warn("raft: move: undo", "queue", m.Queue, "err", err)
		} else if flipped {
			d.Logger().Info("raft: move: flipped meanwhile; finished next round", "queue", m.Queue, "from", m.From, "to", m.To)
		} else {
			h.moved(MoveOutcome{Queue: m.Queue, From: m.From, To: m.To, Result: "aborted"})
		}
	}
}

// recoverMarks finishes or undoes what the freeze marks in the groups
// this node leads say a move left (moveLoop). A flipped move not
// finished: its marks carry the placement's epoch. A mark past it with no
// move recorded is a stray (a mover that froze again after its move was
// undone, then stopped): undone once it has stayed so for MoveTimeout.
// The directory is read from this node's replica: one behind sees a
// recent move's mark as a stray, which waits MoveTimeout before it is
// undone, long enough for the replica to catch up.
func (h *Host) recoverMarks() {
	moving := map[string]bool{}
	for _, m := range h.Moves() {
		moving[m.Queue] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*h.opts.PartWait)
	defer cancel()
	seen := map[strayMark]time.Time{}
	for g := 1; g < len(h.nodes); g++ {
		n := h.served(uint32(g))
		if n == nil || !n.IsLeader() {
			continue
		}
		log, e := n.Logger(), n.Engine()
		for q, ep := range e.FrozenQueues() {
			place := h.Placement(q)
			if moving[q] || place == 0 || ep < h.PlacementEpoch(q) {
				continue // under way, unknown here, or a tombstone
			}
			var err error
			switch {
			case ep > h.PlacementEpoch(q):
				k := strayMark{uint32(g), q, ep}
				first, ok := h.strays[k]
				if !ok {
					first = time.Now()
				}
				seen[k] = first
				if time.Since(first) < h.opts.MoveTimeout {
					continue
				}
				log.Warn("raft: move: undoing a stray freeze", "queue", q, "group", g, "epoch", ep)
				if place != uint32(g) {
					err = h.dropCopy(ctx, uint32(g), q)
				}
				if err == nil {
					_, err = h.moveStep(ctx, uint32(g), engine.FreezeQueueCmd{Group: uint32(g), Queue: q, Epoch: ep, Thaw: true})
				}
			case place == uint32(g):
				_, err = h.moveStep(ctx, uint32(g), engine.FreezeQueueCmd{Group: uint32(g), Queue: q, Epoch: ep, Thaw: true})
			default:
				err = h.dropCopy(ctx, uint32(g), q)
			}
			if err != nil {
				log.Warn("raft: move: finish or undo a move left part way", "queue", q, "group", g, "err", err)
			}
		}
	}
	h.strays = seen
}

// strayMark is a freeze mark moveLoop watches.
type strayMark struct {
	group uint32
	queue string
	epoch uint64
}

// dropCopy drops what group g, which this node leads, holds of queue,
// placed elsewhere: an import under way or a whole copy.
func (h *Host) dropCopy(ctx context.Context, g uint32, queue string) error {
	n := h.replica(g)
	if n == nil {
		return nil // not held here: this node does not lead g
	}
	id, ok := heldCopy(n.Engine(), queue)
	if !ok {
		return nil // nothing here
	}
	_, err := h.moveStep(ctx, g, engine.DropQueueCmd{Group: g, Queue: queue, ID: id})
	return err
}

// copyID is the id of what group g holds of queue (heldCopy), read from
// g's leader when this node does not host g: it holds no replica of g,
// or a stale one.
func (h *Host) copyID(g uint32, queue string) (engine.ID, bool, error) {
	n := h.served(g)
	if n == nil {
		a, err := readRemote[engine.ID](h, g, readRequest{Op: readCopyID, Name: queue})
		return a.Value, a.Found, err
	}
	id, ok := heldCopy(n.Engine(), queue)
	return id, ok, nil
}

// heldCopy is the id of what e holds of queue: an import under way, else
// a whole copy; false when it holds nothing.
func heldCopy(e *engine.Engine, queue string) (engine.ID, bool) {
	if id, _, _, ok := e.ImportProgress(queue); ok {
		return id, true
	}
	if info, err := e.Queue(queue); err == nil {
		return info.ID, true
	}
	return engine.ID{}, false
}

// Move is a move under way, as the directory records it.
type Move = command.Move

// QueuesPlaced is how many queues the directory places in group g, as
// this node's replica has it (command.Placed).
func (h *Host) QueuesPlaced(g uint32) uint64 {
	return command.Placed(h.directory().Engine().ClusterValue, g)
}
