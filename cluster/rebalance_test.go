package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/rafttest"
)

// join starts one more host, not a founder, and adds it to the directory
// through the directory's leader, as `queen serve --join` does on a
// cluster whose groups are on R of N nodes; it returns its index.
func (c *hosts) join() int {
	c.t.Helper()
	id := fmt.Sprintf("n%d", len(c.peers)+1)
	addr := rafttest.FreeAddrs(c.t, 1)[0]
	c.mu.Lock()
	c.peers = append(c.peers, raft.Peer{ID: id, Addr: addr})
	c.dirs = append(c.dirs, filepath.Join(filepath.Dir(c.dirs[0]), id))
	c.h = append(c.h, nil)
	c.mu.Unlock()
	i := len(c.peers) - 1
	c.start(i)
	c.relayInProcess()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error = raft.ErrNoLeader
		for _, h := range c.h {
			if h != nil && h.Group(raft.Directory).Status().Role == "leader" {
				err = h.JoinGroup(raft.Directory, id, addr, false)
				break
			}
		}
		if err == nil {
			return i
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("join %s to the directory: %v", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// spread waits until every running host's directory records each data
// group with r voters, all on running hosts (not down), no node a voter of
// more groups than another plus one, and every running host a voter of
// some group; it returns the voters each node has.
func (c *hosts) spread(r int, down string) map[string]int {
	c.t.Helper()
	var per map[string]int
	var last string
	waitForLong(c.t, "the groups to spread evenly over the running hosts", 90*time.Second, func() bool {
		per = map[string]int{}
		for i, h := range c.h {
			if h != nil {
				per[c.peers[i].ID] = 0
			}
		}
		// Every running host's directory says the same.
		first := ""
		for _, h := range c.h {
			if h == nil {
				continue
			}
			l := h.Layout()
			last = fmt.Sprintf("%+v", l.Groups[1:])
			if first == "" {
				first = last
			}
			if last != first {
				return false
			}
			for _, g := range l.Groups[1:] {
				if len(g.Members) != r || g.Leader == "" || slices.Contains(g.Members, down) {
					return false
				}
			}
		}
		for _, g := range c.running().Layout().Groups[1:] {
			for _, m := range g.Members {
				per[m]++
			}
		}
		lo, hi := 1<<30, 0
		for _, k := range per {
			lo, hi = min(lo, k), max(hi, k)
		}
		return lo > 0 && hi-lo <= 1
	})
	c.t.Logf("voters per node %v (layout %s)", per, last)
	return per
}

// again runs an idempotent command (a configure, a placement) through h
// as patient does, and also retries it after an unknown outcome: applied
// twice, it changes nothing.
func (c *hosts) again(h *cluster.Host, cmd engine.Command) (engine.Result, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := c.forwarded(h, cmd)
		if err == nil || !raft.Transient(err) || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// place places queue in group g through host 0, retrying what an
// election answers (a placement is first-wins: a repeat changes nothing).
func (c *hosts) place(queue string, g uint32) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := c.h[0].Place(ctxT(c.t), queue, g)
		if err == nil && got == g {
			return
		}
		if (err != nil && !raft.Transient(err)) || (err == nil && got != g) || time.Now().After(deadline) {
			c.t.Fatalf("place %s in %d: %d, %v", queue, g, got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *hosts) running() *cluster.Host {
	for _, h := range c.h {
		if h != nil {
			return h
		}
	}
	return nil
}

func waitForLong(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pushLoad pushes through every running host in turn, one message a
// request, until done is called, retrying what may succeed later; done
// returns the transaction ids answered queued or duplicate.
func pushLoad(t *testing.T, c *hosts, queues []string) (done func() []string) {
	done, _ = pushLoadCounted(t, c, queues)
	return done
}

// pushLoadRunning is pushLoad that returns only once some pushes have been
// answered: the change a test makes next is made under load.
func pushLoadRunning(t *testing.T, c *hosts, queues []string) (done func() []string) {
	done, count := pushLoadCounted(t, c, queues)
	waitForLong(t, "the load to be answered", 30*time.Second, func() bool { return count() >= 20 })
	return done
}

// pushLoadCounted is pushLoad with the count of pushes answered so far.
func pushLoadCounted(t *testing.T, c *hosts, queues []string) (done func() []string, count func() int) {
	stop := make(chan struct{})
	var (
		mu    sync.Mutex
		acked []string
		wg    sync.WaitGroup
		seq   atomic.Int64
	)
	for w := range 2 {
		wg.Go(func() {
			for k := 0; k < 2000; k++ {
				select {
				case <-stop:
					return
				default:
				}
				var h *cluster.Host
				c.mu.Lock()
				for j := range c.h {
					if hh := c.h[(k+w+j)%len(c.h)]; hh != nil {
						h = hh
						break
					}
				}
				c.mu.Unlock()
				txn := fmt.Sprintf("w%d-%d", w, seq.Add(1))
				q := queues[k%len(queues)]
				r, err := c.patient(h, engine.PushCmd{Items: []engine.PushItem{{Queue: q, TransactionID: txn, Payload: []byte(`{}`)}}})
				if err != nil {
					continue // not acknowledged: may or may not be stored
				}
				if res := r.Value.([]engine.PushResult); res[0].Status == engine.Queued || res[0].Status == engine.Duplicate {
					mu.Lock()
					acked = append(acked, q+"/"+txn)
					mu.Unlock()
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	// A test that fails first stops the load before its hosts close.
	var once sync.Once
	halt := func() { once.Do(func() { close(stop) }) }
	t.Cleanup(func() { halt(); wg.Wait() })
	return func() []string {
			halt()
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(acked)
		}, func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(acked)
		}
}

// storedVia drains each queue through host h (a consumer group of its
// own, acked batch by batch) and returns queue/txn of every message,
// failing on a message delivered twice unless a pop or an ack was
// uncertain (its messages come again once their short lease ends).
func storedVia(t *testing.T, c *hosts, h *cluster.Host, queues []string) []string {
	t.Helper()
	var out []string
	uncertain := 0
	const lease = time.Second // the drain's pops' LeaseSeconds
	for _, q := range queues {
		deadline := time.Now().Add(60 * time.Second)
		// A pop that failed uncertain may have leased messages: they come
		// back once its lease has ended, so an empty answer after one is
		// checked again past the lease. Otherwise (pops are proposed, so
		// linearizable, and the load has stopped) one empty answer is the
		// end of the queue.
		recheck := false
		for {
			if time.Now().After(deadline) {
				t.Fatalf("drain %s: not empty after a minute", q)
			}
			r, err := c.forwarded(h, engine.PopCmd{Queue: q, Group: "check", Batch: 500, Partitions: 1, LeaseSeconds: int64(lease / time.Second)})
			if err != nil {
				if !raft.NotApplied(err) {
					uncertain++
					recheck = true
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			pop := r.Value.(engine.PopResult)
			if len(pop.Messages) == 0 {
				if !recheck {
					break
				}
				recheck = false
				time.Sleep(lease + 500*time.Millisecond)
				continue
			}
			var items []engine.AckItem
			for _, m := range pop.Messages {
				out = append(out, q+"/"+m.TransactionID)
				items = append(items, engine.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID,
					Group: "check", Lease: pop.LeaseID, Status: cursor.Completed})
			}
			res, err := raft.Propose[[]engine.AckResult](ctxT(t), h, engine.AckCmd{Items: items})
			if err != nil || slices.ContainsFunc(res, func(a engine.AckResult) bool { return !a.Success }) {
				uncertain++
			}
		}
	}
	slices.Sort(out)
	if d := slices.Compact(slices.Clone(out)); len(d) != len(out) && uncertain == 0 {
		t.Fatalf("%d messages delivered twice, no pop or ack uncertain", len(out)-len(d))
	}
	return slices.Compact(out)
}

// checkAllStored fails unless every acknowledged push was delivered.
func checkAllStored(t *testing.T, acked, stored []string) {
	t.Helper()
	missing := 0
	for _, a := range acked {
		if _, ok := slices.BinarySearch(stored, a); !ok {
			missing++
		}
	}
	if missing > 0 || len(acked) == 0 {
		var which []string
		for _, a := range acked {
			if _, ok := slices.BinarySearch(stored, a); !ok {
				which = append(which, a)
			}
		}
		t.Fatalf("%d of %d acknowledged pushes were not delivered: %v", missing, len(acked), which)
	}
	t.Logf("%d acknowledged pushes, all delivered once (%d stored)", len(acked), len(stored))
}

// TestHost_JoinAddsCapacity: four hosts, four groups of three voters; a
// fifth joins the directory under load and the directory's leader moves
// replicas onto it until no node holds more than one replica more than
// another (ceil(G·R/N) = 3). Nothing acknowledged is lost.
func TestHost_JoinAddsCapacity(t *testing.T) {
	t.Parallel()
	c := openSpreadHosts(t, 4, 4, 3)
	queues := []string{"a", "b", "c", "d"}
	for g, q := range queues {
		c.place(q, uint32(g+1))
	}
	done := pushLoadRunning(t, c, queues)
	n5 := c.join()
	per := c.spread(3, "")
	acked := done()
	if per[c.peers[n5].ID] < 2 {
		t.Fatalf("the new node is a voter of %d groups, want 2 or 3: %v", per[c.peers[n5].ID], per)
	}
	for id, k := range per {
		if k > 3 {
			t.Fatalf("node %s is a voter of %d groups, above ceil(G·R/N) = 3: %v", id, k, per)
		}
	}
	checkAllStored(t, acked, storedVia(t, c, c.h[n5], queues))
	retired := c.holdOnlyPlaced()
	if len(retired) == 0 {
		t.Fatal("no host lost a replica to the new node")
	}
	// A host restarted after retiring a replica does not open it again.
	i := retired[0].host
	c.stop(i)
	h := c.start(i)
	c.spread(3, "")
	if h.Group(retired[0].group) != nil {
		t.Fatalf("%s opened its retired replica of group %d again after a restart", c.peers[i].ID, retired[0].group)
	}
}

// holdOnlyPlaced waits until every running host holds a replica of exactly
// the data groups the directory lists it a voter of, and no files of the
// others (their engine gone: placed.go, "Retiring a replica"); it returns
// the replicas retired, by host and group.
func (c *hosts) holdOnlyPlaced() []struct {
	host  int
	group uint32
} {
	c.t.Helper()
	var retired []struct {
		host  int
		group uint32
	}
	last := ""
	waitForLong(c.t, "every host to hold only the replicas placed on it", 60*time.Second, func() bool {
		retired = retired[:0]
		for i, h := range c.h {
			if h == nil {
				continue
			}
			l := h.Layout()
			for _, lg := range l.Groups[1:] {
				listed := slices.Contains(lg.Members, c.peers[i].ID)
				dir := filepath.Join(c.dirs[i], "groups", fmt.Sprint(lg.ID), "engine")
				if lg.ID == 1 {
					dir = filepath.Join(c.dirs[i], "engine")
				}
				manifests, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
				if held := h.Group(lg.ID) != nil; held != listed || held != (len(manifests) > 0) {
					if now := fmt.Sprintf("%s group %d: listed %v, replica %v, engine files %v", c.peers[i].ID, lg.ID, listed, held, len(manifests) > 0); now != last {
						c.t.Logf("waiting: %s", now) // the state a timeout ends in is the last logged
						last = now
					}
					return false
				}
				// A group this host once held leaves its emptied directory,
				// one it never held none. Retiring (raft.Store.RetireGroup)
				// removes engine/ and snapshots/ and makes them again: until
				// both are back, empty, the group's directory says neither,
				// so a host seen part way is waited for, not taken for one
				// that never held the group.
				if gdir := filepath.Dir(dir); !listed && lg.ID != 1 && exists(gdir) {
					if !emptyDir(dir) || !emptyDir(filepath.Join(gdir, "snapshots")) {
						if now := fmt.Sprintf("%s group %d: retiring, its directory not yet emptied", c.peers[i].ID, lg.ID); now != last {
							c.t.Logf("waiting: %s", now)
							last = now
						}
						return false
					}
					retired = append(retired, struct {
						host  int
						group uint32
					}{i, lg.ID})
				}
			}
		}
		return true
	})
	return retired
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// emptyDir reports whether dir is a directory with nothing in it.
func emptyDir(dir string) bool {
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) == 0
}

// TestHost_GrowsFromOneNode: a lone founder whose groups are to have
// three voters (queen serve's default with --groups): each group starts on
// it alone, gains a voter with each of the next two nodes that join, and
// once a fourth joins the twelve replicas spread three a node; nothing
// acknowledged on the way is lost.
func TestHost_GrowsFromOneNode(t *testing.T) {
	t.Parallel()
	c := openHostsOf(t, 1, 4, 3, func(o *raft.Options) {
		o.Versions, o.VersionInterval = allCurrent{}, 50*time.Millisecond
	})
	c.relayInProcess()
	c.leaders(nil)
	c.layoutRecorded(1)
	// A lone founder's layout is its own configuration before the
	// directory records anything: wait for the group count too.
	waitFor(t, "the directory to record the four groups", func() bool { return c.h[0].GroupCount() == 4 })
	queues := []string{"a", "b", "c", "d"}
	for g, q := range queues {
		c.place(q, uint32(g+1))
	}
	done := pushLoadRunning(t, c, queues)
	c.join()
	c.spread(2, "")
	c.join()
	c.spread(3, "")
	n4 := c.join()
	per := c.spread(3, "")
	acked := done()
	for id, k := range per {
		if k != 3 {
			t.Fatalf("node %s is a voter of %d groups, want ceil(G·R/N) = 3 each: %v", id, k, per)
		}
	}
	checkAllStored(t, acked, storedVia(t, c, c.h[n4], queues))
}

// TestHost_LostNodeIsReplaced: five hosts, four groups of three; one is
// stopped and its data directory deleted under load. Once its heartbeats
// have failed for ReplaceAfter, its replicas are re-created on the others
// (every group back to three voters, none on it), it leaves the
// directory, and nothing acknowledged is lost.
func TestHost_LostNodeIsReplaced(t *testing.T) {
	t.Parallel()
	c := openHostsOf(t, 5, 4, 3, func(o *raft.Options) {
		o.Versions, o.VersionInterval = allCurrent{}, 50*time.Millisecond
	}, func(c *hosts) { c.replaceAfter = time.Second })
	c.relayInProcess()
	c.leaders(nil)
	c.layoutRecorded(3)
	queues := []string{"a", "b", "c", "d"}
	for _, q := range queues {
		if _, err := c.again(c.h[0], engine.ConfigureCmd{Queue: q}); err != nil {
			t.Fatalf("configure %s: %v", q, err)
		}
	}
	// The victim: a voter of two groups, not the directory's leader.
	victim := -1
	l := c.h[0].Layout()
	for i, p := range c.peers {
		k := 0
		for _, g := range l.Groups[1:] {
			if slices.Contains(g.Members, p.ID) {
				k++
			}
		}
		if k >= 2 && c.h[i].Group(raft.Directory).Status().Role != "leader" {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("no victim in %+v", l.Groups)
	}
	done := pushLoadRunning(t, c, queues)
	id := c.peers[victim].ID
	c.stop(victim)
	if err := os.RemoveAll(c.dirs[victim]); err != nil {
		t.Fatal(err)
	}
	c.spread(3, id)
	waitForLong(t, "the lost node to leave the directory", 60*time.Second, func() bool {
		return !slices.Contains(c.running().Group(raft.Directory).Members(), id)
	})
	acked := done()
	checkAllStored(t, acked, storedVia(t, c, c.running(), queues))
}

// TestHost_DrainMovesReplicasBeforeTheNodeLeaves: five hosts, four groups
// of three. Draining a node moves each of its replicas to another node
// (every group keeps three voters throughout) before the directory removes
// it; nothing acknowledged is lost.
func TestHost_DrainMovesReplicasBeforeTheNodeLeaves(t *testing.T) {
	t.Parallel()
	c := openSpreadHosts(t, 5, 4, 3)
	queues := []string{"a", "b", "c", "d"}
	for _, q := range queues {
		if _, err := c.again(c.h[0], engine.ConfigureCmd{Queue: q}); err != nil {
			t.Fatalf("configure %s: %v", q, err)
		}
	}
	leaving := -1
	for i, h := range c.h {
		if h.Group(raft.Directory).Status().Role != "leader" && slices.Contains(h.Layout().Groups[1].Members, c.peers[i].ID) {
			leaving = i
		}
	}
	id := c.peers[leaving].ID
	if !c.h[0].Drainable(id) {
		t.Fatalf("%s is not drainable from five nodes with R = 3", id)
	}
	// Every group keeps three voters while the replicas move.
	var fewest atomic.Int64
	fewest.Store(3)
	watching := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-watching:
				return
			case <-time.After(10 * time.Millisecond):
			}
			for _, g := range c.h[0].Layout().Groups[1:] {
				if n := int64(len(g.Members)); n < fewest.Load() {
					fewest.Store(n)
				}
			}
		}
	})
	done := pushLoad(t, c, queues)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.h[(leaving+1)%5].Drain(ctx, id); err != nil {
		t.Fatalf("drain %s: %v", id, err)
	}
	close(watching)
	wg.Wait()
	for _, g := range c.h[0].Layout().Groups[1:] {
		if slices.Contains(g.Members, id) || len(g.Members) != 3 {
			t.Fatalf("after the drain group %d has voters %v", g.ID, g.Members)
		}
	}
	if n := fewest.Load(); n < 3 {
		t.Fatalf("a group had %d voters during the drain", n)
	}
	acked := done()
	c.stop(leaving)
	checkAllStored(t, acked, storedVia(t, c, c.running(), queues))
	// Of the four left, one can still be drained: three others remain
	// for R = 3.
	if !c.running().Drainable(c.peers[(leaving+1)%5].ID) {
		t.Fatal("a node of four is not drainable with R = 3")
	}
}

// TestHost_RemovedNodeServesNothingWhenItReturns: a host stopped for
// longer than ReplaceAfter is replaced and removed; started again on its
// old data it hears no directory leader, and once ReplaceAfter has passed
// it is cut off: it serves no group from its stale replicas.
func TestHost_RemovedNodeServesNothingWhenItReturns(t *testing.T) {
	t.Parallel()
	c := openHostsOf(t, 5, 4, 3, func(o *raft.Options) {
		o.Versions, o.VersionInterval = allCurrent{}, 50*time.Millisecond
	}, func(c *hosts) { c.replaceAfter = time.Second })
	c.relayInProcess()
	c.leaders(nil)
	c.layoutRecorded(3)
	victim := -1
	for i, h := range c.h {
		if h.Group(raft.Directory).Status().Role != "leader" {
			victim = i
		}
	}
	id := c.peers[victim].ID
	if c.h[victim].CutOff() {
		t.Fatal("a member is cut off")
	}
	c.stop(victim)
	c.spread(3, id)
	waitForLong(t, "the stopped node to leave the directory", 60*time.Second, func() bool {
		return !slices.Contains(c.running().Group(raft.Directory).Members(), id)
	})
	h := c.start(victim)
	c.relayInProcess()
	waitForLong(t, "the returning node to be cut off", 30*time.Second, h.CutOff)
	// Its stale records still name it a voter; it hosts none of them.
	for _, g := range h.Layout().Groups[1:] {
		if g.ID != 0 && slices.Contains(g.Members, id) && h.Group(g.ID).Status().Role == "leader" {
			t.Fatalf("the removed node leads group %d", g.ID)
		}
	}
	// The others are unaffected.
	for i, o := range c.h {
		if i != victim && o != nil && o.CutOff() {
			t.Fatalf("member %s is cut off", c.peers[i].ID)
		}
	}
}

// TestHost_ARetiredReplicaIsOpenedAgainWhenPlacedAgain: four hosts, four
// groups of three; a fifth joins under load and the founders retire the
// replicas that moved to it (placed.go), then it leaves and the replicas
// move back: the founders open again, empty, groups they retired (their
// retired mark cleared, group 1's frameless connections accepted again)
// and catch up. Nothing acknowledged is lost.
func TestHost_ARetiredReplicaIsOpenedAgainWhenPlacedAgain(t *testing.T) {
	t.Parallel()
	c := openSpreadHosts(t, 4, 4, 3)
	queues := []string{"a", "b", "c", "d"}
	for g, q := range queues {
		c.place(q, uint32(g+1))
	}
	done := pushLoadRunning(t, c, queues)
	n5 := c.join()
	c.spread(3, "")
	retired := c.holdOnlyPlaced()
	if len(retired) == 0 {
		t.Fatal("no host lost a replica to the new node")
	}
	id := c.peers[n5].ID
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := c.h[0].Drain(ctx, id); err != nil {
		t.Fatalf("drain %s: %v", id, err)
	}
	c.stop(n5)
	c.spread(3, id)
	acked := done()
	c.holdOnlyPlaced()
	back := 0
	for _, r := range retired {
		if c.h[r.host].Group(r.group) != nil {
			back++
		}
	}
	if back == 0 {
		t.Fatalf("no retired replica was placed again on its host (retired %v)", retired)
	}
	checkAllStored(t, acked, storedVia(t, c, c.h[0], queues))
}
