package engine_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
	"github.com/queenmq/queen/engine/keyspace"
)

// moveFixture is a store holding the queue to move ("orders": three
// partitions, ~300 messages of mixed sizes, two consumer groups, one of
// them holding a live lease, dead letters, traces) and a bystander
// ("other").
type moveFixture struct {
	h        *enginetest.Harness
	parts    map[string]engine.ID // orders' partitions by name
	lease    engine.PopResult     // audit's live lease on p1
	traced   []engine.PushResult  // messages with traces
	orderTxn string               // a transaction id pushed to orders/p0
}

func newMoveFixture(t *testing.T) *moveFixture {
	t.Helper()
	h := enginetest.MustOpen(t)
	f := &moveFixture{h: h, parts: map[string]engine.ID{}}
	h.Configure(engine.ConfigureCmd{Queue: "orders", Namespace: "shop", NamespaceSet: true,
		Set: []engine.OptionValue{{Option: engine.OptRetryLimit, Value: 2}}})
	for i := range 300 {
		part := fmt.Sprintf("p%d", i%3)
		size := []int{8, 300, 5000, 40}[i%4]
		if i%50 == 7 {
			size = 70_000 // larger than a chunk: a chunk of its own
		}
		payload := fmt.Sprintf(`"%s"`, noise(i, size))
		r := h.PushOne("orders", part, fmt.Sprintf("t-%d", i), payload)
		f.parts[part] = r.PartitionID
		if i%40 == 3 {
			f.traced = append(f.traced, r)
		}
		if i%20 == 0 {
			h.PushOne("other", "", fmt.Sprintf("o-%d", i), `{"x":1}`)
		}
	}
	f.orderTxn = "t-0"
	for n, r := range f.traced {
		names := []string{"order-" + r.TransactionID}
		if n%2 == 0 {
			names = append(names, "tenant-7")
		}
		enginetest.Must[engine.ID](h, engine.TraceCmd{PartitionID: r.PartitionID, TransactionID: r.TransactionID,
			Group: "billing", EventType: "step", Data: []byte(`{"n":1}`), Names: names})
	}
	// billing consumes and acks some of every partition; two of its
	// messages fail into the dead-letter queue.
	for _, part := range []string{"p0", "p1", "p2"} {
		res := popPart(h, "orders", part, "billing", 15)
		h.Ack(enginetest.AckMessages(res, "completed")...)
	}
	for txn, part := range map[string]string{"t-60": "p0", "t-61": "p1"} {
		if _, err := h.MoveToDLQ(f.parts[part], txn, "billing", "poison"); err != nil {
			t.Fatalf("move %s to the DLQ: %v", txn, err)
		}
	}
	other := h.Pop(engine.PopCmd{Queue: "other", Group: "g", Batch: 2})
	if _, err := h.MoveToDLQ(other.Messages[0].PartitionID, other.Messages[0].TransactionID, "g", "bad"); err != nil {
		t.Fatal(err)
	}
	// audit holds a live lease on p1.
	f.lease = popPart(h, "orders", "p1", "audit", 5)
	if len(f.lease.Messages) != 5 {
		t.Fatalf("audit popped %d messages", len(f.lease.Messages))
	}
	return f
}

// exportAll exports queue from h in chunks of at most maxBytes.
func exportAll(t testing.TB, h *enginetest.Harness, queue string, maxBytes int) []engine.QueueChunk {
	t.Helper()
	s, err := h.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var chunks []engine.QueueChunk
	var from []byte
	for {
		c, err := s.ExportQueue(queue, from, maxBytes)
		if err != nil {
			t.Fatalf("export %s: %v", queue, err)
		}
		chunks = append(chunks, c)
		if c.Last {
			return chunks
		}
		if len(c.KVs) == 0 {
			t.Fatalf("export %s: empty chunk that is not the last", queue)
		}
		from = c.Next
	}
}

func importCmd(queue string, epoch uint64, seq int, c engine.QueueChunk) engine.ImportQueueCmd {
	return engine.ImportQueueCmd{Group: 2, Queue: queue, ID: c.ID, Epoch: epoch, Seq: uint32(seq), Last: c.Last, KVs: c.KVs}
}

