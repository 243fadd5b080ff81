package fault

import (
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Open opens a Pebble store with the options options returns; a cache in
// them is released after the open.
//
// It works around Pebble's Open being unsafe to fail halfway. The flush of
// the replayed WAL, which Open waits for, schedules compactions, and an Open
// that then fails (a new WAL that cannot be created, an OPTIONS file that
// cannot be written) tears down its table cache under them: a background
// goroutine panics. So compactions are granted by a scheduler of ours that
// grants nothing until Open has returned successfully.
func Open(dir string, options func() *pebble.Options) (*pebble.DB, error) {
	po := options()
	s := &scheduler{}
	if !po.ReadOnly {
		po.Experimental.CompactionScheduler = s
	}
	db, err := pebble.Open(dir, po)
	if po.Cache != nil {
		po.Cache.Unref()
	}
	if err != nil {
		return nil, err
	}
	s.opened()
	return db, nil
}

// grantInterval is how often the scheduler looks for compactions it can
// grant besides when one ends or a flush completes, as Pebble's default
// scheduler does.
const grantInterval = 100 * time.Millisecond

// scheduler is Pebble's default compaction scheduler (a concurrency limit
// the DB sets) with a gate: it grants nothing until opened. Pebble's
// default cannot be wrapped (its constructor is unexported).
type scheduler struct {
	db pebble.DBForCompaction

	mu           sync.Mutex
	granting     sync.Cond // signalled when isGranting turns false
	isGranting   bool
	open, closed bool
	running      int
	poke         chan struct{}
	stop         chan struct{}
	stopped      chan struct{}
}

var _ pebble.CompactionScheduler = (*scheduler)(nil)

// Register is called by Open; the granter starts only when Open succeeds,
// so a failed Open leaves no goroutine behind.
func (s *scheduler) Register(_ int, db pebble.DBForCompaction) {
	s.db = db
	s.granting.L = &s.mu
}

func (s *scheduler) opened() {
	if s.db == nil {
		return // read-only, or never registered
	}
	s.mu.Lock()
	s.open = true
	s.poke, s.stop, s.stopped = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	s.mu.Unlock()
	go s.granter()
	s.UpdateGetAllowedWithoutPermission()
}

func (s *scheduler) Unregister() {
	s.mu.Lock()
	stop, stopped := s.stop, s.stopped
	s.closed = true
	for s.isGranting {
		s.granting.Wait()
	}
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		<-stopped
	}
}

func (s *scheduler) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open || s.closed || s.db.GetAllowedWithoutPermission() <= s.running {
		return false, nil
	}
	s.running++
	return true, s
}

func (s *scheduler) UpdateGetAllowedWithoutPermission() {
	s.mu.Lock()
	poke := s.poke
	s.mu.Unlock()
	if poke != nil {
		select {
		case poke <- struct{}{}:
		default:
		}
	}
}

// The grant handle: only Done matters.
func (s *scheduler) Started()                                          {}
func (s *scheduler) MeasureCPU(pebble.CompactionGoroutineKind)         {}
func (s *scheduler) CumulativeStats(pebble.CompactionGrantHandleStats) {}

func (s *scheduler) Done() {
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	s.grant()
}

func (s *scheduler) granter() {
	defer close(s.stopped)
	t := time.NewTicker(grantInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.poke:
		case <-s.stop:
			return
		}
		s.grant()
	}
}

// grant hands out what the DB allows to its waiting compactions. It calls
// into the DB without holding mu (the DB's locks come first).
func (s *scheduler) grant() {
	s.mu.Lock()
	for s.isGranting {
		s.granting.Wait()
	}
	if !s.open || s.closed {
		s.mu.Unlock()
		return
	}
	s.isGranting = true
	free := s.db.GetAllowedWithoutPermission() - s.running
	s.mu.Unlock()
	for ; free > 0; free-- {
		if waiting, _ := s.db.GetWaitingCompaction(); !waiting || !s.db.Schedule(s) {
			break
		}
		s.mu.Lock()
		s.running++
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.isGranting = false
	s.granting.Broadcast()
	s.mu.Unlock()
}
