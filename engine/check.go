package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"

	"github.com/queenmq/queen/engine/keyspace"
	"github.com/queenmq/queen/engine/segment"
)

// Check walks the whole store and verifies the engine's invariants: the
// in-memory model equals what is on disk, every partition's segments are
// contiguous from its oldest retained offset to its last, every segment
// decodes, the transaction-id index points at the frames it names, cursors
// and leases are consistent, every dead-letter row and index entry has its
// counterparts, and a row whose message is still retained is a faithful
// snapshot of its frame (payload and sealed bit). It returns every violation found, joined; each wraps
// ErrCorrupt. Tests run it after every engine test; operators can run it on
// a stopped node's data.
func (e *Engine) Check() error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return err
	}
	c := &checker{e: e}
	c.memoryMatchesDisk()
	for _, q := range e.sortedQueues() {
		for _, p := range q.parts {
			c.partition(p)
		}
	}
	c.orphans()
	c.leases()
	c.deadLetters()
	c.streams()
	c.traces()
	return errors.Join(c.errs...)
}

type checker struct {
	e    *Engine
	errs []error
}

func (c *checker) failf(format string, args ...any) {
	if len(c.errs) < 50 {
		c.errs = append(c.errs, fmt.Errorf("%w: check: %s", ErrCorrupt, fmt.Sprintf(format, args...)))
	}
}

// memoryMatchesDisk loads a second model from disk and compares.
func (c *checker) memoryMatchesDisk() {
	disk := &Engine{opts: c.e.opts, db: c.e.db, cache: newSegmentCache(0, 0)}
	if err := disk.load(); err != nil {
		c.failf("load: %v", err)
		return
	}
	if disk.applied != c.e.applied {
		c.failf("applied index: memory %d, disk %d", c.e.applied, disk.applied)
	}
	if len(disk.queues) != len(c.e.queues) {
		c.failf("queues: memory %d, disk %d", len(c.e.queues), len(disk.queues))
	}
	for name, q := range c.e.queues {
		dq := disk.queues[name]
		if dq == nil {
			c.failf("queue %q in memory only", name)
			continue
		}
		if !reflect.DeepEqual(q.rec, dq.rec) || q.config != dq.config {
			c.failf("queue %q: memory %+v %v, disk %+v %v", name, q.rec, q.config, dq.rec, dq.config)
		}
		if len(q.subs) != len(dq.subs) {
			c.failf("queue %q subscriptions: memory %d, disk %d", name, len(q.subs), len(dq.subs))
		}
		for g, s := range q.subs {
			if ds := dq.subs[g]; ds == nil || ds.rec != s.rec {
				c.failf("subscription %s/%s differs", name, g)
			}
		}
		if len(q.parts) != len(dq.parts) {
			c.failf("queue %q partitions: memory %d, disk %d", name, len(q.parts), len(dq.parts))
		}
	}
	for id, p := range c.e.parts {
		dp := disk.parts[id]
		if dp == nil {
			c.failf("partition %x in memory only", id)
			continue
		}
		if p.rec != dp.rec || p.q.name != dp.q.name {
			c.failf("partition %x: memory %+v, disk %+v", id, p.rec, dp.rec)
		}
		if len(p.cursors) != len(dp.cursors) {
			c.failf("partition %x cursors: memory %d, disk %d", id, len(p.cursors), len(dp.cursors))
		}
		for g, r := range p.cursors {
			if dr := dp.cursors[g]; dr == nil || dr.rec != r.rec {
				c.failf("cursor %x/%s differs: memory %+v", id, g, r.rec)
			}
		}
	}
}