func importAll(t *testing.T, h *enginetest.Harness, queue string, chunks []engine.QueueChunk) {
	t.Helper()
	for i, c := range chunks {
		res := enginetest.Must[engine.ImportResult](h, importCmd(queue, 1, i, c))
		if res.Next != uint32(i+1) || res.Done != c.Last {
			t.Fatalf("import %s chunk %d: %+v", queue, i, res)
		}
	}
}

// withoutMeta drops the meta keys (applied index, format version) of a dump.
func withoutMeta(kvs []enginetest.KV) []enginetest.KV {
	var out []enginetest.KV
	for _, kv := range kvs {
		if keyspace.Family(kv.Key[0]) != keyspace.FamilyMeta {
			out = append(out, kv)
		}
	}
	return out
}

// sameQueue compares what the engines answer about queue.
func sameQueue(t *testing.T, a, b *enginetest.Harness, queue string) {
	t.Helper()
	qa, err := a.Queue(queue)
	if err != nil {
		t.Fatal(err)
	}
	qb, err := b.Queue(queue)
	if err != nil {
		t.Fatalf("target: %v", err)
	}
	if !reflect.DeepEqual(qa, qb) {
		t.Fatalf("queue info differs:\nsource %+v\ntarget %+v", qa, qb)
	}
	total := 0
	for _, p := range qa.Partitions {
		ma, _, err := a.Messages(p.ID, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		mb, _, err := b.Messages(p.ID, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ma, mb) {
			t.Fatalf("partition %s: %d messages in the source, %d in the target, or they differ", p.Name, len(ma), len(mb))
		}
		total += len(ma)
	}
	if total == 0 {
		t.Fatalf("queue %s: no messages to compare", queue)
	}
	da, na, err := a.ListDLQ(engine.DLQFilter{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	db, nb, err := b.ListDLQ(engine.DLQFilter{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	if na == 0 || na != nb || !reflect.DeepEqual(da, db) {
		t.Fatalf("dead letters: %d in the source, %d in the target, or they differ", na, nb)
	}
}

func sameTraces(t *testing.T, a, b *enginetest.Harness, traced []engine.PushResult) {
	t.Helper()
	for _, r := range traced {
		ta, err := a.Traces(r.PartitionID, r.TransactionID)
		if err != nil {
			t.Fatal(err)
		}
		tb, err := b.Traces(r.PartitionID, r.TransactionID)
		if err != nil {
			t.Fatal(err)
		}
		if len(ta) != 1 || !reflect.DeepEqual(ta, tb) {
			t.Fatalf("traces of %s: source %+v, target %+v", r.TransactionID, ta, tb)
		}
	}
	na, ta, err := a.TracesByName("tenant-7", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	nb, tb, err := b.TracesByName("tenant-7", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	if tb == 0 || ta != tb || !reflect.DeepEqual(na, nb) {
		t.Fatalf("traces named tenant-7: source %d, target %d", ta, tb)
	}
}

// TestMove_ExportImportExact moves a queue from one engine to another
// through small chunks and compares everything a client can see, and every
// key: the target holds the very keys and values of the source.
func TestMove_ExportImportExact(t *testing.T) {
	f := newMoveFixture(t)
	a := f.h
	b := enginetest.MustOpen(t)
	b.Now = a.Now

	chunks := exportAll(t, a, "orders", 1<<10)
	if len(chunks) < 10 {
		t.Fatalf("exported %d chunks, want many", len(chunks))
	}
	for _, c := range chunks {
		n := 0
		for _, kv := range c.KVs {
			n += len(kv.Key) + len(kv.Value)
		}
		if n > 1<<10 && len(c.KVs) > 1 && !isUnit(c.KVs) {
			t.Fatalf("a chunk of %d bytes in %d keys exceeds the limit", n, len(c.KVs))
		}
	}

	// Up to its last chunk the queue is invisible and refused, dead
	// letters and traces included, and the import survives a restart.
	half := len(chunks) - 1
	importAll(t, b, "orders", chunks[:half])
	hidden := func() {
		t.Helper()
		if _, err := b.Queue("orders"); !errors.Is(err, engine.ErrQueueNotFound) {
			t.Fatalf("queue visible during its import: %v", err)
		}
		if rows, n, _ := b.ListDLQ(engine.DLQFilter{}); n != 0 || len(rows) != 0 {
			t.Fatalf("dead letters visible during the import: %d", n)
		}
		if rows, n, _ := b.ListDLQ(engine.DLQFilter{Queue: "orders"}); n != 0 || len(rows) != 0 {
			t.Fatalf("dead letters of orders visible during the import: %d", n)
		}
		if _, n, _ := b.TracesByName("tenant-7", 10, 0); n != 0 {
			t.Fatalf("traces visible during the import: %d", n)
		}
		if names, n, _ := b.TraceNames(10, 0); n != 0 {
			t.Fatalf("trace names visible during the import: %+v", names)
		}
		if got := b.Push(engine.PushItem{Queue: "orders", Partition: "p0", TransactionID: "new", Payload: []byte(`1`)})[0]; got.Status != engine.Rejected || !errors.Is(got.Err, engine.ErrQueueNotFound) {
			t.Fatalf("push during the import: %+v", got)
		}
		if _, err := enginetest.Run[engine.QueueInfo](b, engine.ConfigureCmd{Queue: "orders"}); !errors.Is(err, engine.ErrQueueNotFound) {
			t.Fatalf("configure during the import: %v", err)
		}
		if _, err := enginetest.Run[engine.PopResult](b, engine.PopCmd{Queue: "orders", Group: "new", Batch: 1}); !errors.Is(err, engine.ErrQueueNotFound) {
			t.Fatalf("pop during the import: %v", err)
		}
	}
	seen := map[keyspace.Family]bool{}
	for _, c := range chunks[:half] {
		for _, kv := range c.KVs {
			seen[keyspace.Family(kv.Key[0])] = true
		}
	}
	for _, f := range []keyspace.Family{keyspace.FamilyDLQ, keyspace.FamilyCursor, keyspace.FamilyTrace, keyspace.FamilyTraceName} {
		if !seen[f] {
			t.Fatalf("family %#x is not in the chunks before the last: nothing to hide", byte(f))
		}
	}
	hidden()
	b.Reopen()
	hidden()
	if got := b.ImportsUnderWay(); !reflect.DeepEqual(got, []string{"orders"}) {
		t.Fatalf("imports under way after a restart: %v", got)
	}
	if id, epoch, next, ok := b.ImportProgress("orders"); !ok || id != chunks[0].ID || epoch != 1 || next != uint32(half) {
		t.Fatalf("import progress after a restart: %x %d %d %v", id, epoch, next, ok)
	}
	// A repeated chunk changes nothing.
	before := b.Dump()
	for i := range half {
		res := enginetest.Must[engine.ImportResult](b, importCmd("orders", 1, i, chunks[i]))
		if res.Next != uint32(half) {
			t.Fatalf("repeated chunk %d answered %+v", i, res)
		}
	}
	if d := enginetest.DiffDumps(before, b.Dump()); d != "" {
		t.Fatalf("repeated chunks changed the store: %s", d)
	}
	// A chunk out of order is refused.
	if _, err := enginetest.Run[engine.ImportResult](b, importCmd("orders", 1, half+1, chunks[half])); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("chunk out of order: %v", err)
	}
	for i := half; i < len(chunks); i++ {
		res := enginetest.Must[engine.ImportResult](b, importCmd("orders", 1, i, chunks[i]))
		if res.Done != chunks[i].Last {
			t.Fatalf("chunk %d: %+v", i, res)
		}
	}
	if res := enginetest.Must[engine.ImportResult](b, importCmd("orders", 1, 0, chunks[0])); !res.Done {
		t.Fatalf("a chunk of an import that ended: %+v", res)
	}
	importAll(t, b, "other", exportAll(t, a, "other", 1<<20))

	compare := func() {
		t.Helper()
		sameQueue(t, a, b, "orders")
		sameQueue(t, a, b, "other")
		sameTraces(t, a, b, f.traced)
		if d := enginetest.DiffDumps(withoutMeta(a.Dump()), withoutMeta(b.Dump())); d != "" {
			t.Fatalf("the stores differ: %s", d)
		}
	}
	compare()
	b.Reopen()
	compare()

	// The target serves the queue: the live lease acks, a known
	// transaction id is a duplicate, and billing continues where it was.
	acks := b.Ack(enginetest.AckMessages(f.lease, "completed")...)
	for _, r := range acks {
		if !r.Success {
			t.Fatalf("ack under the moved lease: %+v", r)
		}
	}
	if got := b.Push(engine.PushItem{Queue: "orders", Partition: "p0", TransactionID: f.orderTxn, Payload: []byte(`1`)})[0]; got.Status != engine.Duplicate {
		t.Fatalf("push of a moved transaction id: %+v", got)
	}
	pa := popPart(a, "orders", "p2", "billing", 3)
	pb := popPart(b, "orders", "p2", "billing", 3)
	if len(pb.Messages) != 3 || !reflect.DeepEqual(txns(pa), txns(pb)) {
		t.Fatalf("billing pops %q in the target, %q in the source", txns(pb), txns(pa))
	}
	if got := b.PushOne("orders", "p0", "after-move", `1`); got.Status != engine.Queued {
		t.Fatalf("push after the move: %+v", got)
	}
}

// isUnit reports whether kvs is one export unit: a key with the index
// entries that travel with it (a chunk may exceed the limit only so).
func isUnit(kvs []engine.KV) bool {
	for _, kv := range kvs[1:] {
		switch keyspace.Family(kv.Key[0]) {
		case keyspace.FamilyDLQAddr, keyspace.FamilyDLQQueue, keyspace.FamilyTraceName:
		default:
			return false
		}
	}
	return true
}

// TestMove_ImportRefusals: a chunk carrying a key of another queue, an
// import over an existing queue, and a chunk of another move are refused
// whole, and write nothing.
func TestMove_ImportRefusals(t *testing.T) {
	f := newMoveFixture(t)
	orders := exportAll(t, f.h, "orders", 16<<10)
	other := exportAll(t, f.h, "other", 1<<20)

	b := enginetest.MustOpen(t)
	importAll(t, b, "orders", orders[:2])
	before := b.Dump()
	var foreign engine.KV
	for _, kv := range other[0].KVs {
		if keyspace.Family(kv.Key[0]) == keyspace.FamilySegment {
			foreign = kv
		}
	}
	bad := importCmd("orders", 1, 2, orders[2])
	bad.KVs = append(append([]engine.KV(nil), orders[2].KVs...), foreign)
	corrupt := importCmd("orders", 1, 2, orders[2])
	corrupt.KVs = append([]engine.KV(nil), orders[2].KVs...)
	for i, kv := range corrupt.KVs {
		if keyspace.Family(kv.Key[0]) == keyspace.FamilySegment {
			v := bytes.Clone(kv.Value)
			v[len(v)/2] ^= 1
			corrupt.KVs[i].Value = v
			break
		}
		if i == len(corrupt.KVs)-1 {
			t.Fatal("chunk 2 holds no segment to corrupt")
		}
	}
	for name, cmd := range map[string]engine.ImportQueueCmd{
		"a key of another queue": bad,
		"a corrupt segment":      corrupt,
		"another move":           importCmd("orders", 2, 2, orders[2]),
		"a meta key":             {Queue: "orders", ID: orders[0].ID, Epoch: 1, Seq: 2, KVs: []engine.KV{{Key: keyspace.Meta("applied"), Value: make([]byte, 8)}}},
	} {
		if _, err := enginetest.Run[engine.ImportResult](b, cmd); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if d := enginetest.DiffDumps(before, b.Dump()); d != "" {
		t.Fatalf("a refused chunk wrote: %s", d)
	}

	// An import over a queue that exists here (another queue of the same
	// name: another id).
	c := enginetest.MustOpen(t)
	c.Advance(time.Second) // another stamp, so another queue id
	c.Configure(engine.ConfigureCmd{Queue: "orders"})
	if _, err := enginetest.Run[engine.ImportResult](c, importCmd("orders", 1, 0, orders[0])); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("import over an existing queue: %v", err)
	}
	// A first chunk that does not open with the queue record.
	if _, err := enginetest.Run[engine.ImportResult](c, importCmd("fresh", 1, 0, other[0])); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("import under another name: %v", err)
	}

	// Abandoning the import leaves nothing behind.
	if !enginetest.Must[bool](b, engine.DropQueueCmd{Queue: "orders", ID: orders[0].ID}) {
		t.Fatal("drop of the import under way found nothing")
	}
	if rest := withoutMeta(b.Dump()); len(rest) != 0 {
		t.Fatalf("an abandoned import left %d keys, the first %x", len(rest), rest[0].Key)
	}
	if got := b.ImportsUnderWay(); len(got) != 0 {
		t.Fatalf("imports under way after the drop: %v", got)
	}
}

// TestMove_DropLeavesNothing: dropping the source copy removes every key
// of the queue, dead letters and traces included, and no other key.
func TestMove_DropLeavesNothing(t *testing.T) {
	f := newMoveFixture(t)
	a := f.h
	info, err := a.Queue("orders")
	if err != nil {
		t.Fatal(err)
	}
	before := a.Dump()
	if enginetest.Must[bool](a, engine.DropQueueCmd{Queue: "orders", ID: engine.ID{1}}) {
		t.Fatal("a drop with another id dropped the queue")
	}
	if !enginetest.Must[bool](a, engine.DropQueueCmd{Queue: "orders", ID: info.ID}) {
		t.Fatal("drop found no queue")
	}
	after := a.Dump()
	ids := map[engine.ID]bool{}
	for _, p := range info.Partitions {
		ids[p.ID] = true
	}
	kept := map[string][]byte{}
	for _, kv := range before {
		kept[string(kv.Key)] = kv.Value
	}
	for _, kv := range after {
		if ofQueue(t, kv.Key, kv.Value, "orders", ids) {
			t.Errorf("key %x of the dropped queue is left", kv.Key)
		}
		if v, ok := kept[string(kv.Key)]; !ok || (!bytes.Equal(v, kv.Value) && keyspace.Family(kv.Key[0]) != keyspace.FamilyMeta) {
			t.Errorf("key %x changed by the drop", kv.Key)
		}
		delete(kept, string(kv.Key))
	}
	for k, v := range kept {
		if !ofQueue(t, []byte(k), v, "orders", ids) {
			t.Errorf("key %x of another queue dropped", k)
		}
	}
	if _, n, _ := a.ListDLQ(engine.DLQFilter{Queue: "other"}); n != 1 {
		t.Fatalf("other's dead letters: %d", n)
	}
}

// ofQueue reports whether a key belongs to queue (whose partitions are
// ids), by every family's own rule.
func ofQueue(t *testing.T, k, v []byte, queue string, ids map[engine.ID]bool) bool {
	t.Helper()
	var id engine.ID
	switch f := keyspace.Family(k[0]); f {
	case keyspace.FamilyQueue:
		return string(k[1:]) == queue
	case keyspace.FamilyPartition, keyspace.FamilySegment, keyspace.FamilyTxn, keyspace.FamilyCursor,
		keyspace.FamilyDLQAddr, keyspace.FamilyTxnExpiry, keyspace.FamilyTrace:
		copy(id[:], k[1:17])
		return ids[id]
	case keyspace.FamilySub:
		q, _, _ := keyspace.ParseSub(k)
		return q == queue
	case keyspace.FamilyDLQ:
		rec, err := keyspace.DecodeDeadLetter(v)
		if err != nil {
			t.Fatal(err)
		}
		return rec.Queue == queue
	case keyspace.FamilyDLQQueue:
		q, _, _, err := keyspace.ParseDLQQueue(k)
		if err != nil {
			t.Fatal(err)
		}
		return q == queue
	case keyspace.FamilyTraceName:
		copy(id[:], v[:16])
		return ids[id]
	}
	return false
}

// TestMove_ExportRefusesStreams: a queue a stream reads is not exported.
func TestMove_ExportRefusesStreams(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("orders", "", "t", `1`)
	enginetest.Must[engine.StreamRegistered](h, engine.StreamRegisterCmd{Name: "per_customer", SourceQueue: "orders", ConfigHash: "h"})
	s, err := h.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ExportQueue("orders", nil, 1<<20); !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "per_customer") {
		t.Fatalf("export of a stream's source: %v", err)
	}
	if _, err := s.ExportQueue("nope", nil, 1<<20); !errors.Is(err, engine.ErrQueueNotFound) {
		t.Fatalf("export of a missing queue: %v", err)
	}
}

// noise is n bytes of hex that zstd cannot shrink much, different for each
// seed.
func noise(seed, n int) string {
	var b strings.Builder
	x := uint64(seed)*0x9E3779B97F4A7C15 + 1
	for b.Len() < n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		fmt.Fprintf(&b, "%016x", x)
	}
	return b.String()[:n]
}

// BenchmarkMove_ImportChunk measures import chunks' apply (each a batch
// of its own, committed unsynced as the FSM does) at the chunk size the
// replication layer uses and at a quarter of it, on a queue of 32 KiB
// messages: what a chunk costs the target group's serial apply.
func BenchmarkMove_ImportChunk(b *testing.B) {
	src := enginetest.MustOpen(b)
	for i := range 1024 {
		src.Push(engine.PushItem{Queue: "orders", Partition: fmt.Sprintf("p%d", i%4), Payload: []byte(`"` + noise(i, 32<<10) + `"`)})
	}
	for _, size := range []int{engine.ExportChunkBytes / 4, engine.ExportChunkBytes} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			chunks := exportAll(b, src, "orders", size)
			total := 0
			for _, c := range chunks {
				for _, kv := range c.KVs {
					total += len(kv.Key) + len(kv.Value)
				}
			}
			applied := 0
			for n := 0; n < b.N; n++ {
				b.StopTimer()
				dst := enginetest.MustOpen(b)
				b.StartTimer()
				for i, c := range chunks {
					if res := dst.Apply(importCmd("orders", 1, i, c)); res.Err != nil {
						b.Fatal(res.Err)
					}
				}
				applied += len(chunks)
			}
			b.ReportMetric(float64(total*b.N)/b.Elapsed().Seconds()/1e6, "MB/s")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(applied), "ms/chunk")
		})
	}
}