// partition checks one partition's segments, index and cursors.
func (c *checker) partition(p *partition) {
	e := c.e
	it, err := e.segments(e.db, p.id)
	if err != nil {
		c.failf("partition %x: %v", p.id, err)
		return
	}
	defer it.close()
	expect := p.rec.Start
	var lastCreated, firstCreated int64
	frames := map[int64]segment.Frame{}
	for ok := it.first(); ok; ok = it.next() {
		v, err := it.it.ValueAndErr()
		if err != nil {
			c.failf("partition %x: read: %v", p.id, err)
			return
		}
		seg, err := segment.Decode(v)
		if err != nil {
			c.failf("partition %x: %v", p.id, err)
			return
		}
		h := seg.Header
		if h.Base != expect {
			c.failf("partition %x: segment at %d, expected %d", p.id, h.Base, expect)
		}
		if h.CreatedAt < lastCreated || h.CreatedAt > p.rec.LastWriteAt {
			c.failf("partition %x: segment %d createdAt %d out of order (last %d, partition %d)", p.id, h.Base, h.CreatedAt, lastCreated, p.rec.LastWriteAt)
		}
		if h.Base == p.rec.Start {
			firstCreated = h.CreatedAt
		}
		lastCreated = h.CreatedAt
		for i, f := range seg.Frames {
			frames[h.Base+int64(i)] = f
		}
		expect = h.Last() + 1
	}
	if err := it.err(); err != nil {
		c.failf("partition %x: %v", p.id, err)
		return
	}
	if expect != p.rec.Next {
		c.failf("partition %x: segments end at %d, next is %d", p.id, expect-1, p.rec.Next)
	}
	if firstCreated != p.rec.OldestAt {
		c.failf("partition %x: oldestAt %d, oldest segment created %d", p.id, p.rec.OldestAt, firstCreated)
	}
	var purgeFrom int64
	err = scanPrefix(e.db, keyspace.TxnExpiryPrefix(p.id), func(k, _ []byte) error {
		at, _, err := keyspace.ParseTxnExpiry(k)
		if purgeFrom == 0 {
			purgeFrom = at
		}
		return err
	})
	if err != nil {
		c.failf("partition %x txn expiry: %v", p.id, err)
	}
	if purgeFrom != p.rec.PurgeFrom {
		c.failf("partition %x: purgeFrom %d, oldest txn-expiry entry %d", p.id, p.rec.PurgeFrom, purgeFrom)
	}
	err = scanPrefix(e.db, keyspace.Txn(p.id, ""), func(k, v []byte) error {
		_, txn, err := keyspace.ParseTxn(k)
		if err != nil {
			return err
		}
		rec, err := keyspace.DecodeTxn(v)
		if err != nil {
			return err
		}
		if rec.Offset >= p.rec.Next {
			c.failf("txn %x/%q points past the log (%d >= %d)", p.id, txn, rec.Offset, p.rec.Next)
		} else if rec.Offset >= p.rec.Start {
			f := frames[rec.Offset]
			if string(f.TransactionID) != txn || f.MessageID != rec.MessageID {
				c.failf("txn %x/%q points at offset %d holding %q", p.id, txn, rec.Offset, f.TransactionID)
			}
		}
		return nil
	})
	if err != nil {
		c.failf("partition %x txn index: %v", p.id, err)
	}
	for _, problem := range partitionProblems(p) {
		c.failf("%s", problem)
	}
}

// orphans finds per-partition keys of partitions that do not exist.
func (c *checker) orphans() {
	for _, f := range []keyspace.Family{keyspace.FamilySegment, keyspace.FamilyTxn, keyspace.FamilyCursor, keyspace.FamilyTxnExpiry, keyspace.FamilyTrace} {
		err := c.e.scan(f, func(k, _ []byte) error {
			if len(k) < 17 {
				c.failf("short key %x", k)
				return nil
			}
			var id ID
			copy(id[:], k[1:17])
			if _, arriving := c.e.importParts[id]; arriving {
				return nil
			}
			if c.e.parts[id] == nil {
				c.failf("key %x of missing partition", k)
				return errStopScan
			}
			return nil
		})
		if err != nil && err != errStopScan {
			c.failf("scan family %x: %v", f, err)
		}
	}
}

var errStopScan = errors.New("stop")

// leases checks the lease index against the cursor rows.
func (c *checker) leases() {
	n := 0
	for lease, refs := range c.e.leases {
		for _, ref := range refs {
			r := ref.p.cursors[ref.group]
			if r == nil || r.rec.Lease != lease || c.e.parts[ref.p.id] != ref.p {
				c.failf("lease index entry %x -> %x/%s is stale", lease, ref.p.id, ref.group)
			}
			n++
		}
	}
	held := 0
	for _, p := range c.e.parts {
		for _, r := range p.cursors {
			if r.rec.Lease != (ID{}) {
				held++
			}
		}
	}
	if n != held {
		c.failf("lease index has %d entries, cursors hold %d leases", n, held)
	}
}

// deadLetterFrame checks a row whose message is still retained against its
// frame: the row is a snapshot of it, so message id, payload and sealed bit
// agree. A row whose message retention or a queue delete removed has
// nothing to be compared with.
func (c *checker) deadLetterFrame(row keyspace.RowKey, rec *keyspace.DeadLetterRecord) {
	p := c.e.parts[rec.PartitionID]
	if p == nil || rec.Offset < p.rec.Start || rec.Offset >= p.rec.Next {
		return
	}
	f, _, found, err := c.e.readOne(c.e.db, p, Offset(rec.Offset))
	switch {
	case err != nil:
		c.failf("dead letter %x: read its frame: %v", row, err)
	case !found:
		c.failf("dead letter %x: no frame at retained offset %d", row, rec.Offset)
	case f.MessageID != rec.MessageID:
		c.failf("dead letter %x: offset %d holds message %x, the row names %x", row, rec.Offset, f.MessageID, rec.MessageID)
	case f.Sealed != rec.Sealed || !bytes.Equal(f.Payload, rec.Payload):
		c.failf("dead letter %x: the snapshot's payload or sealed bit differs from its frame", row)
	}
}

// deadLetters checks every row against its two index entries and back.
func (c *checker) deadLetters() {
	db := c.e.db
	rows := 0
	err := c.e.scan(keyspace.FamilyDLQ, func(k, v []byte) error {
		row, err := keyspace.ParseDLQ(k)
		if err != nil {
			return err
		}
		rec, err := keyspace.DecodeDeadLetter(v)
		if err != nil {
			return err
		}
		rows++
		c.deadLetterFrame(row, &rec)
		for _, ik := range [][]byte{keyspace.DLQAddr(rec.PartitionID, rec.TransactionID, row), keyspace.DLQQueue(rec.Queue, rec.Group, row)} {
			if found, err := get(db, ik, func([]byte) error { return nil }); err != nil || !found {
				c.failf("dead letter %x: index %x: found %v, %v", row, ik, found, err)
			}
		}
		return nil
	})
	if err != nil {
		c.failf("dead letters: %v", err)
	}
	for _, f := range []keyspace.Family{keyspace.FamilyDLQAddr, keyspace.FamilyDLQQueue} {
		n := 0
		err := c.e.scan(f, func(k, _ []byte) error {
			row, err := keyspace.RowKeyOfIndex(k)
			if err != nil {
				return err
			}
			n++
			d, found, err := getDeadLetter(db, row)
			if err != nil {
				return err
			}
			if !found {
				c.failf("index %x names missing row", k)
				return nil
			}
			var want []byte
			if f == keyspace.FamilyDLQAddr {
				want = keyspace.DLQAddr(d.PartitionID, d.TransactionID, row)
			} else {
				want = keyspace.DLQQueue(d.Queue, d.Group, row)
			}
			if !bytes.Equal(k, want) {
				c.failf("index %x does not match its row", k)
			}
			return nil
		})
		if err != nil {
			c.failf("dead-letter index: %v", err)
		}
		if n != rows {
			c.failf("dead-letter index family %x has %d entries for %d rows", f, n, rows)
		}
	}
}