// TestMove_PartitionRecordsSpanChunks: a queue whose partition records
// alone fill several chunks arrives whole, its keys and its answers equal.
func TestMove_PartitionRecordsSpanChunks(t *testing.T) {
	a := enginetest.MustOpen(t)
	for i := range 200 {
		a.PushOne("wide", fmt.Sprintf("part-%03d", i), fmt.Sprintf("t-%d", i), `{"i":1}`)
	}
	popQueue(a, "wide", "g1", 50)
	chunks := exportAll(t, a, "wide", 512)
	partChunks := 0
	for _, c := range chunks {
		for _, kv := range c.KVs {
			if keyspace.Family(kv.Key[0]) == keyspace.FamilyPartition {
				partChunks++
				break
			}
		}
	}
	if partChunks < 3 {
		t.Fatalf("partition records in %d chunks, want several", partChunks)
	}
	b := enginetest.MustOpen(t)
	importAll(t, b, "wide", chunks)
	qa, _ := a.Queue("wide")
	qb, err := b.Queue("wide")
	if err != nil || !reflect.DeepEqual(qa, qb) || len(qb.Partitions) != 200 {
		t.Fatalf("queue after the import: %d partitions, %v", len(qb.Partitions), err)
	}
	if d := enginetest.DiffDumps(withoutMeta(a.Dump()), withoutMeta(b.Dump())); d != "" {
		t.Fatalf("the stores differ: %s", d)
	}
}