// Digest returns a SHA-256 over every key and value of the store, in key
// order. Replicas that applied the same log have the same digest: it is how
// cluster tests (and operators) compare them.
func (e *Engine) Digest() ([32]byte, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	var sum [32]byte
	if err := e.usable(); err != nil {
		return sum, err
	}
	h := sha256.New()
	var n [8]byte
	it, err := e.db.NewIter(nil)
	if err != nil {
		return sum, err
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return sum, err
		}
		binary.BigEndian.PutUint64(n[:], uint64(len(k)))
		h.Write(n[:])
		h.Write(k)
		binary.BigEndian.PutUint64(n[:], uint64(len(v)))
		h.Write(n[:])
		h.Write(v)
	}
	copy(sum[:], h.Sum(nil))
	return sum, it.Close()
}

// streams checks the stream families: every state row with a windowEnd has
// its ripeness entry and every entry its row, and no key belongs to a query
// that is not registered.
func (c *checker) streams() {
	e := c.e
	registered := map[ID]bool{}
	err := e.scan(keyspace.FamilyStreamQueryID, func(k, _ []byte) error {
		var id ID
		copy(id[:], k[1:])
		registered[id] = true
		return nil
	})
	if err != nil {
		c.failf("scan stream queries: %v", err)
	}
	owner := func(k []byte) (q, p ID) {
		copy(q[:], k[1:17])
		copy(p[:], k[17:33])
		return q, p
	}
	ripe := map[string]bool{}
	err = e.scan(keyspace.FamilyStreamRipe, func(k, _ []byte) error {
		bits, key, err := keyspace.ParseStreamRipe(k)
		if err != nil {
			return err
		}
		q, p := owner(k)
		if !registered[q] {
			c.failf("stream ripeness entry of unregistered query %x", q)
		}
		ripe[string(keyspace.StreamState(q, p, key))+fmt.Sprint(bits)] = true
		return nil
	})
	if err != nil {
		c.failf("scan stream ripeness index: %v", err)
	}
	err = e.scan(keyspace.FamilyStreamState, func(k, v []byte) error {
		rec, err := keyspace.DecodeStreamState(v)
		if err != nil {
			return err
		}
		q, _ := owner(k)
		if !registered[q] {
			c.failf("stream state row of unregistered query %x", q)
		}
		if rec.HasWindowEnd {
			id := string(k) + fmt.Sprint(keyspace.OrderedFloat(rec.WindowEnd))
			if !ripe[id] {
				c.failf("stream state row %x has windowEnd %v but no ripeness entry", k, rec.WindowEnd)
			}
			delete(ripe, id)
		}
		return nil
	})
	if err != nil {
		c.failf("scan stream state: %v", err)
	}
	if len(ripe) > 0 {
		c.failf("%d stream ripeness entries without their state row", len(ripe))
	}
}

// traces checks that every trace record belongs to a retained message and
// is indexed under each of its names, and that every index entry has its
// record.
func (c *checker) traces() {
	e := c.e
	entries := map[string]bool{}
	err := e.scan(keyspace.FamilyTraceName, func(k, _ []byte) error {
		entries[string(k)] = true
		return nil
	})
	if err != nil {
		c.failf("scan trace names: %v", err)
	}
	err = e.scan(keyspace.FamilyTrace, func(k, v []byte) error {
		part, off, id, err := keyspace.ParseTrace(k)
		if err != nil {
			return err
		}
		tr, err := keyspace.DecodeTrace(v)
		if err != nil {
			return err
		}
		if _, arriving := e.importParts[part]; arriving {
			// an import under way (move.go): its partitions are not in the model yet
		} else if p := e.parts[part]; p == nil || off < p.rec.Start || off >= p.rec.Next {
			c.failf("trace %x of offset %d of %x, which holds no such message", id, off, part)
		}
		for _, name := range tr.Names {
			k := string(keyspace.TraceName(name, tr.CreatedAt, id))
			if !entries[k] {
				c.failf("trace %x is not indexed under %q", id, name)
			}
			delete(entries, k)
		}
		return nil
	})
	if err != nil {
		c.failf("scan traces: %v", err)
	}
	if len(entries) > 0 {
		c.failf("%d trace name entries without their record", len(entries))
	}
}
